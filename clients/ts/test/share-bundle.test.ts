/** Bundles with share tokens and bundles under witness policies, against
 * fixtures/share-bundle-cases.json: bundles the Python ledger built, honest and tampered,
 * each verified here with the outcome, check name and steps the Python verifier
 * (verifier/bundle.py with verifier/token.py and verifier/witness.py) gave for the very same
 * bytes (or, where the port answers differently on purpose, the fixture's `ts`). */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { sha256 } from "@noble/hashes/sha2.js";

import { toHex } from "../src/bytes.js";
import { TokenError, verifyBundle, type Step, type VerifyBundleOptions } from "../src/bundle.js";
import { VerificationError } from "../src/errors.js";
import { VerifierKey } from "../src/note.js";
import { WitnessPolicy, witnessCheck } from "../src/witness.js";
import { applyEdits, loadFixture, throwsCheck, type Edit } from "../test-support/helpers.js";

interface ShareCase {
  name: string;
  bundle: string;
  edits: Edit[] | null;
  audience?: string;
  at?: number;
  policy?: string;
  sha256: string;
  python: string;
  steps: (Step | string)[];
  ts?: string;
  note?: string;
}

interface Fixture {
  log_vkey: string;
  bundles: Record<string, string>;
  policies: Record<string, string>;
  cases: ShareCase[];
}

const fx = loadFixture<Fixture>("share-bundle-cases.json");
const logKey = VerifierKey.parse(fx.log_vkey);

function optionsOf(c: ShareCase): VerifyBundleOptions {
  const options: VerifyBundleOptions = {};
  if (c.audience !== undefined) options.audience = c.audience;
  if (c.at !== undefined) options.at = c.at;
  if (c.policy !== undefined) options.witnessPolicy = fx.policies[c.policy] as string;
  return options;
}

function outcome(data: Uint8Array, options: VerifyBundleOptions): string {
  try {
    verifyBundle(data, logKey, options);
    return "VERIFIED";
  } catch (e) {
    if (e instanceof VerificationError) return e.check;
    throw e;
  }
}

describe("bundles with share tokens and witness policies: the Python verifier's answers", () => {
  it("holds cases of every outcome", () => {
    const outcomes = new Set(fx.cases.map((c) => c.python));
    for (const o of ["VERIFIED", "token.audience", "token.scope", "token.signature", "token.revoked",
      "witness.quorum", "witness.policy", "witness.signature", "witness.timestamp"]) {
      assert.ok(outcomes.has(o), o);
    }
  });

  for (const c of fx.cases) {
    const expected = c.ts ?? c.python;
    it(`${c.name}: ${expected}${c.ts !== undefined ? ` (Python: ${c.python})` : ""}`, () => {
      const data = applyEdits(fx.bundles[c.bundle] as string, c.edits);
      assert.equal(toHex(sha256(data)), c.sha256, "not the bytes the Python verifier saw");
      const steps: Step[] = [];
      assert.equal(outcome(data, { ...optionsOf(c), steps }), expected);
      const python = c.steps.map((s) => (typeof s === "string" ? s : s[0]));
      if (c.ts !== undefined) {
        // the port stops at the step the Python verifier passed (or crashed in): the same steps before it
        assert.deepEqual(steps.map((s) => s[0]), python.slice(0, steps.length));
        assert.ok(steps.length === python.length || python[steps.length] === c.ts.split(".")[0]);
      } else if (c.python === "VERIFIED") assert.deepEqual(steps, c.steps);
      else assert.deepEqual(steps.map((s) => s[0]), python);
    });
  }
});

describe("bundles: the share token and witness options", () => {
  const honest = (): Uint8Array => applyEdits(fx.bundles["token"] as string, null);
  const cosigned = (): Uint8Array => applyEdits(fx.bundles["plain-cosigned"] as string, null);

  it("names the token step as the Python verifier does", () => {
    const r = verifyBundle(honest(), logKey, { audience: "buyer-1", at: 1_850_000_000 });
    const token = r.steps.find((s) => s[0] === "token");
    assert.deepEqual(token, ["token", "share token of ann allows pact.outcome to buyer-1; not revoked (1 revocations checked)"]);
  });

  it("still takes `now` for `at`", () => {
    throwsCheck(() => verifyBundle(honest(), logKey, { audience: "buyer-1", now: 1_900_000_001 }), "token.scope",
      TokenError);
    throwsCheck(() => verifyBundle(honest(), logKey, { audience: "buyer-1", at: 1_900_000_001n }), "token.scope");
  });

  it("takes a policy as text, bytes or parsed, and refuses a bad one before any step", () => {
    const text = fx.policies["2of3"] as string;
    for (const witnessPolicy of [text, new TextEncoder().encode(text), WitnessPolicy.parse(text)]) {
      const r = verifyBundle(cosigned(), logKey, { witnessPolicy, at: 1_850_000_000 });
      assert.deepEqual(r.witnesses, ["a", "c"]);
      assert.deepEqual(r.steps[2], ["witnesses", "cosigned by a, c: the witness policy's quorum is met"]);
    }
    const steps: Step[] = [];
    throwsCheck(() => verifyBundle(cosigned(), logKey, { witnessPolicy: "nothing\n", steps }), "witness.policy");
    assert.deepEqual(steps, []);
    assert.throws(() => verifyBundle(cosigned(), logKey, { witnessPolicy: text, witnesses: () => [] }), TypeError);
    const hook = witnessCheck(text, 1_850_000_000);
    assert.deepEqual(verifyBundle(cosigned(), logKey, { witnesses: hook }).witnesses, ["a", "c"]);
    throwsCheck(() => witnessCheck("quorum x\n"), "witness.policy");
  });
});
