/**
 * Which shape of message content a chat template expects, found the way vLLM finds it
 * (`--chat-template-content-format auto`): a template that loops over a message's `content`
 * gets OpenAI's list of parts ("openai"); any other gets the parts' text joined into one string
 * ("string"). The two render differently (a multi-part message, or a template that only shows a
 * part's text from inside such a loop), so a gateway that renders the other shape than its
 * engine routes on other tokens.
 *
 * vLLM's rule, on the template's syntax tree: the names that hold `messages` (itself, and any
 * `{% set x = ... %}` of it, sliced, filtered or tested, followed transitively), the loop
 * variables of loops over one of those (the messages), and then whether any loop iterates over
 * one of those loop variables' `content` (`m.content`, `m['content']`, again through slices,
 * filters and tests). Where vLLM's own walk fails (a loop or an assignment of the messages to
 * something other than a plain name) it falls back to "string"; so does this.
 * @internal
 * @module
 */

import type { Template } from '@huggingface/jinja';

/** The content shape a template is rendered with. */
export type ContentFormat = 'string' | 'openai';

/** vLLM's `--chat-template-content-format`: a shape, or `auto` to detect it from the template. */
export type ContentFormatOption = 'auto' | ContentFormat;

/** A node of @huggingface/jinja's syntax tree, as far as this walk reads it. */
interface Node {
  type: string;
  [field: string]: unknown;
}

function isNode(v: unknown): v is Node {
  return v !== null && typeof v === 'object' && typeof (v as { type?: unknown }).type === 'string';
}

/** Every node of the tree, depth first. */
function* allNodes(node: unknown): Generator<Node> {
  if (Array.isArray(node)) {
    for (const child of node) yield* allNodes(child);
    return;
  }
  if (!isNode(node)) return;
  yield node;
  for (const [key, value] of Object.entries(node))
    if (key !== 'type' && value !== null && typeof value === 'object') yield* allNodes(value);
}

/** The names of `node` when it is a plain identifier. */
function identifierName(node: unknown): string | undefined {
  return isNode(node) && node.type === 'Identifier' ? (node.value as string) : undefined;
}

/** `varname[key]` or `varname.key`. */
function isKeyAccess(node: Node, varname: string, key: string): boolean {
  if (node.type !== 'MemberExpression' || identifierName(node.object) !== varname) return false;
  const property = node.property as Node;
  if (node.computed) return property.type === 'StringLiteral' && property.value === key;
  return identifierName(property) === key;
}

/** `varname` (or `varname[key]` when `key` is given), possibly sliced, filtered or tested. */
function accesses(node: unknown, varname: string, key?: string): boolean {
  if (!isNode(node)) return false;
  if (node.type === 'FilterExpression' || node.type === 'TestExpression') return accesses(node.operand, varname, key);
  // `for x in xs if cond`: vLLM's parser keeps the condition apart from what the loop iterates.
  if (node.type === 'SelectExpression') return accesses(node.lhs, varname, key);
  if (node.type === 'MemberExpression' && node.computed && isNode(node.property) && node.property.type === 'SliceExpression')
    return accesses(node.object, varname, key);
  return key === undefined ? identifierName(node) === varname : isKeyAccess(node, varname, key);
}

/** Thrown where vLLM's walk would fail an assertion (its detection then answers "string"). */
class NotAName extends Error {}

/** The names holding `messages` or a part of it, through `{% set %}` chains. */
function messagesNames(nodes: readonly Node[]): string[] {
  const names = ['messages'];
  const queue = ['messages'];
  const sets = nodes.filter((n) => n.type === 'Set' && n.value !== null);
  while (queue.length > 0) {
    const related = queue.shift() as string;
    for (const set of sets) {
      if (!accesses(set.value, related)) continue;
      const name = identifierName(set.assignee);
      if (name === undefined) throw new NotAName();
      names.push(name);
      if (name !== related) queue.push(name);
    }
  }
  return names;
}

/** The loops over one of `iterables` (each `[varname, key?]`), in the template's order. */
function* loopsOver(nodes: readonly Node[], iterables: readonly (readonly [string, string?])[]): Generator<string> {
  for (const loop of nodes) {
    if (loop.type !== 'For') continue;
    if (!iterables.some(([name, key]) => accesses(loop.iterable, name, key))) continue;
    const name = identifierName(loop.loopvar);
    if (name === undefined) throw new NotAName();
    yield name;
  }
}

/** The content format vLLM detects for a compiled template (see the module docs). */
export function detectContentFormat(template: Template): ContentFormat {
  const nodes = [...allNodes(template.parsed)];
  try {
    const messages = [
      ...loopsOver(
        nodes,
        messagesNames(nodes).map((name) => [name] as const),
      ),
    ];
    // Like vLLM, stop at the first loop over a message's content.
    const first = loopsOver(
      nodes,
      messages.map((name) => [name, 'content'] as const),
    ).next();
    return first.done ? 'string' : 'openai';
  } catch (err) {
    if (err instanceof NotAName) return 'string';
    throw err;
  }
}
