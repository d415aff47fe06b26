/** Share tokens against fixtures/token-cases.json: honest and tampered tokens that the Python
 * verifier (verifier/token.py, biscuit-python 0.4.0) checked, each verified here with the
 * outcome and check name Python gave for the very same text (or, where the port answers
 * differently on purpose, the answer the fixture's `ts` and `note` state); every one-bit flip
 * of two tokens; edits of the base64 text. Plus the parts only this port has. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { base64DecodeLoose } from "../src/bytes.js";
import { VerificationError } from "../src/errors.js";
import * as p256 from "../src/p256.js";
import { ProtobufError, decodeMessage, schema } from "../src/protobuf.js";
import { MAX_TOKEN_CHARS, TokenError, decodeBase64Url, revocationIds, verifyToken } from "../src/token.js";
import { loadFixture, throwsCheck } from "../test-support/helpers.js";

interface Options {
  agent_keys?: string[];
  origin?: string;
  agent?: string;
  audience?: string;
  kinds?: string[];
  at?: number | string;
  revoked?: string[];
  candidates?: string[];
}

interface TokenCase {
  name: string;
  token: string | { text: string } | { repeat: [string, number] };
  options?: Options;
  python: string;
  ts?: string;
  note?: string;
}

interface Fixture {
  defaults: Required<Options> & { at: number };
  keys: Record<string, string>;
  tokens: Record<string, string>;
  cases: TokenCase[];
  sweeps: { token: string; start: number; runs: Record<string, [string, number][]> }[];
  text_sweeps: { token: string; edits: [op: string, pos: number, ch: string, outcome: string][] }[];
}

const fx = loadFixture<Fixture>("token-cases.json");

const b64 = (s: string): Uint8Array => base64DecodeLoose(s) as Uint8Array;
const key = (name: string): Uint8Array => b64(fx.keys[name] as string);

function textOf(c: TokenCase): string {
  if (typeof c.token === "string") return fx.tokens[c.token] as string;
  if ("text" in c.token) return c.token.text;
  return c.token.repeat[0].repeat(c.token.repeat[1]);
}

/** "VERIFIED:<kinds>" or the failed check (anything but a VerificationError is a bug). */
function outcome(text: string, options: Options = {}): string {
  const o = { ...fx.defaults, ...options };
  try {
    const v = verifyToken(text, {
      agentKeys: o.agent_keys.map(key),
      origin: o.origin,
      agent: o.agent,
      audience: o.audience,
      kinds: o.kinds,
      at: typeof o.at === "string" ? BigInt(o.at) : o.at,
      revokedIds: o.revoked,
      candidates: o.candidates,
    });
    return `VERIFIED:${v.kinds.join(",")}`;
  } catch (e) {
    if (e instanceof VerificationError) return e.check;
    throw e;
  }
}

/** Standard base64url with padding, as Python's urlsafe_b64encode. */
function b64url(data: Uint8Array): string {
  return Buffer.from(data).toString("base64").replace(/\+/g, "-").replace(/\//g, "_");
}

function urlBytes(text: string): Uint8Array {
  return Uint8Array.from(Buffer.from(text.replace(/-/g, "+").replace(/_/g, "/"), "base64"));
}

describe("share tokens: the Python verifier's answers", () => {
  it("holds every outcome, and its differences are explained", () => {
    const outcomes = new Set(fx.cases.map((c) => c.python.split(":")[0]));
    for (const o of ["VERIFIED", "token.format", "token.signature", "token.template", "token.limits", "token.revoked",
      "token.scope", "token.kinds", "token.audience"]) {
      assert.ok(outcomes.has(o), o);
    }
    for (const c of fx.cases) {
      assert.ok(!c.python.startsWith("crash:"), c.name); // Python answers every token with a check name
      if (c.ts !== undefined) assert.ok(c.note, c.name);
    }
    assert.ok(fx.cases.length >= 250);
  });

  for (const c of fx.cases) {
    const expected = c.ts ?? c.python;
    it(`${c.name}: ${expected}${c.ts !== undefined ? ` (Python: ${c.python})` : ""}`, () => {
      assert.equal(outcome(textOf(c), c.options), expected);
    });
  }
});

describe("share tokens: random attenuation blocks (Python's answers)", () => {
  const fuzz = loadFixture<{ cases: { token: string; kinds: string[]; at: number; python: string }[] }>("token-fuzz.json");
  it(`${fuzz.cases.length} mutated blocks, signed again`, () => {
    const diffs = fuzz.cases
      .map((c, i) => [i, outcome(c.token, { kinds: c.kinds, at: c.at }), c.python])
      .filter(([, got, expected]) => got !== expected);
    assert.deepEqual(diffs.slice(0, 5), []);
    const outcomes = new Set(fuzz.cases.map((c) => c.python.split(":")[0]));
    for (const o of ["VERIFIED", "token.template", "token.scope", "token.limits"]) assert.ok(outcomes.has(o), o);
    assert.ok(!outcomes.has("crash"), "Python answers every token with a check name");
  });
});

describe("share tokens: every one-bit flip (Python's answers)", () => {
  for (const sweep of fx.sweeps) {
    const data = urlBytes(sweep.token);
    for (const [mask, runs] of Object.entries(fx.sweeps.length ? sweep.runs : {})) {
      it(`${data.length - sweep.start} flips of mask ${mask} from byte ${sweep.start}`, () => {
        const expected = runs.flatMap(([o, n]) => Array<string>(n).fill(o));
        assert.equal(expected.length, data.length - sweep.start);
        const got: string[] = [];
        for (let i = sweep.start; i < data.length; i++) {
          const flipped = data.slice();
          flipped[i] = (flipped[i] as number) ^ Number(mask);
          got.push(outcome(b64url(flipped)));
        }
        const diffs = got.map((g, i) => [i + sweep.start, g, expected[i]]).filter(([, g, e]) => g !== e);
        assert.deepEqual(diffs.slice(0, 5), []);
      });
    }
  }
});

describe("share tokens: edits of the base64 text (Python's answers)", () => {
  for (const sweep of fx.text_sweeps) {
    it(`${sweep.edits.length} edits of a ${sweep.token.length}-character token`, () => {
      const t = sweep.token;
      for (const [op, pos, ch, expected] of sweep.edits) {
        const edited =
          op === "replace"
            ? t.slice(0, pos) + ch + t.slice(pos + 1)
            : op === "delete"
              ? t.slice(0, pos) + t.slice(pos + 1)
              : op === "insert"
                ? t.slice(0, pos) + ch + t.slice(pos)
                : t + ch;
        assert.equal(outcome(edited), expected, `${op} ${pos} ${JSON.stringify(ch)}`);
      }
    });
  }
});

describe("share tokens: the result", () => {
  it("names the kinds allowed, the revocation ids and the key", () => {
    const text = fx.tokens["attenuated"] as string;
    const v = verifyToken(text, {
      agentKeys: [key("bob"), key("ann")],
      origin: fx.defaults.origin,
      agent: "ann",
      audience: "buyer-1",
      kinds: ["pact.outcome"],
      candidates: ["memory.written", "commitment"],
      at: fx.defaults.at,
    });
    assert.deepEqual(v.kinds, ["pact.outcome"]);
    assert.equal(v.revocationIds.length, 2);
    assert.ok(v.revocationIds.every((id) => /^[0-9a-f]{128}$/.test(id)));
    assert.deepEqual(v.rootKey, key("ann"));
    assert.deepEqual(revocationIds(text, { agentKeys: [key("ann")] }), v.revocationIds);
    assert.equal(v.audience, "buyer-1");
    assert.ok(Object.isFrozen(v));
  });

  it("reads the revocation list only after the signature and templates verified", () => {
    let calls = 0;
    const revokedIds = (): string[] => {
      calls++;
      return [];
    };
    const options = { agentKeys: [key("bob")], origin: fx.defaults.origin, agent: "ann", audience: "buyer-1",
      kinds: ["pact.outcome"], at: fx.defaults.at, revokedIds };
    throwsCheck(() => verifyToken(fx.tokens["honest"] as string, options), "token.signature");
    assert.equal(calls, 0);
    verifyToken(fx.tokens["honest"] as string, { ...options, agentKeys: [key("ann")] });
    assert.equal(calls, 1);
  });

  it("fails with TokenError and the Python check names", () => {
    const options = { agentKeys: [key("ann")], origin: fx.defaults.origin, agent: "ann", audience: "buyer-1",
      kinds: ["pact.outcome"], at: fx.defaults.at };
    throwsCheck(() => verifyToken("", options), "token.format", TokenError);
    throwsCheck(() => verifyToken("A".repeat(MAX_TOKEN_CHARS + 1), options), "token.format", TokenError);
    throwsCheck(() => verifyToken(fx.tokens["honest"] as string, { ...options, kinds: ["commitment"] }), "token.scope",
      TokenError);
    throwsCheck(() => verifyToken(fx.tokens["honest"] as string, { ...options, audience: "no spaces" }), "token.audience");
    throwsCheck(() => verifyToken(42 as unknown as string, options), "token.format");
  });

  it("defaults to the current time", () => {
    const options = { agentKeys: [key("ann")], origin: fx.defaults.origin, agent: "ann", audience: "buyer-1",
      kinds: ["pact.outcome"] };
    for (const name of ["honest", "expired"]) {
      const text = fx.tokens[name] as string;
      const now = outcome(text, { at: Math.floor(Date.now() / 1000) });
      let implicit: string;
      try {
        implicit = `VERIFIED:${verifyToken(text, options).kinds.join(",")}`;
      } catch (e) {
        implicit = (e as VerificationError).check;
      }
      assert.equal(implicit, now, name);
    }
  });
});

describe("share tokens: base64url as the Rust base64 crate 0.13", () => {
  it("decodes padded, unpadded and partly padded text", () => {
    assert.deepEqual(decodeBase64Url("AAEC"), Uint8Array.of(0, 1, 2));
    assert.deepEqual(decodeBase64Url("AAE"), Uint8Array.of(0, 1));
    assert.deepEqual(decodeBase64Url("AAE="), Uint8Array.of(0, 1));
    assert.deepEqual(decodeBase64Url("AA"), Uint8Array.of(0));
    assert.deepEqual(decodeBase64Url("AA="), Uint8Array.of(0));
    assert.deepEqual(decodeBase64Url("AA=="), Uint8Array.of(0));
    assert.deepEqual(decodeBase64Url("-_-_"), Uint8Array.of(0xfb, 0xff, 0xbf));
    assert.deepEqual(decodeBase64Url(""), new Uint8Array(0));
  });

  it("refuses what the crate refuses", () => {
    for (const bad of ["A", "AAAAA", "AB==", "AAE=A", "A===", "AA===", "+/+/", "AA AA", "AAAA====", "AAAAAAAA=", "AAE==",
      "AAAAAAAAAAAAAAAA=", "AA==AAAA", "é"]) {
      assert.equal(decodeBase64Url(bad), null, bad);
    }
  });
});

describe("share tokens: protobuf as prost 0.10", () => {
  const S = schema("T", [
    [1, { name: "a", type: "uint32" }],
    [2, { name: "b", type: "bytes", required: true }],
    [3, { name: "c", type: "uint32", repeated: true }],
  ]);
  it("reads the last scalar, appends repeated fields packed or not, skips unknown fields", () => {
    const m = decodeMessage(Uint8Array.of(0x08, 0x01, 0x08, 0x02, 0x18, 0x05, 0x1a, 0x02, 0x06, 0x07, 0x28, 0x09), S);
    assert.equal(m["a"], 2);
    assert.deepEqual(m["b"], new Uint8Array(0));
    assert.deepEqual(m["c"], [5, 6, 7]);
  });
  it("truncates uint32 and refuses malformed input", () => {
    assert.equal(decodeMessage(Uint8Array.of(0x08, 0x81, 0x80, 0x80, 0x80, 0x10), S)["a"], 1);
    for (const bad of [[0x08], [0x12, 0x05, 0x00], [0x0a, 0x00], [0x00], [0x0e], [0x0c], [0x12, 0x01]]) {
      assert.throws(() => decodeMessage(Uint8Array.from(bad), S), ProtobufError, String(bad));
    }
  });
});

describe("share tokens: P-256", () => {
  it("derives, compresses and parses keys", () => {
    const one = p256.publicKeyFromSecret(Uint8Array.from({ length: 32 }, (_, i) => (i === 31 ? 1 : 0)));
    assert.ok(one !== null);
    const g = p256.compressPublicKey(one);
    assert.deepEqual(p256.parsePublicKey(g), one);
    assert.equal(p256.publicKeyFromSecret(new Uint8Array(32)), null);
    assert.equal(p256.parsePublicKey(Uint8Array.of(0)), null);
  });
  it("parses DER signatures strictly", () => {
    const sig = (r: number[], s: number[]): Uint8Array =>
      Uint8Array.from([0x30, r.length + s.length + 4, 0x02, r.length, ...r, 0x02, s.length, ...s]);
    assert.deepEqual(p256.parseDerSignature(sig([1], [2])), [1n, 2n]);
    assert.deepEqual(p256.parseDerSignature(sig([0, 0x80], [2])), [0x80n, 2n]);
    assert.equal(p256.parseDerSignature(sig([0, 1], [2])), null);
    assert.equal(p256.parseDerSignature(sig([0x80], [2])), null);
    assert.equal(p256.parseDerSignature(sig([0], [2])), null);
    assert.equal(p256.parseDerSignature(sig([], [2])), null);
  });
});
