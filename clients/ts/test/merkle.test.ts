/** RFC 9162 hashing and proofs against specs/vectors/merkle.json (as tests/unit/test_vectors.py),
 * plus tamper and bound tests. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { fromHex, toHex, utf8 } from "../src/bytes.js";
import { ProofError } from "../src/errors.js";
import {
  EMPTY_ROOT,
  MAX_TREE_SIZE,
  consistencyProofLength,
  inclusionProofLength,
  leafHash,
  rootFromLeafHashes,
  verifyConsistency,
  verifyInclusion,
} from "../src/merkle.js";
import { flipBit, loadVectors, throwsCheck } from "../test-support/helpers.js";

interface MerkleVectors {
  leaves: string[];
  roots: string[];
  inclusion: { index: number; size: number; proof: string[] }[];
  consistency: { old_size: number; new_size: number; proof: string[] }[];
  invalid_inclusion: { why: string; index: number; size: number; proof: string[]; check: string }[];
  odd_duplication: { root_abc: string; root_abcc: string };
}

const v = loadVectors<MerkleVectors>("merkle.json");
const hashes = v.leaves.map((x) => leafHash(fromHex(x)));
const root = (n: number): Uint8Array => fromHex(v.roots[n] as string);
const hexList = (xs: string[]): Uint8Array[] => xs.map(fromHex);

describe("merkle hashing", () => {
  it("gives the RFC 6962 roots for sizes 0 to 8", () => {
    assert.equal(toHex(EMPTY_ROOT), v.roots[0]);
    v.roots.forEach((r, n) => assert.equal(toHex(rootFromLeafHashes(hashes.slice(0, n))), r));
  });

  it("never duplicates an odd node", () => {
    const [a, b, c] = ["a", "b", "c"].map((s) => leafHash(utf8(s))) as [Uint8Array, Uint8Array, Uint8Array];
    assert.equal(toHex(rootFromLeafHashes([a, b, c])), v.odd_duplication.root_abc);
    assert.equal(toHex(rootFromLeafHashes([a, b, c, c])), v.odd_duplication.root_abcc);
    assert.notEqual(v.odd_duplication.root_abc, v.odd_duplication.root_abcc);
  });
});

describe("inclusion proofs", () => {
  it("has the 36 vectors of the Python tests", () => assert.equal(v.inclusion.length, 36));

  for (const c of v.inclusion) {
    it(`verifies index ${c.index} in size ${c.size}, and fails when tampered`, () => {
      const proof = hexList(c.proof);
      const leaf = hashes[c.index] as Uint8Array;
      const ok = verifyInclusion({ leafHash: leaf, index: c.index, size: c.size, proof, root: root(c.size) });
      assert.equal(toHex(ok.root), v.roots[c.size]);
      assert.equal(ok.index, BigInt(c.index));
      assert.equal(ok.size, BigInt(c.size));
      assert.equal(inclusionProofLength(BigInt(c.index), BigInt(c.size)), proof.length);
      // bigint arguments work the same
      verifyInclusion({ leafHash: leaf, index: BigInt(c.index), size: BigInt(c.size), proof, root: root(c.size) });
      // a flipped bit in the root, the leaf or any proof hash changes the recomputed root
      const args = { leafHash: leaf, index: c.index, size: c.size, proof, root: root(c.size) };
      throwsCheck(() => verifyInclusion({ ...args, root: flipBit(args.root, 31, 7) }), "inclusion.root", ProofError);
      throwsCheck(() => verifyInclusion({ ...args, leafHash: flipBit(leaf, 5) }), "inclusion.root", ProofError);
      proof.forEach((p, i) => {
        const bad = proof.slice();
        bad[i] = flipBit(p, i % 32, i % 8);
        throwsCheck(() => verifyInclusion({ ...args, proof: bad }), "inclusion.root", ProofError);
      });
      if (c.size > 1) {
        // right proof, wrong leaf position
        assert.throws(
          () => verifyInclusion({ ...args, index: (c.index + 1) % c.size }),
          (e: unknown) => e instanceof ProofError,
        );
      }
    });
  }

  for (const c of v.invalid_inclusion) {
    it(`rejects: ${c.why} (${c.check})`, () => {
      const r = rootFromLeafHashes(hashes.slice(0, c.size));
      const leaf = hashes[Math.min(c.index, 7)] as Uint8Array;
      throwsCheck(
        () => verifyInclusion({ leafHash: leaf, index: c.index, size: c.size, proof: hexList(c.proof), root: r }),
        c.check,
        ProofError,
      );
    });
  }

  it("enforces the bounds before hashing", () => {
    const leaf = hashes[0] as Uint8Array;
    const h = root(8);
    const args = { leafHash: leaf, index: 0, size: 8, proof: hexList(v.inclusion[0]?.proof ?? []), root: h };
    throwsCheck(() => verifyInclusion({ ...args, proof: Array(65).fill(h) }), "inclusion.length");
    throwsCheck(() => verifyInclusion({ ...args, proof: [h.slice(1)] }), "proof.hash_size");
    throwsCheck(() => verifyInclusion({ ...args, root: h.slice(0, 31) }), "proof.hash_size");
    throwsCheck(() => verifyInclusion({ ...args, leafHash: new Uint8Array(33) }), "proof.hash_size");
    throwsCheck(() => verifyInclusion({ ...args, index: -1 }), "inclusion.range");
    throwsCheck(() => verifyInclusion({ ...args, index: 0.5 }), "inclusion.range");
    throwsCheck(() => verifyInclusion({ ...args, size: 2 ** 53 }), "inclusion.range"); // not a safe integer
    throwsCheck(() => verifyInclusion({ ...args, size: MAX_TREE_SIZE + 1n }), "inclusion.range");
    // the largest tree: index 0 needs 63 hashes; 62 is one short
    throwsCheck(
      () => verifyInclusion({ ...args, size: MAX_TREE_SIZE, proof: Array(62).fill(h) }),
      "inclusion.length",
    );
    throwsCheck(
      () => verifyInclusion({ ...args, size: MAX_TREE_SIZE, proof: Array(63).fill(h) }),
      "inclusion.root",
    );
  });
});

describe("consistency proofs", () => {
  it("has the 44 vectors of the Python tests", () => assert.equal(v.consistency.length, 44));

  for (const c of v.consistency) {
    const m = c.old_size;
    const n = c.new_size;
    it(`verifies ${m} -> ${n}, and fails when tampered`, () => {
      const proof = hexList(c.proof);
      const args = { oldSize: m, newSize: n, oldRoot: root(m), newRoot: root(n), proof };
      const ok = verifyConsistency(args);
      assert.equal(ok.oldSize, BigInt(m));
      assert.equal(ok.newSize, BigInt(n));
      assert.equal(consistencyProofLength(BigInt(m), BigInt(n)), proof.length);
      if (0 < m && m < n) {
        // the Python tests' case: a wrong old root
        assert.throws(() => verifyConsistency({ ...args, oldRoot: root(m - 1) }), ProofError);
        throwsCheck(() => verifyConsistency({ ...args, newRoot: flipBit(root(n), 0) }), "consistency.new_root");
        proof.forEach((p, i) => {
          const bad = proof.slice();
          bad[i] = flipBit(p, 31 - (i % 32), i % 8);
          assert.throws(
            () => verifyConsistency({ ...args, proof: bad }),
            (e: unknown) =>
              e instanceof ProofError && (e.check === "consistency.old_root" || e.check === "consistency.new_root"),
          );
        });
        throwsCheck(() => verifyConsistency({ ...args, proof: proof.slice(1) }), "consistency.length");
        throwsCheck(() => verifyConsistency({ ...args, proof: [...proof, root(0)] }), "consistency.length");
      }
      if (m === 0) {
        throwsCheck(() => verifyConsistency({ ...args, oldRoot: root(1) }), "consistency.old_root");
        if (n > 0) throwsCheck(() => verifyConsistency({ ...args, proof: [root(1)] }), "consistency.empty");
      }
      if (m === n && m > 0) {
        throwsCheck(() => verifyConsistency({ ...args, proof: [root(1)] }), "consistency.empty");
        throwsCheck(() => verifyConsistency({ ...args, newRoot: flipBit(root(n), 3) }), "consistency.new_root");
      }
    });
  }

  it("enforces the range and bounds", () => {
    const args = { oldSize: 3, newSize: 7, oldRoot: root(3), newRoot: root(7), proof: [] as Uint8Array[] };
    throwsCheck(() => verifyConsistency({ ...args, oldSize: 8 }), "consistency.range");
    throwsCheck(() => verifyConsistency({ ...args, oldSize: -1 }), "consistency.range");
    throwsCheck(() => verifyConsistency({ ...args, newSize: MAX_TREE_SIZE + 1n }), "consistency.range");
    throwsCheck(() => verifyConsistency({ ...args, proof: Array(65).fill(root(1)) }), "consistency.length");
    throwsCheck(() => verifyConsistency({ ...args, proof: [new Uint8Array(31)] }), "proof.hash_size");
    throwsCheck(() => verifyConsistency({ ...args, oldRoot: new Uint8Array(0) }), "proof.hash_size");
    // the empty tree's root must be SHA-256("")
    throwsCheck(
      () => verifyConsistency({ oldSize: 0, newSize: 0, oldRoot: EMPTY_ROOT, newRoot: root(1), proof: [] }),
      "consistency.new_root",
    );
    // a non-trivial proof cannot be empty
    throwsCheck(() => verifyConsistency(args), "consistency.length");
  });
});
