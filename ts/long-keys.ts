/**
 * Map keys for strings that may be long. V8 hashes a string by its content only up to 16,383
 * characters (`String::kMaxHashCalcLength`); a longer one hashes by its length alone, so a `Map`
 * holding many long keys of one length compares a looked-up key with each of them: 4,096 cached
 * prompts of 20,000 characters made one lookup take about 10 ms. A prompt is the client's to
 * choose, so such keys are replaced by their length and a digest of their content; the caller
 * keeps the text beside its value and checks it on a hit, so two texts that share a digest only
 * miss (each digest names one entry: nothing to chain, and nothing for a crafted collision to
 * slow down).
 * @internal
 * @module
 */

/** The longest string V8 hashes by its content. */
const HASHED_BY_CONTENT = 16383;

/** `text` itself when V8 hashes it by content, else its length and a 64-bit digest of its content. */
export function mapKey(text: string): string {
  const n = text.length;
  if (n <= HASHED_BY_CONTENT) return text;
  // Two independent 32-bit lanes (FNV-1a, and a multiply-rotate one) over the UTF-16 units.
  let a = 0x811c9dc5 ^ n;
  let b = 0x9e3779b9;
  for (let i = 0; i < n; i++) {
    const unit = text.charCodeAt(i);
    a = Math.imul(a ^ unit, 0x01000193);
    b = Math.imul(b + unit, 0x5bd1e995);
    b ^= b >>> 15;
  }
  // A short text spelling out a digest shares that digest's entry only: the caller's check tells them apart.
  return `\u0000${n}:${(a >>> 0).toString(36)}:${(b >>> 0).toString(36)}`;
}
