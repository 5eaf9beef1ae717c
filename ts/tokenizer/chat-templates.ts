/**
 * A local model's chat templates, found where transformers finds them, and the one a request is
 * rendered with, chosen as vLLM chooses it. Models saved by recent transformers keep their
 * template in `chat_template.jinja` beside the tokenizer, not in `tokenizer_config.json`; some
 * have several named ones (a `tool_use` template beside the `default`), as a list in the config
 * or as files in `additional_chat_templates/`. A gateway that only read the config's string
 * would refuse every chat of those models, or render another template than the engine.
 *
 * Loading (transformers' `from_pretrained`): the config's `chat_template` (a string, or a list of
 * `{name, template}`); `chat_template.jinja` replaces it; each `additional_chat_templates/<name>.jinja`
 * adds a named one (the single template, if any, becoming `default`).
 * Choosing (vLLM's `resolve_chat_template`, then transformers' `get_chat_template`): a request's
 * own trusted `chat_template`; else the gateway's `chatTemplate` (vLLM's `--chat-template`);
 * else the single template, or of named ones `tool_use` when the request has `tools` (even an
 * empty list) and the model has one, else `default`.
 * @internal
 * @module
 */

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ChatPrompt } from '../chat/prompt.js';
import { chatTemplate as compileChatTemplate } from '../chat/prompt.js';
import { KvRouteError } from '../errors.js';
import { BadRequest } from '../mock-worker/bad-request.js';
import { describe } from '../validate.js';

/** A model's chat templates: none, one, or several by name. */
export type ChatTemplates = string | ReadonlyMap<string, string> | undefined;

function readTemplateFile(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `cannot read the chat template ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** The config's `chat_template`: a string, or a list of `{name, template}`. */
export function configTemplates(value: unknown): ChatTemplates {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  const bad = () =>
    new KvRouteError(
      'ERR_INVALID_ARG',
      `tokenizer_config.json's chat_template must be a string or a list of {name, template}, got ${describe(value)}`,
    );
  if (!Array.isArray(value)) throw bad();
  const named = new Map<string, string>();
  for (const entry of value) {
    const { name, template } = (entry ?? {}) as { name?: unknown; template?: unknown };
    if (typeof name !== 'string' || typeof template !== 'string') throw bad();
    named.set(name, template);
  }
  return named;
}

/**
 * Compiles each template, so a broken one stops the tokenizer at its creation rather than every
 * chat. `where` names the model in the error.
 * @throws {KvRouteError} `ERR_INVALID_ARG` when a template does not parse.
 */
export function compileTemplates(templates: ChatTemplates, where: string): void {
  for (const [name, source] of typeof templates === 'string' ? [['', templates]] : (templates ?? [])) {
    try {
      compileChatTemplate(source);
    } catch (err) {
      const which = name === '' ? 'the chat template' : `the chat template "${name}"`;
      throw new KvRouteError('ERR_INVALID_ARG', `${which} of ${where}: ${(err as Error).message}`, { cause: err });
    }
  }
}

/**
 * The chat templates of the model whose `tokenizer.json` is at `path`, its config already read:
 * the config's, then the files beside it (see the module docs). Each is compiled.
 * @throws {KvRouteError} `ERR_INVALID_ARG` when the config's `chat_template` has another shape, a
 *   file cannot be read, or a template does not parse.
 */
export function loadChatTemplates(path: string, config: Readonly<Record<string, unknown>>): ChatTemplates {
  const dir = dirname(path);
  let templates = configTemplates(config.chat_template);
  const file = join(dir, 'chat_template.jinja');
  if (existsSync(file)) templates = readTemplateFile(file);
  const extraDir = join(dir, 'additional_chat_templates');
  if (existsSync(extraDir)) {
    const extra = readdirSync(extraDir)
      .filter((f) => f.endsWith('.jinja'))
      .sort();
    if (extra.length > 0) {
      const named = new Map(typeof templates === 'string' ? [['default', templates]] : (templates ?? []));
      for (const f of extra) named.set(f.slice(0, -'.jinja'.length), readTemplateFile(join(extraDir, f)));
      templates = named;
    }
  }
  compileTemplates(templates, path);
  return templates;
}

/** What Hugging Face gives every template besides the request's fields: the special tokens the config sets. */
export function templateVariables(config: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const text = (v: unknown): string | undefined => {
    if (typeof v === 'string') return v;
    if (v !== null && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string')
      return (v as { content: string }).content;
    return undefined;
  };
  const variables: Record<string, unknown> = {};
  for (const key of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
    const value = text(config[key]);
    if (value !== undefined) variables[key] = value;
  }
  if (Array.isArray(config.additional_special_tokens))
    variables.additional_special_tokens = config.additional_special_tokens.map(text).filter((t) => t !== undefined);
  return variables;
}

/**
 * The template a chat is rendered with (see the module docs), or a request's own (its trust is
 * checked when it is rendered).
 * @throws {BadRequest} when the model has no template to use for it.
 */
export function chooseChatTemplate(chat: ChatPrompt, templates: ChatTemplates, override: string | undefined, where: string): string {
  if (chat.chat_template != null) return chat.chat_template;
  if (override !== undefined) return override;
  if (typeof templates === 'string') return templates;
  if (templates === undefined)
    throw new BadRequest(`no chat template: ${where} has none (tokenizer_config.json, chat_template.jinja) and no chatTemplate was given`);
  const hasTools = chat.tools !== undefined && chat.tools !== null;
  const chosen = (hasTools ? templates.get('tool_use') : undefined) ?? templates.get('default');
  if (chosen === undefined)
    throw new BadRequest(`the model has several chat templates (${[...templates.keys()].join(', ')}) and none named default`);
  return chosen;
}
