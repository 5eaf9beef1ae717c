/**
 * The small flag parser the `kvroute` subcommands share.
 * @internal
 * @module
 */

/** A command-line mistake: printed with the usage, exit code 2. */
export class UsageError extends Error {}

/** `--name value` or `--name=value` flags of known kinds; anything else is positional. */
export function parseArgs(
  argv: string[],
  flags: Record<string, 'number' | 'string'>,
): { positional: string[]; values: Record<string, string | number> } {
  const positional: string[] = [];
  const values: Record<string, string | number> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const [name, inline] = a.slice(2).split(/=(.*)/s, 2);
    const kind = flags[name];
    if (!kind) throw new UsageError(`unknown option --${name}`);
    const raw = inline ?? argv[++i];
    if (raw === undefined) throw new UsageError(`--${name} needs a value`);
    if (kind === 'number') {
      const n = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${name} must be a number, got "${raw}"`);
      values[name] = n;
    } else values[name] = raw;
  }
  return { positional, values };
}
