/**
 * Byte and text helpers shared by the verifier modules.
 *
 * Platform-neutral on purpose (TextEncoder / TextDecoder only, no Node `Buffer`), so the
 * verifier can run in a browser as well as in Node.
 */

const ENCODER = new TextEncoder();
/** Strict UTF-8: invalid sequences throw (fatal), and a leading BOM is kept as U+FEFF
 * (ignoreBOM) exactly as Python's `bytes.decode("utf-8")` keeps it, so that callers see it. */
const STRICT_DECODER = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** UTF-8 bytes of a string (the callers never pass lone surrogates: see hasLoneSurrogate). */
export function utf8(text: string): Uint8Array {
  return ENCODER.encode(text);
}

/** Decode strict UTF-8 (no overlongs, no encoded surrogates, nothing above U+10FFFF);
 * returns `null` if `data` is not valid UTF-8. */
export function decodeUtf8Strict(data: Uint8Array): string | null {
  try {
    return STRICT_DECODER.decode(data);
  } catch {
    return null;
  }
}

/** Whether a string holds a UTF-16 code unit of a surrogate that is not part of a pair (such
 * a string has no UTF-8 encoding; Python's str calls it a lone surrogate). With the `u`
 * flag, a well-formed pair is one code point and does not match the class. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;
export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/**
 * Constant-time equality of two byte strings of the same length (the length itself is
 * not secret: different lengths return false at once, as Python's hmac.compare_digest).
 */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] as number) ^ (b[i] as number);
  return diff === 0;
}

/** Plain (variable-time) equality, for public values. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Lowercase hex of bytes. */
export function toHex(data: Uint8Array): string {
  let s = "";
  for (const b of data) s += b.toString(16).padStart(2, "0");
  return s;
}

/** Bytes of an even-length hex string (either case); throws TypeError on anything else.
 * A helper for trusted inputs (tests, configuration), not a parser of untrusted data. */
export function fromHex(hex: string): Uint8Array {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) throw new TypeError("not a hex string");
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_VALUES: ReadonlyMap<string, number> = new Map([...B64_ALPHABET].map((c, i) => [c, i]));
/** Shape of standard base64 (RFC 4648 §4) with padding; the length is checked apart. */
const B64_SHAPE = /^[A-Za-z0-9+/]*={0,2}$/;

/** Standard padded base64 (RFC 4648 §4) of bytes. */
export function base64Encode(data: Uint8Array): string {
  let out = "";
  for (let i = 0; i < data.length; i += 3) {
    const b0 = data[i] as number;
    const b1 = data[i + 1];
    const b2 = data[i + 2];
    const n = (b0 << 16) | ((b1 ?? 0) << 8) | (b2 ?? 0);
    out += B64_ALPHABET[(n >> 18) & 63];
    out += B64_ALPHABET[(n >> 12) & 63];
    out += b1 === undefined ? "=" : B64_ALPHABET[(n >> 6) & 63];
    out += b2 === undefined ? "=" : B64_ALPHABET[n & 63];
  }
  return out;
}

/**
 * Decode standard padded base64, or return `null` if `text` is not well-formed base64.
 * Unused low bits of the last group are ignored here; callers that need the canonical
 * encoding compare the re-encoding (see note.ts `b64decodeStrict`).
 */
export function base64DecodeLoose(text: string): Uint8Array | null {
  if (text.length % 4 !== 0 || !B64_SHAPE.test(text)) return null;
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let at = 0;
  for (let i = 0; i < text.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const c = text[i + j] as string;
      n = (n << 6) | (c === "=" ? 0 : (B64_VALUES.get(c) as number));
    }
    const bytes = [(n >> 16) & 255, (n >> 8) & 255, n & 255];
    for (const b of bytes) if (at < out.length) out[at++] = b;
  }
  return out;
}
