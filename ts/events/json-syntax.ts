/**
 * The words of a JSON syntax error, the same from both backends. Each backend's parser words its
 * refusals its own way (serde_json: "EOF while parsing a value at line 1 column 6"; lossless-json:
 * "Object value expected after ':' at position 6"), and even points at different characters
 * (`[tru]`: serde_json the `]`, lossless-json the `t`). So a refused text is scanned once more,
 * by this scanner here and by its twin in Rust (`json/syntax.rs`), and the refusal says what the
 * scanner finds: the first character at which the text stops being the beginning of a JSON value
 * (RFC 8259), what was expected there, and its position as the other JSON rules give theirs (an
 * offset in UTF-16 code units, the end of the text when it ends too soon). Only refused texts are
 * scanned, so a valid one costs nothing.
 * @internal
 * @module
 */

/** What may come next: the scanner's states, each a place in the grammar. */
type Expecting =
  | 'value'
  | 'value or ]' // after `[`
  | 'key or }' // after `{`
  | 'key' // after `,` in an object
  | ':'
  | ', or ]'
  | ', or }'
  | 'end';

const EXPECTED: Record<Expecting, string> = {
  value: 'a value',
  'value or ]': "a value or ']'",
  'key or }': "a string key or '}'",
  key: 'a string key',
  ':': "':'",
  ', or ]': "',' or ']'",
  ', or }': "',' or '}'",
  end: 'the end of the text',
};

const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\r';
const isDigit = (c: string) => c >= '0' && c <= '9';
const isHex = (c: string) => isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');

/**
 * A character as a message shows it: quoted when it prints, else as its code point (controls,
 * spaces other than the ASCII one, the byte-order mark, line and paragraph separators).
 */
export function shown(c: string | undefined): string {
  if (c === undefined) return 'the end of the text';
  const code = c.codePointAt(0) as number;
  const invisible = code <= 0x20 || (code >= 0x7f && code <= 0xa0) || code === 0x2028 || code === 0x2029 || code === 0xfeff;
  return invisible ? `U+${code.toString(16).toUpperCase().padStart(4, '0')}` : `'${c}'`;
}

/** A refusal at UTF-16 offset `at`: `expected` there, `got` the character found (undefined: the end). */
const refusal = (expected: string, got: string | undefined, at: number) => `expected ${expected}, got ${shown(got)} at position ${at}`;

/**
 * The syntax error of `text` in the words both backends use, or undefined when it is the
 * beginning and end of one JSON value (its numbers' range, repeated keys and the like are the
 * other rules' business: `json-rules.ts`).
 */
export function syntaxError(text: string): string | undefined {
  // Open containers, innermost last: what closes them.
  const open: (']' | '}')[] = [];
  let expecting: Expecting = 'value';
  let i = 0;
  /** After a value: what its container (or the text) takes next. */
  const afterValue = (): Expecting => (open.length === 0 ? 'end' : open[open.length - 1] === ']' ? ', or ]' : ', or }');
  while (true) {
    while (i < text.length && isSpace(text[i])) i++;
    const c = text[i];
    if (c === undefined) return expecting === 'end' ? undefined : refusal(EXPECTED[expecting], undefined, i);
    switch (expecting) {
      case 'end':
        return refusal(EXPECTED.end, charAt(text, i), i);
      case ':':
        if (c !== ':') return refusal(EXPECTED[':'], charAt(text, i), i);
        i++;
        expecting = 'value';
        continue;
      case ', or ]':
      case ', or }': {
        const close: ']' | '}' = expecting === ', or ]' ? ']' : '}';
        if (c === ',') {
          i++;
          expecting = close === ']' ? 'value' : 'key';
        } else if (c === close) {
          i++;
          open.pop();
          expecting = afterValue();
        } else return refusal(EXPECTED[expecting], charAt(text, i), i);
        continue;
      }
      case 'key or }':
      case 'key': {
        if (c === '}' && expecting === 'key or }') {
          i++;
          open.pop();
          expecting = afterValue();
          continue;
        }
        if (c !== '"') return refusal(EXPECTED[expecting], charAt(text, i), i);
        const end = scanString(text, i);
        if (typeof end === 'string') return end;
        i = end;
        expecting = ':';
        continue;
      }
      default: {
        // A value ('value', or 'value or ]' right after `[`).
        if (c === ']' && expecting === 'value or ]') {
          i++;
          open.pop();
          expecting = afterValue();
          continue;
        }
        if (c === '[' || c === '{') {
          i++;
          open.push(c === '[' ? ']' : '}');
          expecting = c === '[' ? 'value or ]' : 'key or }';
          continue;
        }
        const end =
          c === '"' ? scanString(text, i) : c === '-' || isDigit(c) ? scanNumber(text, i) : scanLiteral(text, i, EXPECTED[expecting]);
        if (typeof end === 'string') return end;
        i = end;
        expecting = afterValue();
      }
    }
  }
}

/** The whole character (a surrogate pair's two units) at `i`. */
function charAt(text: string, i: number): string {
  return String.fromCodePoint(text.codePointAt(i) as number);
}

/** A string starting at `i` (its `"`): the offset after it, or the refusal. */
function scanString(text: string, i: number): number | string {
  i++;
  while (true) {
    const c = text[i];
    if (c === undefined) return refusal("'\"'", undefined, i);
    if (c === '"') return i + 1;
    if (c < ' ') return refusal('a character of a string (a control character must be escaped)', c, i);
    if (c !== '\\') {
      i++;
      continue;
    }
    const e = text[i + 1];
    if (e === undefined) return refusal('an escape', undefined, i + 1);
    if (e === 'u') {
      for (let k = 2; k < 6; k++) {
        const h = text[i + k];
        if (h === undefined || !isHex(h))
          return refusal('a hex digit of a \\u escape', h === undefined ? undefined : charAt(text, i + k), i + k);
      }
      i += 6;
    } else if ('"\\/bfnrt'.includes(e)) i += 2;
    else return refusal('an escape (one of "\\/bfnrtu)', charAt(text, i + 1), i + 1);
  }
}

/** A number starting at `i`: the offset after it, or the refusal (RFC 8259's grammar: no leading zero, no bare `.`). */
function scanNumber(text: string, i: number): number | string {
  const isDigitAt = (at: number) => at < text.length && isDigit(text[at]);
  const digitsFrom = (at: number): number | string => {
    if (!isDigitAt(at)) return refusal('a digit', at < text.length ? charAt(text, at) : undefined, at);
    while (isDigitAt(at)) at++;
    return at;
  };
  if (text[i] === '-') i++;
  if (text[i] === '0') {
    i++;
    if (isDigitAt(i)) return refusal('a number without a leading zero', text[i], i);
  } else {
    const end = digitsFrom(i);
    if (typeof end === 'string') return end;
    i = end;
  }
  if (text[i] === '.') {
    const end = digitsFrom(i + 1);
    if (typeof end === 'string') return end;
    i = end;
  }
  if (text[i] === 'e' || text[i] === 'E') {
    i++;
    if (text[i] === '+' || text[i] === '-') i++;
    return digitsFrom(i);
  }
  return i;
}

/**
 * `true`, `false` or `null` at `i`: the offset after it, or the refusal at its first wrong
 * character (`expected` when it begins none: what the place takes, `]` too right after `[`).
 */
function scanLiteral(text: string, i: number, expected: string): number | string {
  const word = text[i] === 't' ? 'true' : text[i] === 'f' ? 'false' : text[i] === 'n' ? 'null' : undefined;
  if (word === undefined) return refusal(expected, charAt(text, i), i);
  for (let k = 1; k < word.length; k++) {
    if (text[i + k] !== word[k]) return refusal(`'${word}'`, i + k < text.length ? charAt(text, i + k) : undefined, i + k);
  }
  return i + word.length;
}
