/**
 * Makes a compiled @huggingface/jinja template print values as Python's Jinja2 does (see
 * `python-str.ts`), by rewriting its syntax tree once, at compile time: every value a block
 * outputs (`{{ x }}`), both operands of `~`, and the `string` filter go through
 * {@link PYTHON_STR}, a function the render passes in. The rewritten call wraps its argument in
 * a list (`f([x])`), because the library hands a template's arguments to a JavaScript function
 * as plain values, losing the difference between `1` and `1.0`, but keeps a list's items as its
 * own runtime values. Text between tags, and what is already a string, is left alone. `join`
 * joins its items' `str()`. A loop over a string goes over its characters, as in Python (the
 * library refuses it): the loop's sequence `s` becomes `f([s]) if s is string else s`.
 * @internal
 * @module
 */

import type { Template } from '@huggingface/jinja';
import { pythonStr, type RuntimeValue } from './python-str.js';

/** The name the rewritten template calls; passed in by every render (`pythonPrinting`). */
export const PYTHON_STR = '__kvroute_python_str__';

/** The name of the function that splits a string a loop goes over into its characters. */
export const PYTHON_CHARS = '__kvroute_python_chars__';

/** The name of the function that gives `join` the strings Python joins. */
export const PYTHON_JOINED = '__kvroute_python_joined__';

/** The render variables that {@link PYTHON_STR}, {@link PYTHON_CHARS} and {@link PYTHON_JOINED} name. */
export const pythonPrinting: Record<string, unknown> = {
  [PYTHON_STR]: (args: RuntimeValue[]) => pythonStr(args[0]),
  // Python iterates a string by code points.
  [PYTHON_CHARS]: (args: RuntimeValue[]) => Array.from(args[0].value as string),
  [PYTHON_JOINED]: (args: RuntimeValue[]) => joined(args[0]),
};

/** What Jinja2's `join` joins: a list's items as `str()`, a string's characters, a dict's keys. */
function joined(v: RuntimeValue): string[] {
  if (v.type === 'ArrayValue' || v.type === 'TupleValue') return (v.value as RuntimeValue[]).map(pythonStr);
  if (v.type === 'StringValue') return Array.from(v.value as string);
  if (v.type === 'ObjectValue') return [...(v.value as Map<string, RuntimeValue>).keys()];
  throw new Error(`join: '${v.type}' object is not iterable`);
}

/** A node of the library's syntax tree: dispatch is by `type`, so plain objects serve. */
interface Node {
  type: string;
  [field: string]: unknown;
}

/** Statement lists of each statement kind: whatever they output is printed. */
const BODIES: Record<string, string[]> = {
  Program: ['body'],
  If: ['body', 'alternate'],
  For: ['body', 'defaultBlock'],
  Set: ['body'],
  Macro: ['body'],
  CallStatement: ['body'],
  FilterStatement: ['body'],
};

/** Node types that print as themselves: already strings, or statements that print nothing. */
const PRINTS_AS_IS = new Set(['StringLiteral', 'Comment', 'Break', 'Continue', ...Object.keys(BODIES)]);

function isNode(v: unknown): v is Node {
  return v !== null && typeof v === 'object' && typeof (v as { type?: unknown }).type === 'string';
}

/** Filters whose result is a string whatever they are given (a call's cost saved per output). */
const STRING_FILTERS = new Set(['tojson', 'trim', 'upper', 'lower', 'title', 'capitalize', 'replace', 'join', 'indent', 'format']);

/**
 * Whether `expr` surely makes a string, so printing it needs no call: a string literal, a string
 * filter, `~`, a `+` with a string on one side (Python refuses any other operand, and so does
 * the library, or it concatenates as before), or a choice between two such.
 */
function makesString(expr: Node): boolean {
  switch (expr.type) {
    case 'StringLiteral':
      return true;
    case 'FilterExpression':
      return STRING_FILTERS.has(filterName(expr) as string);
    case 'BinaryExpression': {
      const operator = (expr.operator as { value?: unknown }).value;
      return operator === '~' || (operator === '+' && (makesString(expr.left as Node) || makesString(expr.right as Node)));
    }
    case 'Ternary':
      return makesString(expr.trueExpr as Node) && makesString(expr.falseExpr as Node);
    case 'CallExpression':
      return (expr.callee as Node).type === 'Identifier' && (expr.callee as Node).value === PYTHON_STR;
    default:
      return false;
  }
}

/** The name of a filter expression's filter (`x | name` or `x | name(...)`). */
function filterName(expr: Node): unknown {
  const filter = expr.filter as Node;
  if (filter.type === 'Identifier') return filter.value;
  return filter.type === 'CallExpression' ? (filter.callee as Node).value : undefined;
}

/** `name([expr])`. */
function call(name: string, expr: Node): Node {
  return { type: 'CallExpression', callee: { type: 'Identifier', value: name }, args: [{ type: 'ArrayLiteral', value: [expr] }] };
}

/** `__kvroute_python_str__([expr])`. */
function printed(expr: Node): Node {
  return call(PYTHON_STR, expr);
}

/** `__kvroute_python_chars__([expr]) if expr is string else expr`. */
function charsIfString(expr: Node): Node {
  const isString = { type: 'TestExpression', operand: expr, negate: false, test: { type: 'Identifier', value: 'string' } };
  return { type: 'Ternary', condition: isString, trueExpr: call(PYTHON_CHARS, expr), falseExpr: expr };
}

/** Rewrites `node`'s subtree in place; returns what replaces `node` itself. */
function rewrite(node: Node): Node {
  for (const [key, value] of Object.entries(node)) {
    if (key === 'type') continue;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        if (isNode(value[i])) value[i] = rewrite(value[i]);
        // Tuples (`[key, value]` of an object literal, a set's targets) nest one level deeper.
        else if (Array.isArray(value[i])) value[i] = (value[i] as unknown[]).map((item) => (isNode(item) ? rewrite(item) : item));
      }
    } else if (isNode(value)) {
      node[key] = rewrite(value);
    }
  }
  for (const key of BODIES[node.type] ?? []) {
    const body = node[key];
    if (!Array.isArray(body)) continue;
    node[key] = body.map((statement: Node) =>
      PRINTS_AS_IS.has(statement.type) || makesString(statement) ? statement : printed(statement),
    );
  }
  if (node.type === 'For') {
    const iterable = node.iterable as Node;
    if (iterable.type === 'SelectExpression') iterable.lhs = charsIfString(iterable.lhs as Node);
    else node.iterable = charsIfString(iterable);
  }
  if (node.type === 'BinaryExpression' && (node.operator as { value?: unknown }).value === '~') {
    node.left = printed(node.left as Node);
    node.right = printed(node.right as Node);
  }
  if (node.type === 'FilterExpression') {
    const name = filterName(node);
    if (name === 'string') return printed(node.operand as Node);
    if (name === 'join') node.operand = call(PYTHON_JOINED, node.operand as Node);
  }
  return node;
}

/** Rewrites `template` to print as Jinja2 (once per compiled template); render with {@link pythonPrinting}. */
export function printLikePython(template: Template): Template {
  rewrite(template.parsed as unknown as Node);
  return template;
}
