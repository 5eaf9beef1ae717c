/**
 * Flags of the `kvroute` subcommands on `node:util`'s `parseArgs`, each with its help text and
 * default, so that `--help` is generated from the same table the parser uses.
 * @internal
 * @module
 */

import { parseArgs } from 'node:util';
import { KvRouteError } from './errors.js';

/** A command-line mistake: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly usage?: string,
  ) {
    super(message);
  }
}

/**
 * An option's error as a usage error in the words of the flags that set it: each option name of
 * `names` (a pattern and its flag) replaced by its flag. Anything but a `KvRouteError` is rethrown.
 */
export function asFlagError(err: unknown, names: ReadonlyArray<readonly [RegExp, string]>, usage: string): never {
  if (!(err instanceof KvRouteError)) throw err;
  throw new UsageError(
    names.reduce((m, [name, flag]) => m.replace(name, flag), err.message),
    usage,
  );
}

export interface Flag {
  kind: 'number' | 'string' | 'boolean';
  /** What it does. */
  help: string;
  /** The default, as shown in the help (omitted: none). */
  default?: string;
  /** The placeholder shown after the flag. */
  value?: string;
  /** May be given several times (the values are collected into an array). */
  multiple?: boolean;
}

export type Flags = Record<string, Flag>;

/**
 * The widest flag column of a help text. A longer flag (`serve --worker <id=1,url=…>`) puts its
 * description on the next line, so that one long value does not push every other description
 * a hundred columns to the right.
 */
const MAX_FLAG_COLUMN = 44;

/** The help of one command: synopsis, then one line per flag with its default. */
export function helpText(synopsis: string, description: string, flags: Flags): string {
  const rows = Object.entries(flags).map(([name, f]) => {
    const left = `  --${name}${f.kind === 'boolean' ? '' : ` <${f.value ?? f.kind}>`}${f.multiple ? ' …' : ''}`;
    return [left, `${f.help}${f.default !== undefined ? ` (default: ${f.default})` : ''}`];
  });
  const fitting = rows.map((r) => r[0].length).filter((n) => n + 2 <= MAX_FLAG_COLUMN);
  const width = Math.max(...fitting, 14) + 2;
  const lines = rows.map(([l, r]) => (l.length + 2 <= width ? `${l.padEnd(width)}${r}` : `${l}\n${' '.repeat(width)}${r}`));
  return `usage: ${synopsis}\n\n${description}\n\noptions:\n${lines.join('\n')}\n  ${'-h, --help'.padEnd(width - 2)}this help\n`;
}

/** Parses `argv` against `flags` (plus `-h`/`--help`); numbers are checked to be finite. */
export function parseCommand(
  argv: string[],
  flags: Flags,
  usage: string,
): { positional: string[]; values: Record<string, string | number | boolean | string[]>; help: boolean } {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, f] of Object.entries(flags))
    options[name] = { type: f.kind === 'boolean' ? 'boolean' : 'string', multiple: f.multiple === true };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    const message = (err as Error).message.replace(/\. To specify a positional argument.*$/s, '');
    throw new UsageError(message, usage);
  }
  const values: Record<string, string | number | boolean | string[]> = {};
  for (const [name, raw] of Object.entries(parsed.values)) {
    if (name === 'help' || raw === undefined) continue;
    const f = flags[name];
    if (f.multiple) values[name] = raw as string[];
    else if (f.kind === 'number') {
      const n = Number(raw);
      if (typeof raw !== 'string' || raw.trim() === '' || !Number.isFinite(n))
        throw new UsageError(`--${name} must be a number, got "${String(raw)}"`, usage);
      values[name] = n;
    } else values[name] = raw as string | boolean;
  }
  return { positional: parsed.positionals, values, help: parsed.values.help === true };
}
