/** RFC 8785 canonical JSON and the strict parser against specs/vectors/jcs.json (as
 * tests/unit/test_vectors.py), plus bound and edge-case tests. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { utf8 } from "../src/bytes.js";
import { CanonicalFormError, LimitExceededError, MalformedError } from "../src/errors.js";
import { MAX_DEPTH, canonicalBytes, checkShape, parseCanonical, parseStrict } from "../src/jcs.js";
import { loadVectors, throwsCheck } from "../test-support/helpers.js";

interface JcsVectors {
  valid: { input: string; canonical: string }[];
  invalid: { input: string; check: string }[];
  non_canonical: string[];
}

const v = loadVectors<JcsVectors>("jcs.json");
const LIMIT = { maxBytes: 1 << 16 };
const decode = (b: Uint8Array): string => new TextDecoder().decode(b);
const strict = (text: string, limits: Parameters<typeof parseStrict>[1] = LIMIT) => parseStrict(utf8(text), limits);

describe("jcs: shared vectors", () => {
  it("has cases of every kind", () => {
    assert.ok(v.valid.length >= 7 && v.invalid.length >= 8 && v.non_canonical.length >= 5);
  });
  for (const c of v.valid) {
    it(`canonicalises ${c.input}`, () => {
      assert.equal(decode(canonicalBytes(strict(c.input))), c.canonical);
      parseCanonical(utf8(c.canonical), LIMIT);
    });
  }
  for (const c of v.invalid) {
    it(`rejects ${c.input.slice(0, 30)} (${c.check})`, () => {
      throwsCheck(() => strict(c.input), c.check);
    });
  }
  for (const text of v.non_canonical) {
    it(`rejects the non-canonical ${text}`, () => {
      throwsCheck(() => parseCanonical(utf8(text), LIMIT), "canonical.form", CanonicalFormError);
    });
  }
});

describe("jcs: strict parsing", () => {
  it("accepts exactly Python json's grammar", () => {
    assert.deepEqual(strict(' \t\r\n{"a" : [ 1 , -2 , 0 , true , false , null , "x" ] } \n'), {
      a: [1, -2, 0, true, false, null, "x"],
    });
    assert.equal(strict('"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00E9\\ud83d\\ude00\u007f"'), '"\\/\b\f\n\r\t\u00e9\u{1f600}\u007f');
    assert.equal(Object.is(strict("-0"), 0), true);
    for (const bad of [
      "", " ", "{", "[1,]", '{"a":1,}', "[1 2]", '{"a" 1}', "{1:2}", "{'a':1}", "01", "-", "--1", "+1", "1.", ".5",
      "1e", "1e+", "0x10", "tru", "nul", "Infinity", "-Infinity", "[NaN]", '"\\x"', '"\\u12"', '"\\u12G4"',
      '"a\tb"', '"a\nb"', '"abc', "[]]", "[] x", "\u00a0[]", "[\u3000]", "/* */ 1",
    ]) {
      assert.throws(
        () => strict(bad),
        (e: unknown) => e instanceof MalformedError && e.check === "json.syntax",
        `accepted ${JSON.stringify(bad)}`,
      );
    }
  });

  it("fails a float or big integer where the scanner meets it", () => {
    throwsCheck(() => strict("1.5"), "canonical.float");
    throwsCheck(() => strict("1E-3"), "canonical.float");
    throwsCheck(() => strict("-0.0"), "canonical.float");
    throwsCheck(() => strict("[1.0, x"), "canonical.float"); // before the syntax error after it
    throwsCheck(() => strict("[1, x, 1.0"), "json.syntax");
    throwsCheck(() => strict("[9007199254740992.]"), "canonical.integer"); // "9007199254740992" then "."
    throwsCheck(() => strict("123456789012345678"), "canonical.integer"); // 18 digits
    throwsCheck(() => strict("-9007199254740992"), "canonical.integer");
    throwsCheck(() => strict("9007199254740993"), "canonical.integer"); // rounds to 2^53 as a double
    assert.equal(strict("9007199254740991"), 9007199254740991);
  });

  it("rejects duplicate keys when the object closes", () => {
    throwsCheck(() => strict('{"a":1,"b":{"c":1,"c":2}}'), "json.duplicate_key", MalformedError);
    throwsCheck(() => strict('{"a":1,"a":2,"b":1.5}'), "canonical.float");
    throwsCheck(() => strict('{"a":1,"a":2'), "json.syntax");
    throwsCheck(() => strict('{"a":{"b":1,"b":2},"c":1.5}'), "json.duplicate_key");
    throwsCheck(() => strict('{"\\ud800":1,"\\ud800":2}'), "json.duplicate_key"); // before the surrogate walk
    throwsCheck(() => strict('{"\\u0061":1,"a":2}'), "json.duplicate_key");
  });

  it("keeps __proto__ as an ordinary member", () => {
    const value = strict('{"__proto__":{"x":1},"b":2}') as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(value), Object.prototype);
    assert.deepEqual(Object.keys(value), ["__proto__", "b"]);
    assert.equal(decode(canonicalBytes(value)), '{"__proto__":{"x":1},"b":2}');
    throwsCheck(() => strict('{"__proto__":1,"__proto__":2}'), "json.duplicate_key");
  });

  it("rejects lone surrogates from escapes, in keys and values", () => {
    throwsCheck(() => strict('["\\udc00"]'), "canonical.string", CanonicalFormError);
    throwsCheck(() => strict('{"\\ud83d":1}'), "canonical.string");
    throwsCheck(() => strict('"\\ud83d\\u0041"'), "canonical.string");
    throwsCheck(() => strict('"\\ude00\\ud83d"'), "canonical.string");
    throwsCheck(() => strict('"\\ud83d\u{1f600}"'), "canonical.string");
    assert.equal(strict('"\\ud83d\\ude00"'), "\u{1f600}");
  });

  it("bounds depth like the Python verifier", () => {
    const nest = (n: number, inner = ""): string => "[".repeat(n) + inner + "]".repeat(n);
    assert.equal(checkShape(nest(33)), 33);
    strict(nest(33)); // 33 empty arrays: the innermost is at depth 32
    throwsCheck(() => strict(nest(33, "1")), "canonical.depth", LimitExceededError); // a value at depth 33
    throwsCheck(() => strict(nest(33, '"x"')), "canonical.depth");
    throwsCheck(() => strict(nest(32, '{"k":1}')), "canonical.depth"); // the key and value at depth 33
    strict(nest(32, "1"));
    throwsCheck(() => strict(nest(34)), "canonical.depth"); // the pre-scan
    throwsCheck(() => strict(nest(34, "x")), "canonical.depth"); // the pre-scan comes before syntax
    throwsCheck(() => strict(nest(33, "1.5")), "canonical.float"); // the parse comes before the walk
    throwsCheck(() => strict(nest(33, '"\\ud800"')), "canonical.depth"); // depth first, as the walk
    throwsCheck(() => strict(`["\\ud800",${nest(32, "1")}]`), "canonical.string"); // first in order
    assert.equal(MAX_DEPTH, 32);
  });

  it("bounds size, containers and values before parsing", () => {
    throwsCheck(() => strict("[1,2,3]", { maxBytes: 6 }), "json.size", LimitExceededError);
    strict("[1,2,3]", { maxBytes: 7 });
    throwsCheck(() => strict("[[],[]]", { maxBytes: 100, maxContainers: 2 }), "json.containers");
    strict("[[],[]]", { maxBytes: 100, maxContainers: 3 });
    throwsCheck(() => strict("[1,2,3]", { maxBytes: 100, maxValues: 3 }), "json.values");
    strict("[1,2,3]", { maxBytes: 100, maxValues: 4 });
    // strings are blanked: brackets and commas inside them do not count
    strict('["[,[,{", "\\"[,"]', { maxBytes: 100, maxContainers: 1, maxValues: 3 });
    // an unterminated string is not blanked: its brackets count before the syntax error
    throwsCheck(() => strict('["[[[', { maxBytes: 100, maxContainers: 2 }), "json.containers");
    throwsCheck(() => strict('["a\\"[[[', { maxBytes: 100, maxContainers: 2 }), "json.containers");
    throwsCheck(() => strict(`"${"[".repeat(40)}`), "canonical.depth");
    assert.equal(strict(`"${"[".repeat(40)}"`), "[".repeat(40)); // blanked: just a string
  });

  it("rejects bad bytes", () => {
    throwsCheck(() => parseStrict("{}" as unknown as Uint8Array, LIMIT), "json.type");
    throwsCheck(() => parseStrict(Uint8Array.of(0xef, 0xbb, 0xbf, 0x7b, 0x7d), LIMIT), "json.encoding");
    throwsCheck(() => parseStrict(Uint8Array.of(0x22, 0xc3, 0x22), LIMIT), "json.encoding");
    throwsCheck(() => parseStrict(Uint8Array.of(0x22, 0xed, 0xa0, 0x80, 0x22), LIMIT), "json.encoding");
    throwsCheck(() => parseStrict(Uint8Array.of(0x22, 0xc0, 0xa2, 0x22), LIMIT), "json.encoding");
  });
});

describe("jcs: canonical encoding", () => {
  it("sorts keys by UTF-16 code units and escapes as RFC 8785", () => {
    const value = { "\u{1f600}": 1, "\ufb01": 2, b: [], a: { d: null, c: true }, "\u00e9": "\u2028\u007f\u001f\n\"\\/" };
    assert.equal(
      decode(canonicalBytes(value)),
      '{"a":{"c":true,"d":null},"b":[],"\u00e9":"\u2028\u007f\\u001f\\n\\"\\\\/","\u{1f600}":1,"\ufb01":2}',
    );
    // integer-like keys are sorted as strings, not in JS property order
    assert.equal(decode(canonicalBytes({ "10": 1, "9": 2, a: 3 })), '{"10":1,"9":2,"a":3}');
  });

  it("refuses what has no canonical form", () => {
    throwsCheck(() => canonicalBytes(1.5), "canonical.float", CanonicalFormError);
    throwsCheck(() => canonicalBytes(Number.NaN), "canonical.float");
    throwsCheck(() => canonicalBytes(Infinity), "canonical.float");
    throwsCheck(() => canonicalBytes(2 ** 53), "canonical.integer");
    throwsCheck(() => canonicalBytes(2n ** 53n), "canonical.integer");
    assert.equal(decode(canonicalBytes([-(2 ** 53 - 1), 5n, -0])), "[-9007199254740991,5,0]");
    throwsCheck(() => canonicalBytes("\ud800"), "canonical.string");
    throwsCheck(() => canonicalBytes({ "\udfff": 1 }), "canonical.string");
    throwsCheck(() => canonicalBytes({ [Symbol("s")]: 1 }), "canonical.key");
    throwsCheck(() => canonicalBytes(undefined), "canonical.type");
    throwsCheck(() => canonicalBytes([1, undefined]), "canonical.type");
    throwsCheck(() => canonicalBytes(new Date(0)), "canonical.type");
    throwsCheck(() => canonicalBytes(new Map()), "canonical.type");
    throwsCheck(() => canonicalBytes(() => 1), "canonical.type");
    let deep: unknown = 1;
    for (let i = 0; i < 32; i++) deep = [deep];
    canonicalBytes(deep); // the scalar at depth 32
    throwsCheck(() => canonicalBytes([deep]), "canonical.depth", LimitExceededError);
  });
});
