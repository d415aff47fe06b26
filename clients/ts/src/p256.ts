/**
 * NIST P-256 (secp256r1) for Biscuit share tokens: public keys (SEC1), private keys, ECDSA
 * signatures (DER, SHA-256), with the rules of the Rust crates biscuit-auth 6.0.0 uses
 * (p256 0.13, ecdsa 0.16, der 0.7, sec1 0.7).
 *
 * Trust role: Engram's tools mint Ed25519 tokens only, but a Biscuit holder may attenuate
 * through a P-256 key, and biscuit-python accepts such tokens. To give the same answer for
 * them, this module decodes and verifies exactly what those crates do: SEC1 keys in
 * compressed (02/03), uncompressed (04) and compact (05) form, coordinates below p and on the
 * curve, never the identity; private keys of 32 bytes in [1, n-1]; signatures as strict DER (minimal
 * lengths, minimal positive INTEGERs, no trailing bytes) with r and s in [1, n-1]; the
 * verification equation without a low-S rule (the p256 crate has none).
 *
 * Verification only, on public data (a token's keys, signatures and its proof secret, which
 * the token carries in the clear): the arithmetic is plain BigInt, not constant time.
 */

import { sha256 } from "@noble/hashes/sha2.js";

const P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn;
const B = 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604bn;
export const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const GX = 0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296n;
const GY = 0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5n;

function mod(a: bigint, m: bigint = P): bigint {
  const r = a % m;
  return r < 0n ? r + m : r;
}

function pow(base: bigint, exp: bigint, m: bigint): bigint {
  let result = 1n;
  let b = mod(base, m);
  let e = exp;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % m;
    b = (b * b) % m;
    e >>= 1n;
  }
  return result;
}

function invert(a: bigint, m: bigint): bigint {
  // m is prime and a is not 0 mod m at every call site
  return pow(a, m - 2n, m);
}

/** An affine point; `null` is the point at infinity. */
export interface AffinePoint {
  readonly x: bigint;
  readonly y: bigint;
}

type Jacobian = [x: bigint, y: bigint, z: bigint];
const INFINITY: Jacobian = [0n, 1n, 0n];

function double(p: Jacobian): Jacobian {
  const [x, y, z] = p;
  if (z === 0n || y === 0n) return INFINITY;
  const delta = mod(z * z);
  const gamma = mod(y * y);
  const beta = mod(x * gamma);
  const alpha = mod(3n * (x - delta) * (x + delta));
  const x3 = mod(alpha * alpha - 8n * beta);
  const z3 = mod((y + z) * (y + z) - gamma - delta);
  const y3 = mod(alpha * (4n * beta - x3) - 8n * gamma * gamma);
  return [x3, y3, z3];
}

function add(p: Jacobian, q: Jacobian): Jacobian {
  if (p[2] === 0n) return q;
  if (q[2] === 0n) return p;
  const [x1, y1, z1] = p;
  const [x2, y2, z2] = q;
  const z1z1 = mod(z1 * z1);
  const z2z2 = mod(z2 * z2);
  const u1 = mod(x1 * z2z2);
  const u2 = mod(x2 * z1z1);
  const s1 = mod(y1 * z2 * z2z2);
  const s2 = mod(y2 * z1 * z1z1);
  if (u1 === u2) return s1 === s2 ? double(p) : INFINITY;
  const h = mod(u2 - u1);
  const i = mod(4n * h * h);
  const j = mod(h * i);
  const r = mod(2n * (s2 - s1));
  const v = mod(u1 * i);
  const x3 = mod(r * r - j - 2n * v);
  const y3 = mod(r * (v - x3) - 2n * s1 * j);
  const z3 = mod(((z1 + z2) * (z1 + z2) - z1z1 - z2z2) * h);
  return [x3, y3, z3];
}

function multiply(p: Jacobian, k: bigint): Jacobian {
  let result = INFINITY;
  let d = p;
  let n = k;
  while (n > 0n) {
    if (n & 1n) result = add(result, d);
    d = double(d);
    n >>= 1n;
  }
  return result;
}

function toAffine(p: Jacobian): AffinePoint | null {
  if (p[2] === 0n) return null;
  const zi = invert(p[2], P);
  const zi2 = mod(zi * zi);
  return { x: mod(p[0] * zi2), y: mod(p[1] * zi2 * zi) };
}

const G: Jacobian = [GX, GY, 1n];

function bytesToBig(data: Uint8Array): bigint {
  let n = 0n;
  for (const b of data) n = (n << 8n) | BigInt(b);
  return n;
}

function bigTo32(n: bigint): Uint8Array {
  const out = new Uint8Array(32);
  let v = n;
  for (let i = 31; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

function onCurve(x: bigint, y: bigint): boolean {
  return mod(y * y) === mod(x * x * x - 3n * x + B);
}

/** y with y² = x³ - 3x + b and the given parity, or null (p ≡ 3 mod 4: sqrt = a^((p+1)/4)). */
function decompress(x: bigint, odd: boolean): bigint | null {
  const rhs = mod(x * x * x - 3n * x + B);
  const y = pow(rhs, (P + 1n) / 4n, P);
  if (mod(y * y) !== rhs) return null;
  return (y & 1n) === (odd ? 1n : 0n) ? y : mod(-y);
}

/** A P-256 public key from SEC1 bytes (p256's `VerifyingKey::from_sec1_bytes`), or null. */
export function parsePublicKey(data: Uint8Array): AffinePoint | null {
  const tag = data[0];
  if (tag === 0x02 || tag === 0x03) {
    if (data.length !== 33) return null;
    const x = bytesToBig(data.subarray(1));
    if (x >= P) return null;
    const y = decompress(x, tag === 0x03);
    return y === null ? null : { x, y };
  }
  if (tag === 0x04) {
    if (data.length !== 65) return null;
    const x = bytesToBig(data.subarray(1, 33));
    const y = bytesToBig(data.subarray(33));
    if (x >= P || y >= P || !onCurve(x, y)) return null;
    return { x, y };
  }
  if (tag === 0x05) {
    // SEC1 compact form (sec1 0.7 / primeorder `decompact`): x only, y the smaller of y and p - y
    if (data.length !== 33) return null;
    const x = bytesToBig(data.subarray(1));
    if (x >= P) return null;
    const y = decompress(x, false);
    if (y === null) return null;
    return { x, y: y < P - y ? y : P - y };
  }
  // 0x00 (the identity) is refused as a public key, and any other tag.
  return null;
}

/** SEC1 compressed encoding (p256's `PublicKey::to_bytes`, what Biscuit signs over). */
export function compressPublicKey(point: AffinePoint): Uint8Array {
  const out = new Uint8Array(33);
  out[0] = point.y & 1n ? 0x03 : 0x02;
  out.set(bigTo32(point.x), 1);
  return out;
}

/** The public key of a 32-byte big-endian private scalar in [1, n-1], or null. */
export function publicKeyFromSecret(secret: Uint8Array): AffinePoint | null {
  if (secret.length !== 32) return null;
  const d = bytesToBig(secret);
  if (d === 0n || d >= N) return null;
  return toAffine(multiply(G, d));
}

export function pointsEqual(a: AffinePoint, b: AffinePoint): boolean {
  return a.x === b.x && a.y === b.y;
}

/** Strict DER: a definite length in the fewest octets (der 0.7's `Length::decode`). */
function derLength(data: Uint8Array, pos: number): [length: number, next: number] | null {
  const first = data[pos];
  if (first === undefined) return null;
  if (first < 0x80) return [first, pos + 1];
  if (first === 0x80 || first > 0x84) return null;
  const n = first - 0x80;
  if (pos + 1 + n > data.length) return null;
  let len = 0;
  for (let i = 0; i < n; i++) len = len * 256 + (data[pos + 1 + i] as number);
  // minimal: the initial octet the length needs must be this one
  const needed = len < 0x80 ? 0 : len <= 0xff ? 0x81 : len <= 0xffff ? 0x82 : len <= 0xffffff ? 0x83 : 0x84;
  if (needed !== first) return null;
  return [len, pos + 1 + n];
}

/** A DER INTEGER read as an unsigned magnitude (der 0.7's `UintRef`). */
function derUint(data: Uint8Array, pos: number, end: number): [value: Uint8Array, next: number] | null {
  if (pos >= end || data[pos] !== 0x02) return null;
  const len = derLength(data.subarray(0, end), pos + 1);
  if (len === null) return null;
  const [n, start] = len;
  if (start + n > end) return null;
  const bytes = data.subarray(start, start + n);
  if (bytes.length === 0) return null;
  let value: Uint8Array;
  if (bytes.length === 1 && bytes[0] === 0) value = bytes;
  else if (bytes[0] === 0) {
    if ((bytes[1] as number) < 0x80) return null; // non-canonical leading zero
    value = bytes.subarray(1);
  } else if ((bytes[0] as number) >= 0x80) return null; // negative
  else value = bytes;
  return [value, start + n];
}

/** (r, s) of a DER ECDSA signature as the ecdsa crate reads it, or null. */
export function parseDerSignature(data: Uint8Array): [r: bigint, s: bigint] | null {
  if (data[0] !== 0x30) return null;
  const len = derLength(data, 1);
  if (len === null) return null;
  const [n, start] = len;
  if (start + n !== data.length) return null; // trailing data, or the sequence runs past the end
  const r = derUint(data, start, data.length);
  if (r === null) return null;
  const s = derUint(data, r[1], data.length);
  if (s === null || s[1] !== data.length) return null;
  if (r[0].length > 32 || s[0].length > 32) return null;
  const rv = bytesToBig(r[0]);
  const sv = bytesToBig(s[0]);
  if (rv === 0n || rv >= N || sv === 0n || sv >= N) return null;
  return [rv, sv];
}

/** ECDSA P-256 / SHA-256 verification of a DER signature (p256's `VerifyingKey::verify`). */
export function verifyEcdsa(signature: Uint8Array, message: Uint8Array, publicKey: AffinePoint): boolean {
  const rs = parseDerSignature(signature);
  if (rs === null) return false;
  const [r, s] = rs;
  const z = bytesToBig(sha256(message)) % N;
  const w = invert(s, N);
  const u1 = (z * w) % N;
  const u2 = (r * w) % N;
  const point = toAffine(add(multiply(G, u1), multiply([publicKey.x, publicKey.y, 1n], u2)));
  if (point === null) return false;
  return point.x % N === r;
}
