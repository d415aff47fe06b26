/** C2SP signed notes and checkpoints against specs/vectors/checkpoint.json (as
 * tests/unit/test_vectors.py), plus grammar, key and tamper tests. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as ed from "@noble/ed25519";

import { base64Encode, concatBytes, fromHex, toHex, utf8 } from "../src/bytes.js";
import { checkPublicKey, verifySignature } from "../src/ed25519.js";
import { MalformedError, OriginMismatchError, SignatureError, UnknownKeyError } from "../src/errors.js";
import { MAX_TREE_SIZE } from "../src/merkle.js";
import {
  Checkpoint,
  SignedNote,
  VerifierKey,
  b64decodeStrict,
  checkOrigin,
  checkpointText,
  ed25519KeyId,
  formatVerifierKey,
  parseDecimal,
  signNote,
  verifyCheckpoint,
} from "../src/note.js";
import { loadVectors, throwsCheck } from "../test-support/helpers.js";

interface CheckpointVectors {
  external: { vkey: string; note: string }[];
  log_seed_hex: string;
  log_vkey: string;
  checkpoints: { origin: string; size: number; root: string; note: string }[];
  invalid_checkpoints: { why: string; text: string; check: string }[];
}

const v = loadVectors<CheckpointVectors>("checkpoint.json");
const logKey = VerifierKey.parse(v.log_vkey);
const logSeed = fromHex(v.log_seed_hex);
const ORIGIN = logKey.name;
const cp5 = v.checkpoints[0] as CheckpointVectors["checkpoints"][number];
const otherSeed = new Uint8Array(32).fill(7);
const EM = "\u2014";

/** The note text with its signature lines replaced by `lines`. */
function withSignatureLines(note: string, lines: string[]): string {
  const split = note.lastIndexOf("\n\n");
  return note.slice(0, split + 2) + lines.map((l) => l + "\n").join("");
}

/** The one signature line of a note, its name and its decoded bytes. */
function signatureOf(note: string): { name: string; raw: Uint8Array } {
  const line = note.slice(note.lastIndexOf("\n\n") + 2, -1);
  const [name, b64] = line.slice(2).split(" ") as [string, string];
  return { name, raw: b64decodeStrict(b64, "test") };
}

describe("signed notes: shared vectors", () => {
  it("has cases of every kind", () => {
    assert.ok(v.external.length >= 2 && v.checkpoints.length >= 2 && v.invalid_checkpoints.length >= 5);
  });
  for (const c of v.external) {
    it(`verifies the C2SP example note of ${c.vkey.split("+")[0]}`, () => {
      const key = VerifierKey.parse(c.vkey);
      assert.deepEqual(SignedNote.parse(utf8(c.note)).verify([key]), [key]);
      assert.equal(key.toString(), c.vkey);
    });
  }

  it("derives the log key from the vector seed", () => {
    assert.equal(toHex(ed.getPublicKey(logSeed)), toHex(logKey.publicKey));
    assert.equal(VerifierKey.fromPublicKey(ORIGIN, ed.getPublicKey(logSeed)).toString(), v.log_vkey);
    assert.equal(formatVerifierKey(ORIGIN, logKey.publicKey), v.log_vkey);
  });

  for (const c of v.checkpoints) {
    it(`verifies the Engram checkpoint of size ${c.size}`, () => {
      const cp = verifyCheckpoint(utf8(c.note), logKey);
      assert.equal(cp.origin, c.origin);
      assert.equal(cp.size, BigInt(c.size));
      assert.equal(toHex(cp.root), c.root);
      assert.deepEqual(cp.signedBy, [logKey]);
      verifyCheckpoint(utf8(c.note), logKey, c.origin);
      // re-signing the same text with the same seed gives the same note (Ed25519 is deterministic)
      assert.equal(new TextDecoder().decode(signNote(checkpointText(c.origin, c.size, fromHex(c.root)), ORIGIN, logSeed)), c.note);
    });
  }

  for (const c of v.invalid_checkpoints) {
    it(`rejects checkpoint text: ${c.why} (${c.check})`, () => {
      throwsCheck(() => Checkpoint.parseText(c.text), c.check, MalformedError);
      // and the same text, signed by the log key, fails verification the same way
      throwsCheck(() => verifyCheckpoint(signNote(c.text, ORIGIN, logSeed), logKey), c.check);
    });
  }
});

describe("signed notes: tampering and trust", () => {
  it("rejects a flipped bit in the signature", () => {
    const { name, raw } = signatureOf(cp5.note);
    for (const byte of [4, 35, 67]) {
      const bad = raw.slice();
      bad[byte] = (bad[byte] as number) ^ 1;
      const note = withSignatureLines(cp5.note, [`${EM} ${name} ${base64Encode(bad)}`]);
      throwsCheck(() => verifyCheckpoint(utf8(note), logKey), "note.signature", SignatureError);
    }
  });

  it("rejects a changed size or root under the old signature", () => {
    throwsCheck(() => verifyCheckpoint(utf8(cp5.note.replace("\n5\n", "\n6\n")), logKey), "note.signature");
    const root = cp5.note.split("\n")[2] as string;
    const other = base64Encode(fromHex("00".repeat(32)));
    throwsCheck(() => verifyCheckpoint(utf8(cp5.note.replace(root, other)), logKey), "note.signature");
  });

  it("ignores signatures by unknown keys, and needs one trusted signature", () => {
    const { name, raw } = signatureOf(cp5.note);
    const good = `${EM} ${name} ${base64Encode(raw)}`;
    const witness = signatureOf(
      new TextDecoder().decode(signNote(checkpointText(ORIGIN, 5, fromHex(cp5.root)), "witness.example", otherSeed)),
    );
    const cosig = `${EM} ${witness.name} ${base64Encode(witness.raw)}`;
    // a witness cosignature before or after the log's does not matter
    for (const lines of [[cosig, good], [good, cosig]]) {
      assert.equal(verifyCheckpoint(utf8(withSignatureLines(cp5.note, lines)), logKey).size, 5n);
    }
    // an unknown key id under the log's name is another key: ignored, so no trusted signature
    const otherId = raw.slice();
    otherId[0] = (otherId[0] as number) ^ 0x80;
    const unknownId = `${EM} ${name} ${base64Encode(otherId)}`;
    throwsCheck(() => verifyCheckpoint(utf8(withSignatureLines(cp5.note, [unknownId])), logKey), "note.trusted_signature", UnknownKeyError);
    throwsCheck(() => verifyCheckpoint(utf8(withSignatureLines(cp5.note, [cosig])), logKey), "note.trusted_signature");
    // a known key's bad signature rejects the note even beside a good one
    const badSig = raw.slice();
    badSig[10] = (badSig[10] as number) ^ 1;
    const bad = `${EM} ${name} ${base64Encode(badSig)}`;
    throwsCheck(() => verifyCheckpoint(utf8(withSignatureLines(cp5.note, [good, bad])), logKey), "note.signature");
    // a known key's signature of the wrong length is a bad signature, not a grammar error
    const short = `${EM} ${name} ${base64Encode(raw.slice(0, 20))}`;
    throwsCheck(() => verifyCheckpoint(utf8(withSignatureLines(cp5.note, [short])), logKey), "note.signature");
    // verify() reports each trusted key once
    const twice = SignedNote.parse(utf8(withSignatureLines(cp5.note, [good, good])));
    assert.deepEqual(twice.verify([logKey]), [logKey]);
  });

  it("checks the origin against the key name and the expected origin", () => {
    const otherName = VerifierKey.fromPublicKey("example.com/other", logKey.publicKey);
    const text = checkpointText("example.com/other", 5, fromHex(cp5.root));
    throwsCheck(() => verifyCheckpoint(utf8(cp5.note), otherName), "checkpoint.origin", OriginMismatchError);
    throwsCheck(() => verifyCheckpoint(utf8(cp5.note), logKey, "example.com/other"), "checkpoint.origin");
    throwsCheck(() => verifyCheckpoint(signNote(text, "example.com/other", logSeed), logKey), "checkpoint.origin");
  });

  it("rejects extension lines even when signed", () => {
    const text = `${ORIGIN}\n5\n${base64Encode(fromHex(cp5.root))}\nTimestamp: 1\n`;
    throwsCheck(() => verifyCheckpoint(signNote(text, ORIGIN, logSeed), logKey), "checkpoint.extensions");
  });

  it("accepts only the signature OpenSSL accepts: cofactorless, S < L", () => {
    // A signature whose R carries a small-order component: cofactored verification (the
    // library's strict mode) accepts it, OpenSSL and the Python verifier do not.
    const message = utf8(checkpointText(ORIGIN, 5, fromHex(cp5.root)));
    const L = 2n ** 252n + 27742317777372353535851937790883648493n;
    const { scalar } = ed.utils.getExtendedPublicKey(logSeed);
    const le = (n: bigint): Uint8Array => Uint8Array.from({ length: 32 }, (_, i) => Number((n >> BigInt(8 * i)) & 0xffn));
    const fromLe = (b: Uint8Array): bigint => b.reduce((acc, x, i) => acc | (BigInt(x) << BigInt(8 * i)), 0n);
    const r = 123456789n;
    const order2 = ed.Point.fromBytes(fromHex("ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")); // (0, -1)
    const rPoint = ed.Point.BASE.multiply(r).add(order2).toBytes();
    const k = fromLe(ed.hash(concatBytes(rPoint, logKey.publicKey, message))) % L;
    const sig = concatBytes(rPoint, le((r + k * scalar) % L));
    assert.equal(ed.verify(sig, message, logKey.publicKey, { zip215: false }), true);
    assert.equal(verifySignature(sig, message, logKey.publicKey), false);
    // S + L: the same equation, an unreduced scalar
    const good = ed.sign(message, logSeed);
    assert.equal(verifySignature(good, message, logKey.publicKey), true);
    const s = fromLe(good.slice(32));
    assert.equal(verifySignature(concatBytes(good.slice(0, 32), le(s + L)), message, logKey.publicKey), false);
    const note = (raw: Uint8Array): Uint8Array =>
      utf8(new TextDecoder().decode(message) + `\n${EM} ${ORIGIN} ${base64Encode(concatBytes(logKey.keyId, raw))}\n`);
    assert.equal(verifyCheckpoint(note(good), logKey).size, 5n);
    throwsCheck(() => verifyCheckpoint(note(sig), logKey), "note.signature");
  });
});

describe("signed notes: grammar", () => {
  const good = cp5.note;
  const reject = (note: string | Uint8Array, check: string): void =>
    throwsCheck(() => SignedNote.parse(typeof note === "string" ? utf8(note) : note), check);

  it("parses the vector note", () => {
    const n = SignedNote.parse(utf8(good));
    assert.equal(n.text, good.slice(0, good.lastIndexOf("\n\n") + 1));
    assert.equal(n.signatures.length, 1);
    assert.equal(toHex(n.signatures[0]?.keyId ?? new Uint8Array()), toHex(logKey.keyId));
  });

  it("rejects malformed notes with the Python verifier's checks", () => {
    throwsCheck(() => SignedNote.parse(good as unknown as Uint8Array), "note.type");
    reject(new Uint8Array(64 * 1024 + 1).fill(0x41), "note.size");
    reject(concatBytes(utf8(good.slice(0, 5)), Uint8Array.of(0xc3, 0x28), utf8(good.slice(5))), "note.encoding");
    reject(concatBytes(utf8(good.slice(0, 5)), Uint8Array.of(0xed, 0xa0, 0x80), utf8(good.slice(5))), "note.encoding");
    reject(good.replace("\n5\n", "\n5\t\n"), "note.encoding");
    reject(good.replace("\n5\n", "\n5\r\n"), "note.encoding");
    reject(good.replace("\n5\n", "\n5\x7f\n"), "note.encoding");
    reject(good.slice(0, -1), "note.format");
    reject(good.replace("\n\n", "\n"), "note.format");
    reject(withSignatureLines(good, []), "note.signatures");
    const line = good.slice(good.lastIndexOf("\n\n") + 2, -1);
    reject(withSignatureLines(good, Array(101).fill(line)), "note.signatures");
    assert.equal(SignedNote.parse(utf8(withSignatureLines(good, Array(100).fill(line)))).signatures.length, 100);
    reject(withSignatureLines(good, [line.replace(EM, "-")]), "note.signature_line");
    reject(withSignatureLines(good, [line + " extra"]), "note.signature_line");
    reject(withSignatureLines(good, [line.replace(`${EM} `, `${EM}  `)]), "note.signature_line");
    reject(withSignatureLines(good, [line.replace(ORIGIN, "a+b")]), "note.signature_line");
    reject(withSignatureLines(good, [line.replace(ORIGIN, "a\u00a0b")]), "note.signature_line");
    reject(withSignatureLines(good, [line.replace(ORIGIN, "a\u3000b")]), "note.signature_line");
    reject(withSignatureLines(good, [line.replace(ORIGIN, "a\u0085b")]), "note.signature_line");
    reject(withSignatureLines(good, [line.replace(ORIGIN, "a\ufeffb")]), "note.signature_line");
    reject(withSignatureLines(good, [line.slice(0, -1)]), "note.signature_line"); // base64 padding cut
    reject(withSignatureLines(good, [`${EM} ${ORIGIN} AAAAAA==`]), "note.signature_line"); // 4 bytes
    reject(withSignatureLines(good, [`${EM} ${ORIGIN} AAAAAAB=`]), "note.signature_line"); // non-canonical
    // five bytes is a signature line (an unknown key's, here)
    assert.equal(SignedNote.parse(utf8(withSignatureLines(good, [`${EM} ${ORIGIN} AAAAAAA=`]))).signatures.length, 1);
  });

  it("splits at the last blank line", () => {
    // the text may not hold a blank line: the split would leave a text line among signatures
    reject(good.replace(`${ORIGIN}\n`, `${ORIGIN}\n\n`).replace("\n\n" + EM, "\n" + EM), "note.signature_line");
  });
});

describe("verifier keys", () => {
  const pk = logKey.publicKey;
  const vkey = (name: string, key: Uint8Array, alg = 1): string =>
    `${name}+${toHex(ed25519KeyId(name, key))}+${base64Encode(concatBytes(Uint8Array.of(alg), key))}`;

  it("parses and prints the vector keys", () => {
    assert.equal(VerifierKey.parse(v.log_vkey).toString(), v.log_vkey);
    assert.equal(toHex(logKey.keyId), v.log_vkey.split("+")[1]);
  });

  it("rejects malformed keys with the Python verifier's checks", () => {
    throwsCheck(() => VerifierKey.parse("nokey"), "vkey.format");
    throwsCheck(() => VerifierKey.parse("a+b"), "vkey.format");
    throwsCheck(() => VerifierKey.parse(`${"a".repeat(1000)}+${"b".repeat(30)}`), "vkey.format");
    throwsCheck(() => VerifierKey.parse(5 as unknown as string), "vkey.format");
    throwsCheck(() => VerifierKey.parse(v.log_vkey.replace(ORIGIN, "")), "vkey.name");
    throwsCheck(() => VerifierKey.parse(v.log_vkey.replace(ORIGIN, "a b")), "vkey.name");
    throwsCheck(() => VerifierKey.parse(v.log_vkey.replace(ORIGIN, "a\ud800")), "vkey.name");
    throwsCheck(() => VerifierKey.parse(v.log_vkey.replace("de25785a", "DE25785A")), "vkey.key_id");
    throwsCheck(() => VerifierKey.parse(v.log_vkey.replace("de25785a", "de25785b")), "vkey.key_id");
    throwsCheck(() => VerifierKey.parse(v.log_vkey.replace(ORIGIN, "example.com/other")), "vkey.key_id");
    throwsCheck(() => VerifierKey.parse(v.log_vkey.slice(0, -1)), "vkey.key");
    throwsCheck(() => VerifierKey.parse(vkey("k", pk, 2)), "vkey.alg");
    throwsCheck(() => VerifierKey.parse(`k+00000000+${base64Encode(concatBytes(Uint8Array.of(1), pk, Uint8Array.of(0)))}`), "vkey.alg");
    // the base64 key may hold '+' (the vector key's does): only the first two '+' separate fields
    assert.ok(v.log_vkey.split("+").length > 3);
    assert.equal(VerifierKey.parse(v.log_vkey).name, ORIGIN);
  });

  it("rejects small-order and non-canonical public keys", () => {
    const identity = fromHex("01" + "00".repeat(31));
    throwsCheck(() => VerifierKey.parse(vkey("k", identity)), "key.small_order");
    throwsCheck(() => VerifierKey.fromPublicKey("k", identity), "key.small_order");
    // (0, -1), order 2; and an order-8 point
    throwsCheck(() => checkPublicKey(fromHex("ec" + "ff".repeat(30) + "7f")), "key.small_order");
    throwsCheck(
      () => checkPublicKey(fromHex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")),
      "key.small_order",
    );
    // y = p (non-canonical encoding of y = 0), and x = 0 with the sign bit set
    throwsCheck(() => checkPublicKey(fromHex("ed" + "ff".repeat(30) + "7f")), "key.encoding");
    throwsCheck(() => checkPublicKey(fromHex("01" + "00".repeat(30) + "80")), "key.encoding");
    // y = 2 is not on the curve
    throwsCheck(() => checkPublicKey(fromHex("02" + "00".repeat(31))), "key.encoding");
    throwsCheck(() => checkPublicKey(pk.slice(1)), "key.encoding");
    assert.equal(checkPublicKey(pk), pk);
  });
});

describe("checkpoint fields", () => {
  it("parses canonical decimals up to 2^63-1", () => {
    assert.equal(parseDecimal("0", "t"), 0n);
    assert.equal(parseDecimal("9223372036854775807", "t"), MAX_TREE_SIZE);
    for (const bad of ["9223372036854775808", "99999999999999999999", "00", "01", "+1", "-1", " 1", "1 ", "", "1e3", "\u0661"]) {
      throwsCheck(() => parseDecimal(bad, "t.size"), "t.size");
    }
  });

  it("accepts only canonical base64", () => {
    assert.equal(b64decodeStrict("", "t").length, 0);
    assert.equal(toHex(b64decodeStrict("QQ==", "t")), "41");
    for (const bad of ["QR==", "QQ", "QQ=", "Q", "QUJD\n", "QUJ D", "QUJ-", "Q===", "====", "QQ==QQ==", "\u00e9AAA"]) {
      throwsCheck(() => b64decodeStrict(bad, "t.b64"), "t.b64");
    }
  });

  it("checks origins", () => {
    assert.equal(checkOrigin("example.com/log"), "example.com/log");
    for (const bad of ["", "a b", "a+b", "caf\u00e9", "x".repeat(256), 5]) {
      throwsCheck(() => checkOrigin(bad), "origin.format");
    }
  });

  it("rejects an empty origin and a short text", () => {
    throwsCheck(() => Checkpoint.parseText(`\n5\n${base64Encode(new Uint8Array(32))}\n`), "checkpoint.origin");
    throwsCheck(() => Checkpoint.parseText(`${ORIGIN}\n5\n`), "checkpoint.format");
    throwsCheck(() => Checkpoint.parseText(`${ORIGIN}\n5\n${base64Encode(new Uint8Array(32))}`), "checkpoint.format");
  });
});
