/**
 * RFC 9162 Merkle tree hashing and proof verification (pure, over bytes).
 * Port of verifier/merkle.py: same steps, same bounds, same check names.
 *
 * Trust role: this module decides whether a leaf is in a tree and whether one tree extends
 * another. It never trusts a size or root that did not come from a verified checkpoint; the
 * caller passes those in.
 *
 * Hashing (RFC 9162 §2.1.1, identical to RFC 6962 §2.1 with SHA-256):
 *
 * ```
 * MTH({})    = SHA-256()
 * leaf hash  = SHA-256(0x00 || leaf bytes)
 * node hash  = SHA-256(0x01 || left || right)
 * MTH(D[n])  = node(MTH(D[0:k]), MTH(D[k:n])), k the largest power of two < n
 * ```
 *
 * The 0x00 / 0x01 prefixes separate leaves from interior nodes, so a leaf can never be
 * mistaken for a node (the second-preimage weakness of unprefixed trees), and the split rule
 * means no node is ever duplicated (`[a,b,c]` and `[a,b,c,c]` have different roots).
 *
 * Sizes and indices are `bigint` (trees go up to 2^63-1 leaves, beyond a JS number's exact
 * range); the entry points also take a `number` when it is a safe integer. The proof
 * generation helpers of the Python module (used by the ledger) are not ported: a verifier
 * only needs the proof lengths they imply.
 */

import { sha256 } from "@noble/hashes/sha2.js";

import { concatBytes, constantTimeEqual } from "./bytes.js";
import { ProofError } from "./errors.js";

export const HASH_SIZE = 32;
/** A tree of up to 2^63 leaves needs at most 63 hashes in any proof (plus one for the
 * power-of-two case of consistency); longer proofs are rejected before any hashing. */
export const MAX_PROOF_HASHES = 64;
export const MAX_TREE_SIZE = 2n ** 63n - 1n;
export const EMPTY_ROOT: Uint8Array = sha256(new Uint8Array(0));

const LEAF_PREFIX = Uint8Array.of(0x00);
const NODE_PREFIX = Uint8Array.of(0x01);

/** SHA-256(0x00 || leaf), the RFC 9162 leaf hash. */
export function leafHash(leaf: Uint8Array): Uint8Array {
  return sha256(concatBytes(LEAF_PREFIX, leaf));
}

/** SHA-256(0x01 || left || right), the RFC 9162 interior node hash. */
export function nodeHash(left: Uint8Array, right: Uint8Array): Uint8Array {
  return sha256(concatBytes(NODE_PREFIX, left, right));
}

/** Number of bits of a non-negative bigint (Python's int.bit_length). */
function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length;
}

/** Number of one bits of a non-negative bigint. */
function popCount(n: bigint): number {
  let count = 0;
  for (const c of n.toString(2)) if (c === "1") count++;
  return count;
}

/** Largest power of two strictly smaller than `n` (n >= 2). */
function split(n: bigint): bigint {
  return 1n << BigInt(bitLength(n - 1n) - 1);
}

/** MTH over leaf hashes, computed directly from the definition (reference; O(n)). */
export function rootFromLeafHashes(hashes: readonly Uint8Array[]): Uint8Array {
  const n = hashes.length;
  if (n === 0) return EMPTY_ROOT;
  if (n === 1) return hashes[0] as Uint8Array;
  const k = Number(split(BigInt(n)));
  return nodeHash(rootFromLeafHashes(hashes.slice(0, k)), rootFromLeafHashes(hashes.slice(k)));
}

/** Exact number of hashes in an inclusion proof (inner + border decomposition);
 * `0 <= index < size` is the caller's precondition. */
export function inclusionProofLength(index: bigint, size: bigint): number {
  if (!(0n <= index && index < size)) throw new RangeError(`index ${index} is not below size ${size}`);
  const inner = bitLength(index ^ (size - 1n));
  return inner + popCount(index >> BigInt(inner));
}

/**
 * Exact number of hashes in a consistency proof PROOF(old, D[new]) (RFC 9162 §2.1.4.1):
 * the number of ranges verifier/merkle.py `consistency_ranges` returns (0 for `old == 0`
 * or `old == new`). The loop is the same walk down the tree; it only counts.
 */
export function consistencyProofLength(oldSize: bigint, newSize: bigint): number {
  if (!(0n <= oldSize && oldSize <= newSize)) {
    throw new RangeError(`old size ${oldSize} is not within [0, ${newSize}]`);
  }
  if (oldSize === 0n || oldSize === newSize) return 0;
  let count = 0;
  let lo = 0n;
  let hi = newSize;
  let m = oldSize;
  let complete = true;
  for (;;) {
    const n = hi - lo;
    if (m === n) {
      if (!complete) count++;
      return count;
    }
    const k = split(n);
    count++;
    if (m <= k) {
      hi = lo + k;
    } else {
      lo += k;
      m -= k;
      complete = false;
    }
  }
}

/** A leaf hash proven to be at `index` in the tree of `size` with `root`. */
export interface VerifiedInclusion {
  readonly leafHash: Uint8Array;
  readonly index: bigint;
  readonly size: bigint;
  readonly root: Uint8Array;
}

/** The tree (`oldSize`, `oldRoot`) is a prefix of (`newSize`, `newRoot`). */
export interface VerifiedConsistency {
  readonly oldSize: bigint;
  readonly oldRoot: Uint8Array;
  readonly newSize: bigint;
  readonly newRoot: Uint8Array;
}

function checkHash(value: unknown, what: string): asserts value is Uint8Array {
  if (!(value instanceof Uint8Array) || value.length !== HASH_SIZE) {
    throw new ProofError(`${what} must be ${HASH_SIZE} bytes`, { check: "proof.hash_size" });
  }
}

function checkProofList(proof: readonly unknown[], what: "inclusion" | "consistency"): void {
  if (!Array.isArray(proof)) {
    throw new ProofError(`${what} proof must be a list of hashes`, { check: "proof.hash_size" });
  }
  if (proof.length > MAX_PROOF_HASHES) {
    throw new ProofError(`${what} has ${proof.length} hashes, more than ${MAX_PROOF_HASHES}`, {
      check: `${what}.length`,
    });
  }
  proof.forEach((p, i) => checkHash(p, `${what} hash ${i}`));
}

/** A size or index as a bigint, or `null` if it is neither a bigint nor a safe integer
 * number (the Python verifier's `isinstance(x, int)`). Range checks are the caller's. */
function asInteger(value: unknown): bigint | null {
  if (typeof value === "bigint") return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
  return null;
}

export interface InclusionArgs {
  leafHash: Uint8Array;
  index: bigint | number;
  size: bigint | number;
  proof: readonly Uint8Array[];
  root: Uint8Array;
}

/**
 * Verify that `leafHash` is at `index` in the tree (`size`, `root`).
 *
 * Steps (RFC 9162 §2.1.3.2), each throwing {@link ProofError} naming the check:
 *
 * 0. `proof.hash_size` / `inclusion.length`: every hash is 32 bytes; at most 64 proof hashes.
 * 1. `inclusion.range`: 0 <= index < size <= 2^63-1.
 * 2. `inclusion.length`: the proof has exactly the length the tree shape implies.
 * 3. `inclusion.root`: folding the path from the leaf gives `root` (constant-time compare).
 */
export function verifyInclusion(args: InclusionArgs): VerifiedInclusion {
  const { leafHash: leaf, proof, root } = args;
  checkHash(leaf, "leaf hash");
  checkHash(root, "root");
  checkProofList(proof, "inclusion");
  const index = asInteger(args.index);
  const size = asInteger(args.size);
  if (index === null || size === null || !(0n <= index && index < size && size <= MAX_TREE_SIZE)) {
    throw new ProofError(`index ${String(args.index)} is not within a tree of size ${String(args.size)}`, {
      check: "inclusion.range",
    });
  }
  const expected = inclusionProofLength(index, size);
  if (proof.length !== expected) {
    throw new ProofError(`proof has ${proof.length} hashes; index ${index} in size ${size} needs ${expected}`, {
      check: "inclusion.length",
    });
  }
  let fn = index;
  let sn = size - 1n;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) {
      throw new ProofError("proof is longer than the path to the root", { check: "inclusion.length" });
    }
    if ((fn & 1n) === 1n || fn === sn) {
      r = nodeHash(p, r);
      if ((fn & 1n) === 0n) {
        while (fn !== 0n && (fn & 1n) === 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) {
    throw new ProofError("proof is shorter than the path to the root", { check: "inclusion.length" });
  }
  if (!constantTimeEqual(r, root)) {
    throw new ProofError("recomputed root does not match the checkpoint root", { check: "inclusion.root" });
  }
  return { leafHash: leaf, index, size, root };
}

export interface ConsistencyArgs {
  oldSize: bigint | number;
  newSize: bigint | number;
  oldRoot: Uint8Array;
  newRoot: Uint8Array;
  proof: readonly Uint8Array[];
}

/**
 * Verify that tree (`oldSize`, `oldRoot`) is a prefix of (`newSize`, `newRoot`).
 *
 * Steps (RFC 9162 §2.1.4.2 plus the tlog-witness edge cases), each throwing
 * {@link ProofError}:
 *
 * 0. `proof.hash_size` / `consistency.length`: every hash is 32 bytes; at most 64 proof hashes.
 * 1. `consistency.range`: 0 <= oldSize <= newSize <= 2^63-1.
 * 2. `consistency.empty`: oldSize 0 needs an empty proof and oldRoot = SHA-256("");
 *    equal sizes need an empty proof and equal roots (newSize 0 needs newRoot = SHA-256("")).
 * 3. `consistency.length`: a non-trivial proof is non-empty and exactly as long as the
 *    tree shapes imply.
 * 4. `consistency.old_root` / `consistency.new_root`: both recomputed roots match.
 */
export function verifyConsistency(args: ConsistencyArgs): VerifiedConsistency {
  const { oldRoot, newRoot, proof } = args;
  checkHash(oldRoot, "old root");
  checkHash(newRoot, "new root");
  checkProofList(proof, "consistency");
  const oldSize = asInteger(args.oldSize);
  const newSize = asInteger(args.newSize);
  if (oldSize === null || newSize === null || !(0n <= oldSize && oldSize <= newSize && newSize <= MAX_TREE_SIZE)) {
    throw new ProofError(
      `old size ${String(args.oldSize)} is not within [0, new size ${String(args.newSize)}]`,
      { check: "consistency.range" },
    );
  }
  const verified: VerifiedConsistency = { oldSize, oldRoot, newSize, newRoot };
  if (newSize === 0n && !constantTimeEqual(newRoot, EMPTY_ROOT)) {
    throw new ProofError('the empty tree\'s root must be SHA-256("")', { check: "consistency.new_root" });
  }
  if (oldSize === 0n) {
    if (proof.length) {
      throw new ProofError("a proof from the empty tree must be empty", { check: "consistency.empty" });
    }
    if (!constantTimeEqual(oldRoot, EMPTY_ROOT)) {
      throw new ProofError('the empty tree\'s root must be SHA-256("")', { check: "consistency.old_root" });
    }
    return verified;
  }
  if (oldSize === newSize) {
    if (proof.length) {
      throw new ProofError("a proof between equal sizes must be empty", { check: "consistency.empty" });
    }
    if (!constantTimeEqual(oldRoot, newRoot)) {
      throw new ProofError("equal sizes with different roots", { check: "consistency.new_root" });
    }
    return verified;
  }
  const expected = consistencyProofLength(oldSize, newSize);
  if (proof.length !== expected) {
    throw new ProofError(`proof has ${proof.length} hashes; sizes ${oldSize}->${newSize} need ${expected}`, {
      check: "consistency.length",
    });
  }
  const path = [...proof];
  if ((oldSize & (oldSize - 1n)) === 0n) {
    path.unshift(oldRoot); // exact power of two: the old root is the first node
  }
  let fn = oldSize - 1n;
  let sn = newSize - 1n;
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0] as Uint8Array; // non-empty: expected >= 1, or the old root was prepended
  let sr = fr;
  for (const c of path.slice(1)) {
    if (sn === 0n) {
      throw new ProofError("proof is longer than the tree allows", { check: "consistency.length" });
    }
    if ((fn & 1n) === 1n || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if ((fn & 1n) === 0n) {
        while (fn !== 0n && (fn & 1n) === 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) {
    throw new ProofError("proof is shorter than the tree requires", { check: "consistency.length" });
  }
  if (!constantTimeEqual(fr, oldRoot)) {
    throw new ProofError("recomputed old root does not match", { check: "consistency.old_root" });
  }
  if (!constantTimeEqual(sr, newRoot)) {
    throw new ProofError("recomputed new root does not match", { check: "consistency.new_root" });
  }
  return verified;
}
