/** Attestation bundles against fixtures/bundle-cases.json: honest and tampered bundles the
 * Python ledger built, each verified here with the outcome, check name and steps the Python
 * verifier (verifier/bundle.py) gave for the very same bytes; plus the parts of the port
 * only this client has (the witness hook, the result's members). */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { sha256 } from "@noble/hashes/sha2.js";

import { toHex, utf8 } from "../src/bytes.js";
import {
  HEADS_HEADER,
  MAX_BUNDLE_BYTES,
  MEDIA_TYPE,
  ClaimError,
  TokenError,
  describeStatement,
  headsText,
  meanQuality,
  parseHeads,
  pythonJsonDumps,
  streamKey,
  verifyBundle,
  type Step,
  type VerifyBundleOptions,
} from "../src/bundle.js";
import { VerificationError } from "../src/errors.js";
import { VerifierKey, verifyCheckpoint } from "../src/note.js";
import { applyEdits, loadFixture, throwsCheck, type Edit } from "../test-support/helpers.js";

interface BundleCase {
  name: string;
  bundle: string;
  edits: Edit[] | null;
  key?: string;
  trusted?: string[];
  remembered?: string;
  audience?: string;
  sha256: string;
  expect: string;
  /** [check, detail] pairs when VERIFIED, else the names of the checks that passed. */
  steps: (Step | string)[];
}

interface BundleFixture {
  origin: string;
  keys: Record<string, string>;
  checkpoints: Record<string, string>;
  bundles: Record<string, string>;
  cases: BundleCase[];
}

const fx = loadFixture<BundleFixture>("bundle-cases.json");

// JSON values of the test's own making (parsed from the fixture), mutated freely.
type Obj = Record<string | number, any>;

const key = (name = "log"): VerifierKey => VerifierKey.parse(fx.keys[name] as string);
const checkpoint = (name: string): Uint8Array => utf8(fx.checkpoints[name] as string);
const bundleBytes = (name: string): Uint8Array => utf8(fx.bundles[name] as string);

function optionsOf(c: BundleCase): VerifyBundleOptions {
  const options: VerifyBundleOptions = {};
  if (c.trusted) options.trustedCheckpoints = c.trusted.map(checkpoint);
  if (c.remembered !== undefined) options.remembered = checkpoint(c.remembered);
  if (c.audience !== undefined) {
    options.audience = c.audience;
    options.at = 1_900_000_000;
  }
  return options;
}

/** "VERIFIED" or the check of the VerificationError thrown (anything else is a bug). */
function outcome(data: Uint8Array, logKey: VerifierKey, options: VerifyBundleOptions): string {
  try {
    verifyBundle(data, logKey, options);
    return "VERIFIED";
  } catch (e) {
    if (e instanceof VerificationError) return e.check;
    throw e;
  }
}

describe("bundles: the Python verifier's answers", () => {
  it("holds cases of every check and every failure step", () => {
    const expects = new Set(fx.cases.map((c) => c.expect));
    for (const check of [
      "VERIFIED",
      "format",
      "format.version",
      "format.claim",
      "format.consistency",
      "checkpoint.origin",
      "trusted.fork",
      "state.rollback",
      "inclusion.root",
      "timestamps.fraud",
      "heads.format",
      "heads.binding",
      "note.trusted_signature",
      "key.unknown",
      "completeness.coverage",
      "completeness.missing",
      "completeness.fraud",
      "completeness.head",
      "body.commitment",
      "bodies.erased",
      "token.audience",
      "claim.value",
      "claim.undisclosed",
      "claim.mesh",
    ]) {
      assert.ok(expects.has(check), check);
    }
    assert.ok(fx.cases.length >= 150);
  });

  for (const c of fx.cases) {
    it(`${c.name}: ${c.expect}`, () => {
      const data = applyEdits(fx.bundles[c.bundle] as string, c.edits);
      assert.equal(toHex(sha256(data)), c.sha256, "not the bytes the Python verifier saw");
      const steps: Step[] = [];
      const options = { ...optionsOf(c), steps };
      assert.equal(outcome(data, key(c.key), options), c.expect);
      if (c.expect === "VERIFIED") assert.deepEqual(steps, c.steps);
      else assert.deepEqual(steps.map((s) => s[0]), c.steps);
    });
  }
});

describe("bundles: the result", () => {
  it("recomputes the pact claim and names its streams", () => {
    const steps: Step[] = [];
    const r = verifyBundle(bundleBytes("pact"), key(), { steps });
    assert.deepEqual(
      r.claims.map((c) => c.recomputed),
      [6, 5, "83.17"],
    );
    assert.ok(r.claims.every((c) => c.holds));
    assert.equal(r.streams.get(streamKey("alice", "pact.outcome")), 5n);
    assert.equal(r.streams.get(streamKey("engram.policy", "key.registered")), 0n);
    assert.deepEqual([...r.covered].sort(), ["alice", "engram.policy"]);
    assert.equal(r.entries, 9);
    assert.deepEqual(r.erased, []);
    assert.equal(r.steps, steps);
    assert.deepEqual(
      r.steps.map((s) => s[0]),
      ["format", "inclusion", "timestamps", "heads", "signatures", "completeness", "bodies", "claim"].flatMap((s) =>
        s === "inclusion" ? ["checkpoint", s] : [s],
      ),
    );
    assert.equal(r.checkpoint.origin, fx.origin);
    assert.deepEqual(r.witnesses, []);
    assert.equal(r.consistency.size, 0);
  });

  it("reports erased entries and the consistency proofs it carries", () => {
    const erased = verifyBundle(bundleBytes("erased"), key());
    assert.equal(erased.erased.length, 1);
    assert.equal(erased.claims[0]?.recomputed, 7);
    const fresh = verifyBundle(bundleBytes("fresh"), key(), { trustedCheckpoint: checkpoint("old") });
    const old = verifyCheckpoint(checkpoint("old"), key());
    assert.ok((fresh.consistency.get(old.size)?.length ?? 0) > 0);
  });

  it("passes the steps that ran to the caller when a check fails", () => {
    const steps: Step[] = [];
    const c = fx.cases.find((x) => x.name === "count misstated") as BundleCase;
    assert.throws(
      () => verifyBundle(applyEdits(fx.bundles[c.bundle] as string, c.edits), key(), { steps }),
      (e: unknown) => e instanceof ClaimError && e.check === "claim.value",
    );
    assert.deepEqual(steps.map((s) => s[0]), c.steps);
  });

  it("takes a trusted checkpoint alone or in a list", () => {
    const one = verifyBundle(bundleBytes("fresh"), key(), { trustedCheckpoint: checkpoint("old") });
    const list = verifyBundle(bundleBytes("fresh"), key(), { trustedCheckpoints: [checkpoint("old")] });
    assert.deepEqual(one.steps, list.steps);
    throwsCheck(
      () =>
        verifyBundle(bundleBytes("pact"), key(), {
          trustedCheckpoint: checkpoint("old"),
          trustedCheckpoints: [checkpoint("new")],
        }),
      "trusted.stale",
    );
  });
});

describe("bundles: witnesses (the caller's check)", () => {
  it("runs after the checkpoint and prints who cosigned", () => {
    let seen: bigint | undefined;
    const r = verifyBundle(bundleBytes("pact"), key(), {
      witnesses: (cp) => {
        seen = cp.size;
        return ["w1.example", "w2.example"];
      },
    });
    assert.equal(seen, r.checkpoint.size);
    assert.deepEqual(r.witnesses, ["w1.example", "w2.example"]);
    assert.deepEqual(r.steps[2], [
      "witnesses",
      "cosigned by w1.example, w2.example: the witness policy's quorum is met",
    ]);
  });

  it("fails with the check the witness check names", () => {
    const steps: Step[] = [];
    throwsCheck(
      () =>
        verifyBundle(bundleBytes("pact"), key(), {
          steps,
          witnesses: () => {
            throw new VerificationError("no quorum", { check: "witness.quorum" });
          },
        }),
      "witness.quorum",
    );
    assert.deepEqual(steps.map((s) => s[0]), ["format", "checkpoint"]);
  });
});

describe("bundles: share tokens before the token is opened", () => {
  const withToken = (): Uint8Array => applyEdits(fx.bundles["pact"] as string, [["set", ["token"], "abc"]]);

  it("opens the token after the bodies (share-bundle.test.ts verifies real ones)", () => {
    const steps: Step[] = [];
    const verify = (): unknown => verifyBundle(withToken(), key(), { audience: "buyer-1", steps });
    throwsCheck(verify, "token.signature");
    assert.deepEqual(
      steps.map((s) => s[0]),
      ["format", "checkpoint", "inclusion", "timestamps", "heads", "signatures", "completeness", "bodies"],
    );
  });

  it("makes the checks before it as Python does", () => {
    throwsCheck(() => verifyBundle(withToken(), key()), "token.audience", TokenError);
    throwsCheck(() => verifyBundle(withToken(), key(), { audience: "no spaces" }), "token.audience");
  });
});

describe("bundles: bounds and inputs", () => {
  it("refuses what is not bytes, and more than 64 MiB before reading it", () => {
    throwsCheck(() => verifyBundle("{}" as unknown as Uint8Array, key()), "format");
    throwsCheck(() => verifyBundle(new Uint8Array(MAX_BUNDLE_BYTES + 1), key()), "format.size");
    throwsCheck(() => verifyBundle(utf8("[]"), key()), "format");
    throwsCheck(() => verifyBundle(utf8(""), key()), "json.syntax");
  });

  it("refuses a bundle of another media type before its members", () => {
    const v1 = utf8(JSON.stringify({ media_type: "application/vnd.engram.bundle.v1+json" }));
    throwsCheck(() => verifyBundle(v1, key()), "format.version");
    throwsCheck(() => verifyBundle(utf8(JSON.stringify({ media_type: MEDIA_TYPE })), key()), "format");
  });
});

describe("bundles: helpers", () => {
  it("rounds means half to even, as Python's Decimal quantize", () => {
    // The strings verifier/bundle.py's mean_quality gives for the same values.
    const cases: [number[], string][] = [
      [[94, 81, 99, 40, 88, 97], "83.17"],
      [[1, 2], "1.50"],
      [[1, ...Array<number>(199).fill(0)], "0.00"],
      [[3, ...Array<number>(199).fill(0)], "0.02"],
      [[-1, ...Array<number>(999).fill(0)], "-0.00"],
      [[-1, -2], "-1.50"],
      [[2 ** 53 - 1, 2 ** 53 - 1], "9007199254740991.00"],
      [[-(2 ** 53 - 1), -(2 ** 53 - 1), -(2 ** 53 - 1), 1], "-6755399441055743.00"],
      [[0], "0.00"],
      [[5, -5], "0.00"],
      [[-3, ...Array<number>(199).fill(0)], "-0.02"],
      [[1, 1, 1], "1.00"],
    ];
    for (const [values, expected] of cases) assert.equal(meanQuality(values), expected, String(values.slice(0, 3)));
    assert.throws(() => meanQuality([]), RangeError);
  });

  it("prints claim lines as Python's json.dumps does", () => {
    const where = { z: "\u00e9\u{1f600}\x7f\"", a: [1, { y: true, b: null }] };
    assert.equal(
      describeStatement({ predicate: "count", agent: "a", kind: "k", where, value: 3 }),
      'count of a/k where {"a":[1,{"b":null,"y":true}],"z":"\\u00e9\\ud83d\\ude00\\u007f\\""} = 3',
    );
    assert.equal(
      describeStatement({ predicate: "mean", agent: "a", kind: "k", field: "q", value: "1.00" }, "x\u2028"),
      'mean q of a/k = "x\\u2028"',
    );
    assert.equal(pythonJsonDumps([1, { b: "c" }]), '[1, {"b": "c"}]');
    const astral = { "\u{10000}": 1, "\uffff": 2 };
    assert.equal(pythonJsonDumps(astral, { sortKeys: true, compact: true }), '{"\\uffff":2,"\\ud800\\udc00":1}');
  });

  it("writes stream-head statements that parse back", () => {
    const pact = JSON.parse(fx.bundles["pact"] as string) as Obj;
    const cp = verifyCheckpoint(utf8(pact["checkpoint"] as string), key());
    const heads = parseHeads(utf8(pact["stream_heads"] as string), key(), cp);
    const text = (pact["stream_heads"] as string).slice(0, (pact["stream_heads"] as string).indexOf("\n\n") + 1);
    const rows = [...heads.heads.values()].map((h) => [h.agent, h.kind, h.version, h.index, h.leafHash] as const);
    const lines = (pact["checkpoint"] as string).split("\n");
    assert.equal(headsText(cp.origin, cp.size, lines[2] as string, rows.reverse(), [...heads.covered]), text);
    assert.ok(text.startsWith(`${HEADS_HEADER}\n`));
    assert.throws(() => headsText(cp.origin, cp.size, "x", [["bob", "k", 0, 0, "00"]], ["alice"]), RangeError);
  });
});
