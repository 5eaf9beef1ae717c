/**
 * The JSON parser's (`events/json.ts`) value for a float literal that reads as an integer, kept
 * apart so that the parser's strictness rules (`events/json-rules.ts`) can tell it from an object.
 * @module
 */

/**
 * A float literal whose value happens to be an integer (`45.0`, `1e3`), as {@link parseEvents}
 * returns it: every integer field rejects it, as serde_json does, instead of reading a rounded
 * value. `toJSON()` and `Number(x)` give its value.
 * @group Events
 */
export class JsonFloat {
  /** @param text the literal as written in the JSON text */
  constructor(readonly text: string) {}

  /** The literal as written. */
  toString(): string {
    return this.text;
  }

  /** Its value as a number. */
  valueOf(): number {
    return Number(this.text);
  }

  /** Written back as a plain JSON number. */
  toJSON(): number {
    return Number(this.text);
  }
}
