/** Key histories (verifier/keys.py): scenarios of key events from fixtures/bundle-cases.json,
 * each leaf built here from the same seeds as the Python generator (the same bytes: their
 * hash is compared), replayed through KeyHistory with the outcome of every leaf and the
 * final key state the Python verifier gave; plus the rules one by one. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { sha256 } from "@noble/hashes/sha2.js";

import { concatBytes, toHex, utf8 } from "../src/bytes.js";
import { publicKeyFromSeed } from "../src/ed25519.js";
import { KeyStateError, SignatureError, UnknownKeyError, VerificationError } from "../src/errors.js";
import { Envelope, Leaf, POLICY_AGENT, agentKeyId, bodyCommitment, signEvent, signPop } from "../src/event.js";
import { KeyHistory, authorize } from "../src/keys.js";
import { loadFixture, throwsCheck } from "../test-support/helpers.js";

/** [agent, signer key label, kind, new key label or null, flags ("s": signed by another
 * key, "p": a proof of possession made for another agent)]. */
type KeyEvent = [string, string, string, string | null, string];

interface KeyCase {
  name: string;
  events: KeyEvent[];
  leaves_sha256: string;
  outcomes: string[];
  active: Record<string, string>;
  keys: Record<string, [string, number, number | null, string | null]>;
}

const fx = loadFixture<{ origin: string; key_histories: KeyCase[] }>("bundle-cases.json");
const ORIGIN = fx.origin;

/** The generator's seed_key: SHA-256 of "engram-ts/<label>". */
const seed = (label: string): Uint8Array => sha256(utf8(`engram-ts/keys/${label}`));
const EMPTY_BODY = bodyCommitment(new Uint8Array(16), utf8("{}"));

function leafOf(index: number, [agent, signer, kind, newKey, flags]: KeyEvent): Leaf {
  const signerSeed = seed(signer);
  const envelope = new Envelope({
    origin: ORIGIN,
    agent,
    keyId: agentKeyId(publicKeyFromSeed(signerSeed)),
    kind,
    version: 0,
    prev: null,
    clientTimeUs: 1_000 + index,
    bodyCommitment: EMPTY_BODY,
    newKey:
      newKey === null
        ? null
        : signPop({ origin: ORIGIN, agent: flags.includes("p") ? "mallory" : agent, seed: seed(newKey) }),
  });
  const signature = signEvent(envelope, flags.includes("s") ? seed("bad") : signerSeed);
  return Leaf.build({ index, timestampUs: 1_000_000 + index, envelope, signature });
}

function outcome(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof VerificationError) return e.check;
    throw e;
  }
  return "ok";
}

describe("key histories: the Python verifier's answers", () => {
  it("holds every refusal", () => {
    const seen = new Set(fx.key_histories.flatMap((c) => c.outcomes));
    for (const check of [
      "ok",
      "key.registered",
      "key.rotated",
      "key.revoked",
      "key.unknown",
      "key.owner",
      "key.authority",
      "key.pop",
      "event.signature",
    ]) {
      assert.ok(seen.has(check), check);
    }
  });

  for (const c of fx.key_histories) {
    it(c.name, () => {
      const leaves = c.events.map((e, i) => leafOf(i, e));
      assert.equal(toHex(sha256(concatBytes(...leaves.map((l) => l.raw)))), c.leaves_sha256);
      const history = new KeyHistory();
      assert.deepEqual(
        leaves.map((leaf) => outcome(() => history.checkAndApply(leaf))),
        c.outcomes,
      );
      assert.deepEqual(Object.fromEntries([...history.active].sort()), c.active);
      assert.deepEqual(
        Object.fromEntries(
          [...history.keys.values()]
            .sort((a, b) => (a.keyId < b.keyId ? -1 : 1))
            .map((r) => [r.keyId, [r.agent, r.addedAt, r.retiredAt, r.retiredHow]]),
        ),
        c.keys,
      );
    });
  }
});

describe("key histories: the rules", () => {
  const K0 = agentKeyId(publicKeyFromSeed(seed("k0")));
  const K1 = agentKeyId(publicKeyFromSeed(seed("k1")));
  const P0 = agentKeyId(publicKeyFromSeed(seed("p0")));

  it("registers, rotates and keeps history valid", () => {
    const h = new KeyHistory();
    const reg = h.checkAndApply(leafOf(0, ["alice", "k0", "key.registered", "k0", ""]));
    assert.deepEqual(reg.signerPublicKey, publicKeyFromSeed(seed("k0")));
    assert.equal(reg.change?.add?.keyId, K0);
    assert.equal(h.activeKey("alice"), K0);
    h.checkAndApply(leafOf(1, ["alice", "k0", "key.rotated", "k1", ""]));
    assert.equal(h.activeKey("alice"), K1);
    assert.deepEqual(
      { at: h.key(K0)?.retiredAt, how: h.key(K0)?.retiredHow, added: h.key(K1)?.addedAt },
      { at: 1, how: "rotated", added: 1 },
    );
    const late = leafOf(2, ["alice", "k0", "pact.outcome", null, ""]);
    throwsCheck(() => h.checkAndApply(late), "key.rotated", KeyStateError);
    assert.equal(h.key("0".repeat(32)), null);
    assert.equal(h.activeKey("bob"), null);
  });

  it("names unknown keys, keys of another agent and the policy's authority", () => {
    const h = new KeyHistory();
    const early = leafOf(0, ["alice", "k0", "pact.outcome", null, ""]);
    throwsCheck(() => h.checkAndApply(early), "key.unknown", UnknownKeyError);
    h.checkAndApply(leafOf(0, ["alice", "k0", "key.registered", "k0", ""]));
    h.checkAndApply(leafOf(1, [POLICY_AGENT, "p0", "key.registered", "p0", ""]));
    throwsCheck(() => h.checkAndApply(leafOf(2, ["bob", "k0", "pact.outcome", null, ""])), "key.owner");
    throwsCheck(() => h.checkAndApply(leafOf(2, ["alice", "p0", "pact.outcome", null, ""])), "key.owner");
    throwsCheck(() => h.checkAndApply(leafOf(2, ["alice", "k0", "memory.tier_changed", null, ""])), "key.authority");
    h.checkAndApply(leafOf(2, ["alice", "p0", "memory.archived", null, ""]));
    h.checkAndApply(leafOf(3, ["alice", "p0", "key.revoked", null, ""])); // forced revocation
    assert.equal(h.activeKey("alice"), null);
    assert.equal(h.activeKey(POLICY_AGENT), P0);
    throwsCheck(() => h.checkAndApply(leafOf(4, ["alice", "k0", "pact.outcome", null, ""])), "key.revoked");
  });

  it("authorizes without changing anything; a failed leaf changes nothing", () => {
    const h = new KeyHistory();
    const leaf = leafOf(0, ["alice", "k0", "key.registered", "k0", ""]);
    const d = authorize(h, leaf.envelope, leaf.index);
    assert.equal(h.keys.size, 0);
    h.apply(null, 0);
    h.apply(d.change, 0);
    assert.equal(h.activeKey("alice"), K0);
    const forged = leafOf(1, ["alice", "k0", "key.rotated", "k1", "s"]);
    throwsCheck(() => h.checkAndApply(forged), "event.signature", SignatureError);
    assert.equal(h.activeKey("alice"), K0);
    assert.equal(h.key(K1), null);
  });

  it("skips the signature check only for the very key it authorized", () => {
    const forged = leafOf(0, ["alice", "k0", "key.registered", "k0", "s"]);
    const k0 = publicKeyFromSeed(seed("k0"));
    throwsCheck(() => new KeyHistory().checkAndApply(forged), "event.signature");
    throwsCheck(
      () => new KeyHistory().checkAndApply(forged, { verifiedWith: publicKeyFromSeed(seed("k1")) }),
      "event.signature",
    );
    assert.equal(new KeyHistory().checkAndApply(forged, { verifiedWith: k0 }).change?.add?.keyId, K0);
  });

  it("keeps agent ids that name Object members apart", () => {
    const h = new KeyHistory();
    h.checkAndApply(leafOf(0, ["constructor", "k0", "key.registered", "k0", ""]));
    assert.equal(h.activeKey("constructor"), K0);
    assert.equal(h.activeKey("tostring"), null);
    throwsCheck(() => h.checkAndApply(leafOf(1, ["hasownproperty", "k0", "pact.outcome", null, ""])), "key.owner");
  });
});
