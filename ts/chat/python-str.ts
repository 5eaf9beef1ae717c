/**
 * Python's `str()` of a value a chat template computes, as Jinja2 prints it: `True`, `None`,
 * `{'a': 1}`, `[1.5, 'x']`. vLLM renders templates with Python's Jinja2, so a template that
 * prints a dict, a list, a boolean or `none` without `tojson` puts these characters into the
 * prompt; @huggingface/jinja would print JSON instead (`{"a": 1}`, `true`, nothing), and the
 * gateway would route on other tokens than the engine sees.
 *
 * The input is one of @huggingface/jinja's runtime values (`{ type, value }`), so integers and
 * floats stay apart wherever the template or the library made them (`{{ 1.0 }}` is a float; a
 * request's JSON `1.0` is not, as the library reads JSON numbers).
 * @internal
 * @module
 */

/** @huggingface/jinja's runtime value, as far as printing reads it. */
export interface RuntimeValue {
  type: string;
  value: unknown;
}

/** Python's `str(value)`: a string as it is, anything else as its `repr`. */
export function pythonStr(v: RuntimeValue): string {
  if (v.type === 'StringValue') return v.value as string;
  // Jinja2 prints an undefined variable as nothing.
  if (v.type === 'UndefinedValue') return '';
  return pythonRepr(v);
}

/** Python's `repr(value)`. */
export function pythonRepr(v: RuntimeValue): string {
  switch (v.type) {
    case 'StringValue':
      return stringRepr(v.value as string);
    case 'IntegerValue':
      return integerRepr(v.value as number);
    case 'FloatValue':
      return floatRepr(v.value as number);
    case 'BooleanValue':
      return v.value ? 'True' : 'False';
    case 'NullValue':
    case 'UndefinedValue':
      return 'None';
    case 'ArrayValue':
      return `[${(v.value as RuntimeValue[]).map(pythonRepr).join(', ')}]`;
    case 'TupleValue': {
      const items = (v.value as RuntimeValue[]).map(pythonRepr);
      return items.length === 1 ? `(${items[0]},)` : `(${items.join(', ')})`;
    }
    case 'ObjectValue':
    case 'KeywordArgumentsValue':
      return dictRepr(v.value as Map<string, RuntimeValue>);
    case 'NamespaceValue':
      return `<Namespace ${dictRepr(v.value as Map<string, RuntimeValue>)}>`;
    default:
      // Functions and macros: no template prints one on purpose.
      return String(v.value);
  }
}

function dictRepr(entries: Map<string, RuntimeValue>): string {
  const items: string[] = [];
  for (const [key, value] of entries) items.push(`${stringRepr(key)}: ${pythonRepr(value)}`);
  return `{${items.join(', ')}}`;
}

/** Every integer digit, as Python prints an int (JavaScript switches to exponents at 1e21). */
function integerRepr(n: number): string {
  return Number.isSafeInteger(n) ? String(n) : BigInt(n).toString();
}

/**
 * Python's float repr: the shortest digits that read back as the same double (which JavaScript
 * also finds), positional from 1e-4 up to 1e16 with at least one decimal (`1.0`), otherwise
 * `1e+16`, `1.5e-05`.
 */
export function floatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mantissa, exp] = x.toExponential().split('e');
  const exponent = Number(exp);
  const sign = mantissa.startsWith('-') ? '-' : '';
  const digits = mantissa.replace('-', '').replace('.', '');
  if (exponent < -4 || exponent >= 16) {
    const rest = digits.slice(1);
    const e = Math.abs(exponent).toString().padStart(2, '0');
    return `${sign}${digits[0]}${rest ? `.${rest}` : ''}e${exponent < 0 ? '-' : '+'}${e}`;
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, '0');
  const fraction = digits.slice(exponent + 1);
  return `${sign}${whole}.${fraction || '0'}`;
}

/** Characters Python's `str.isprintable` refuses (other and separator categories), but space. */
const UNPRINTABLE = /[\p{C}\p{Z}]/u;

/**
 * Python's string repr: single quotes unless the text has one and no double quote, backslash
 * escapes for the quote, backslash, `\t \n \r` and unprintable characters (`\x..`, `\u....`,
 * `\U........`, lone surrogates included).
 */
export function stringRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch !== ' ' && UNPRINTABLE.test(ch)) out += codePointEscape(ch.codePointAt(0) as number);
    else out += ch;
  }
  return out + quote;
}

function codePointEscape(code: number): string {
  if (code < 0x100) return `\\x${code.toString(16).padStart(2, '0')}`;
  if (code < 0x10000) return `\\u${code.toString(16).padStart(4, '0')}`;
  return `\\U${code.toString(16).padStart(8, '0')}`;
}
