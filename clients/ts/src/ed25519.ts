/**
 * Ed25519 for the verifier: public-key validation and signature verification, on
 * @noble/ed25519 (with SHA-512 from @noble/hashes). Port of verifier/ed25519.py plus the
 * verification rule the Python verifier gets from OpenSSL.
 *
 * Trust role, keys: a public key of small order (the identity point `01 00 .. 00`, say)
 * lets a signature with R = B and S = 1 verify for *every* message, so a trusted small-order
 * key would let anyone sign as its holder. Every key that becomes trusted passes
 * {@link checkPublicKey} first, with the same checks and check names as the Python
 * verifier: RFC 8032 §5.1.3 decoding (canonical y < p, the point decompresses, x = 0 not
 * encoded with the sign bit set; `key.encoding`), then [8]A is not the identity
 * (`key.small_order`).
 *
 * Trust role, signatures: two Ed25519 verifiers must accept exactly the same signatures,
 * or a log could show one verifier a signature another rejects. The Python verifier uses
 * OpenSSL, which is *cofactorless*: it requires S < L and that the encoding of
 * [S]B - [k]A equal the signature's R bytes, k = SHA-512(R || A || M) mod L.
 * @noble/ed25519's strict mode (`zip215: false`) is *cofactored* ([8]([S]B) = [8]R +
 * [8][k]A), which also accepts signatures whose R carries a small-order component. Such
 * signatures are never made by an honest signer, but only the holder of the key can make
 * them, and accepting them would let this verifier and the Python one disagree. So
 * {@link verifySignature} requires both: the library's strict verification, and the
 * cofactorless equation evaluated with the library's point arithmetic.
 */

import * as ed from "@noble/ed25519";
import { sha512 } from "@noble/hashes/sha2.js";

import { bytesEqual, concatBytes, toHex } from "./bytes.js";
import { MalformedError } from "./errors.js";

// @noble/ed25519's synchronous API needs a SHA-512 implementation wired in (its README).
ed.hashes.sha512 = sha512;

export const PUBLIC_KEY_SIZE = 32;
export const SIGNATURE_SIZE = 64;
/** Order L of the prime-order subgroup (RFC 8032 §5.1). */
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

/** Little-endian bytes to bigint. */
function bytesToNumberLE(data: Uint8Array): bigint {
  let n = 0n;
  for (let i = data.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(data[i] as number);
  return n;
}

/** Keys that passed {@link checkPublicKey}, by hex (a failure throws and is not cached):
 * the check costs about one signature verification. Bounded, like the Python lru_cache. */
const CHECKED = new Set<string>();
const CHECKED_MAX = 16_384;

/**
 * Return `publicKey` if it is a valid, canonical Ed25519 key of large order.
 *
 * @throws MalformedError `key.encoding`: wrong length, non-canonical encoding, not on the
 *   curve; `key.small_order`: [8]A is the identity (A in the 8-element torsion subgroup).
 */
export function checkPublicKey(publicKey: Uint8Array): Uint8Array {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== PUBLIC_KEY_SIZE) {
    throw new MalformedError("Ed25519 public keys are 32 bytes", { check: "key.encoding" });
  }
  const hex = toHex(publicKey);
  if (CHECKED.has(hex)) return publicKey;
  let point: ed.Point;
  try {
    // Strict RFC 8032 decoding (zip215 = false): y < p, x exists, no x = 0 with sign bit.
    point = ed.Point.fromBytes(publicKey, false);
  } catch (e) {
    throw new MalformedError("Ed25519 public key is not a canonically encoded curve point", {
      check: "key.encoding",
      cause: e,
    });
  }
  if (point.isSmallOrder()) {
    throw new MalformedError("Ed25519 public key has small order; signatures under it prove nothing", {
      check: "key.small_order",
    });
  }
  if (CHECKED.size >= CHECKED_MAX) CHECKED.clear();
  CHECKED.add(hex);
  return publicKey;
}

/**
 * Whether `signature` is a valid Ed25519 signature of `message` under `publicKey`, by
 * both @noble/ed25519's strict verification and the cofactorless equation (module doc).
 * `publicKey` must have passed {@link checkPublicKey}. Never throws for a bad signature:
 * wrong lengths and undecodable values return false.
 */
export function verifySignature(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (signature.length !== SIGNATURE_SIZE || publicKey.length !== PUBLIC_KEY_SIZE) return false;
  let libraryOk: boolean;
  try {
    libraryOk = ed.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
  if (!libraryOk) return false;
  // The cofactorless equation, as OpenSSL checks it: S < L, and the canonical encoding of
  // [S]B - [k]A is exactly the R bytes. (The library call above already decoded A and R
  // strictly and checked S < L; S is re-checked so this block stands on its own.)
  const rBytes = signature.subarray(0, 32);
  const s = bytesToNumberLE(signature.subarray(32, 64));
  if (s >= L) return false;
  const k = bytesToNumberLE(sha512(concatBytes(rBytes, publicKey, message))) % L;
  try {
    const a = ed.Point.fromBytes(publicKey, false);
    const sB = ed.Point.BASE.multiply(s, false);
    const kA = a.multiply(k, false);
    return bytesEqual(sB.subtract(kA).toBytes(), rBytes);
  } catch {
    return false;
  }
}

/** Public key of a 32-byte RFC 8032 seed (for signing helpers and tests). */
export function publicKeyFromSeed(seed: Uint8Array): Uint8Array {
  return ed.getPublicKey(seed);
}

/** Ed25519 signature of `message` with a 32-byte seed (for signing helpers and tests). */
export function signWithSeed(message: Uint8Array, seed: Uint8Array): Uint8Array {
  return ed.sign(message, seed);
}

/** Whether 32 bytes decompress to a curve point as curve25519-dalek 4 decompresses them
 * (`CompressedEdwardsY::decompress`): y is the low 255 bits, not reduced (values from p to
 * 2^255 - 1 are accepted), and the sign bit is honoured even for x = 0. This is
 * ed25519-dalek's `VerifyingKey::from_bytes`, what Biscuit tokens (token.ts) accept as an
 * Ed25519 key; nothing else in the verifier uses it. */
export function isDalekPoint(bytes: Uint8Array): boolean {
  if (bytes.length !== PUBLIC_KEY_SIZE) return false;
  try {
    ed.Point.fromBytes(bytes, true);
    return true;
  } catch {
    return false;
  }
}

/**
 * ed25519-dalek 2's `VerifyingKey::verify_strict`, the check biscuit-auth 6 makes on every
 * Ed25519 block signature (token.ts): A and R decompress as {@link isDalekPoint} says, neither
 * is of small order, S < L, and the canonical encoding of [S]B - [k]A is exactly the R bytes,
 * with k = SHA-512(R || A as given || M) mod L. (The verifier's own rule, {@link verifySignature},
 * additionally refuses non-canonical encodings of A; dalek hashes them as given.)
 */
export function verifyDalekStrict(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (signature.length !== SIGNATURE_SIZE || publicKey.length !== PUBLIC_KEY_SIZE) return false;
  let a: ed.Point;
  let r: ed.Point;
  try {
    a = ed.Point.fromBytes(publicKey, true);
    r = ed.Point.fromBytes(signature.subarray(0, 32), true);
  } catch {
    return false;
  }
  const s = bytesToNumberLE(signature.subarray(32, 64));
  if (s >= L) return false;
  if (r.isSmallOrder() || a.isSmallOrder()) return false;
  const rBytes = signature.subarray(0, 32);
  const k = bytesToNumberLE(sha512(concatBytes(rBytes, publicKey, message))) % L;
  const expected = ed.Point.BASE.multiply(s, false).subtract(a.multiply(k, false));
  return bytesEqual(expected.toBytes(), rBytes);
}
