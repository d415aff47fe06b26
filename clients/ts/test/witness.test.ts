/** Witness keys, policies, cosignatures, quorums and add-checkpoint requests against
 * fixtures/witness-cases.json: what the Python verifier (verifier/witness.py) says for the
 * same inputs, the same here (results summarised the same way, failures by check name). */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { base64DecodeLoose, toHex, utf8 } from "../src/bytes.js";
import { publicKeyFromSeed } from "../src/ed25519.js";
import { VerificationError } from "../src/errors.js";
import { VerifierKey, verifyCheckpoint } from "../src/note.js";
import {
  WitnessError,
  WitnessKey,
  WitnessPolicy,
  cosign,
  cosignatureMessage,
  cosignerKeyId,
  formatAddCheckpoint,
  parseAddCheckpoint,
  verifyCosignatures,
} from "../src/witness.js";
import { loadFixture, throwsCheck } from "../test-support/helpers.js";

interface Fixture {
  log_vkey: string;
  witness_vkeys: Record<string, string>;
  keys: { name: string; vkey: string; python: string }[];
  policies: {
    name: string;
    policy?: string;
    policy_b64?: string;
    policy_parts?: (string | [string, number])[];
    python: string;
  }[];
  cosignature_policies: Record<string, string>;
  cosignatures: { name: string; note: string; policy: string; now: number; python: string }[];
  quorums: { policy: string; cases: { names: string[]; satisfied: boolean }[] }[];
  requests: { name: string; body_b64?: string; head_b64?: string; x?: number; python: string }[];
}

const fx = loadFixture<Fixture>("witness-cases.json");
const b64 = (s: string): Uint8Array => base64DecodeLoose(s) as Uint8Array;

/** "OK:<json>" (Python's json.dumps(..., separators=(",", ":"), ensure_ascii=False)) or the check. */
function outcome(fn: () => string | undefined): string {
  try {
    const r = fn();
    return r === undefined ? "OK" : `OK:${r}`;
  } catch (e) {
    if (e instanceof VerificationError) return e.check;
    throw e;
  }
}

function summary(p: WitnessPolicy): string {
  const logUrls = [...p.logUrls.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return JSON.stringify({
    logs: p.logs.map((k) => k.toString()),
    log_urls: Object.fromEntries(logUrls),
    witnesses: p.witnesses.map((w) => [w.name, w.key.toString(), w.url]),
    groups: [...p.groups.values()].map((g) => [g.name, g.threshold, g.members]),
    quorum: p.quorum,
  });
}

function policyBytes(c: Fixture["policies"][number]): Uint8Array {
  if (c.policy_b64 !== undefined) return b64(c.policy_b64);
  if (c.policy_parts !== undefined) {
    return utf8(c.policy_parts.map((p) => (typeof p === "string" ? p : p[0].repeat(p[1]))).join(""));
  }
  return utf8(c.policy as string);
}

describe("witnesses: cosigner keys (Python's answers)", () => {
  for (const c of fx.keys) {
    it(`${c.name}: ${c.python.split(":")[0]}`, () => {
      assert.equal(
        outcome(() => JSON.stringify(WitnessKey.parse(c.vkey).toString())),
        c.python,
      );
    });
  }
});

describe("witnesses: policies (Python's answers)", () => {
  for (const c of fx.policies) {
    it(`${c.name}: ${c.python.split(":")[0]}`, () => {
      assert.equal(outcome(() => summary(WitnessPolicy.parse(policyBytes(c)))), c.python);
      if (c.policy !== undefined) {
        // the same text given as a string
        assert.equal(outcome(() => summary(WitnessPolicy.parse(c.policy as string))), c.python);
      }
    });
  }
});

describe("witnesses: cosignatures on a checkpoint (Python's answers)", () => {
  const logKey = VerifierKey.parse(fx.log_vkey);
  for (const c of fx.cosignatures) {
    it(`${c.name}: ${c.python.split(":")[0]}`, () => {
      const policy = WitnessPolicy.parse(fx.cosignature_policies[c.policy] as string);
      assert.equal(
        outcome(() => JSON.stringify(policy.check(verifyCheckpoint(utf8(c.note), logKey), { now: c.now }))),
        c.python,
      );
    });
  }
});

describe("witnesses: quorums (Python's answers)", () => {
  for (const q of fx.quorums) {
    it(`${q.cases.length} sets of names`, () => {
      const policy = WitnessPolicy.parse(q.policy);
      for (const c of q.cases) assert.equal(policy.satisfied(c.names), c.satisfied, c.names.join(","));
    });
  }
});

describe("witnesses: add-checkpoint requests (Python's answers)", () => {
  for (const c of fx.requests) {
    it(`${c.name}: ${c.python.split(":")[0]}`, () => {
      const body =
        c.body_b64 !== undefined
          ? b64(c.body_b64)
          : Uint8Array.from([...b64(c.head_b64 as string), ...new Uint8Array(c.x as number).fill(0x78)]);
      assert.equal(
        outcome(() => {
          const r = parseAddCheckpoint(body);
          return `[${r.oldSize},[${r.proof.map((h) => JSON.stringify(toHex(h))).join(",")}],${r.checkpoint.length}]`;
        }),
        c.python,
      );
    });
  }

  it("writes what it parses", () => {
    const cp = utf8(fx.cosignatures[0]?.note as string);
    const proof = [new Uint8Array(32).fill(1), new Uint8Array(32).fill(2)];
    const r = parseAddCheckpoint(formatAddCheckpoint(7n, proof, cp));
    assert.equal(r.oldSize, 7n);
    assert.deepEqual(r.proof, proof);
    assert.deepEqual(r.checkpoint, cp);
    assert.throws(() => formatAddCheckpoint(0, Array<Uint8Array>(64).fill(proof[0] as Uint8Array), cp), RangeError);
  });
});

describe("witnesses: signing and verifying here", () => {
  const seed = new Uint8Array(32).fill(7);
  const note = fx.cosignatures[0]?.note as string;
  const text = note.slice(0, note.indexOf("\n\n") + 1);
  const logKey = VerifierKey.parse(fx.log_vkey);

  it("verifies its own cosignatures, as the Python verifier's", () => {
    const line = cosign(text, "w.example", seed, 1_849_999_000n);
    const cp = verifyCheckpoint(utf8(note + line), logKey);
    const w = WitnessKey.fromPublicKey("w.example", publicKeyFromSeed(seed));
    assert.deepEqual(w.keyId, cosignerKeyId("w.example", publicKeyFromSeed(seed)));
    assert.deepEqual(WitnessKey.parse(w.toString()), w);
    const got = verifyCosignatures(cp.note, [w], { now: 1_850_000_000 });
    assert.equal(got.get(w)?.timestamp, 1_849_999_000n);
    assert.equal(got.get(w)?.witness, "w.example");
    const policy = WitnessPolicy.threshold([w], 1);
    assert.deepEqual(policy.check(cp, { now: 1_850_000_000 }), ["w0"]);
    assert.deepEqual(policy.check(cp, { now: 1_850_000_000n }), ["w0"]);
    throwsCheck(() => policy.check(cp, { now: 1_849_000_000 }), "witness.timestamp", WitnessError);
    throwsCheck(() => policy.check(cp, { now: 1_849_000_000, maxSkewS: 1000 }), "witness.timestamp");
    assert.deepEqual(policy.check(cp, { now: 1_849_000_000, maxSkewS: 1000 + 1_000_000 }), ["w0"]);
  });

  it("signs the C2SP cosignature/v1 message", () => {
    assert.deepEqual(cosignatureMessage("a\n", 5), utf8("cosignature/v1\ntime 5\na\n"));
    assert.throws(() => cosignatureMessage("a\n", -1n), RangeError);
    assert.throws(() => cosign("a\n", "w", seed, 0), RangeError);
  });

  it("refuses what is not a policy, and an empty threshold", () => {
    throwsCheck(() => WitnessPolicy.threshold([], 1), "witness.policy");
    throwsCheck(() => WitnessPolicy.parse("\ud800"), "witness.policy");
    throwsCheck(() => WitnessPolicy.parse(5 as unknown as string), "witness.policy");
    throwsCheck(() => WitnessPolicy.threshold([fx.witness_vkeys["w1"] as string], 2), "witness.policy");
  });
});
