/**
 * C2SP signed notes, verifier keys and tlog checkpoints, parsed strictly.
 * Port of verifier/note.py: same grammar, same bounds, same check names.
 *
 * Trust role: a checkpoint is the only source of a tree size and root that a verifier
 * accepts. This module turns checkpoint bytes plus a trusted verifier key into a
 * {@link VerifiedCheckpoint}, or throws a {@link VerificationError}.
 *
 * Formats (specs/checkpoint.md, following c2sp.org/signed-note@v1 and
 * c2sp.org/tlog-checkpoint@v1):
 *
 * - note = text (ends in `\n`) + `\n` + one or more lines `— <name> <base64>\n`; the split
 *   is at the last blank line; valid UTF-8; no control characters but newline.
 * - signature bytes = 4-byte big-endian key id || Ed25519 signature over the note text.
 * - Ed25519 key id = SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4].
 * - verifier key = `<name>+<8 lowercase hex key id>+<base64(0x01 || public key)>`.
 * - checkpoint text = origin, tree size (canonical decimal), base64 root; Engram checkpoints
 *   carry no extension lines, and this parser rejects them.
 *
 * Strictness beyond the spec's minimum: base64 must be canonical (the one encoding of its
 * bytes), decimal sizes have no sign, spaces or leading zeros, the note is bounded in bytes
 * and in signatures, and a known key whose signature fails rejects the whole note (C2SP:
 * SHOULD). Signatures from unknown keys are ignored, so witnesses' cosignatures and rotated
 * log keys do not break verification.
 */

import { sha256 } from "@noble/hashes/sha2.js";

import {
  base64DecodeLoose,
  base64Encode,
  concatBytes,
  constantTimeEqual,
  decodeUtf8Strict,
  hasLoneSurrogate,
  toHex,
  utf8,
} from "./bytes.js";
import { checkPublicKey, publicKeyFromSeed, signWithSeed, verifySignature } from "./ed25519.js";
import {
  LimitExceededError,
  MalformedError,
  OriginMismatchError,
  SignatureError,
  UnknownKeyError,
} from "./errors.js";
import { HASH_SIZE, MAX_TREE_SIZE } from "./merkle.js";

export const ALG_ED25519 = 0x01;
export const MAX_NOTE_BYTES = 64 * 1024;
/** C2SP: verifiers MUST accept at least 16 signatures; Go's note package caps at 100. */
export const MAX_SIGNATURES = 100;
const SIG_PREFIX = "\u2014 "; // em dash, space
const DECIMAL = /^(?:0|[1-9][0-9]{0,18})$/;
/** Python's `\s` on str (str.isspace: \t..\r, \x1c..\x1f, space, \x85, the Unicode Zs
 * spaces, U+2028/9) plus the explicit additions of verifier/note.py (U+FEFF). */
const UNICODE_SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]/;
/** C0 controls but newline, and DEL. */
const CONTROL = /[\x00-\x09\x0b-\x1f\x7f]/;

/** Standard base64 (RFC 4648 §4) text of `data`: the one encoding of bytes in JSON on
 * every surface (hashes are lowercase hex; see specs/http-api.md). */
export function b64encode(data: Uint8Array): string {
  return base64Encode(data);
}

/** Decode standard base64 (RFC 4648 §4) that is exactly the canonical encoding of its
 * bytes (padded, alphabet only, unused bits zero); anything else throws `check`. */
export function b64decodeStrict(text: string, check: string): Uint8Array {
  const raw = base64DecodeLoose(text);
  if (raw === null) {
    throw new MalformedError(`invalid base64: ${JSON.stringify(text.slice(0, 40))}`, { check });
  }
  if (base64Encode(raw) !== text) {
    throw new MalformedError(`non-canonical base64: ${JSON.stringify(text.slice(0, 40))}`, { check });
  }
  return raw;
}

/** Parse a canonical non-negative ASCII decimal (no sign, spaces or leading zeros). */
export function parseDecimal(text: string, check: string, maximum: bigint = MAX_TREE_SIZE): bigint {
  if (!DECIMAL.test(text)) {
    throw new MalformedError(`not a canonical decimal: ${JSON.stringify(text.slice(0, 40))}`, { check });
  }
  const value = BigInt(text);
  if (value > maximum) throw new MalformedError(`${value} exceeds ${maximum}`, { check });
  return value;
}

/** Whether `text` is valid Unicode text (a JS string may hold lone surrogates, which
 * UTF-8 cannot encode). */
export function encodesAsUtf8(text: string): boolean {
  return !hasLoneSurrogate(text);
}

/** Number of code points, counting a lone surrogate as one (Python's `len` of a str). */
function codePointLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

function checkKeyName(name: string, check: string): void {
  if (!name || name.includes("+") || UNICODE_SPACE.test(name) || !encodesAsUtf8(name)) {
    throw new MalformedError(
      `key name ${JSON.stringify(name.slice(0, 60))} must be non-empty UTF-8 text, without spaces or '+'`,
      { check },
    );
  }
}

/** A log origin: 1-255 printable ASCII characters, no spaces and no '+' (it is also the
 * checkpoint key's name, and key names may contain neither). */
export function checkOrigin(origin: unknown): string {
  if (
    typeof origin !== "string" ||
    !(origin.length > 0 && origin.length <= 255) ||
    !/^[\x21-\x7e]*$/.test(origin) ||
    origin.includes("+")
  ) {
    throw new MalformedError(
      `origin ${JSON.stringify(String(origin).slice(0, 80))} must be 1-255 printable ASCII characters without spaces or '+'`,
      { check: "origin.format" },
    );
  }
  return origin;
}

/** C2SP signed-note key id for an Ed25519 key: SHA-256(name || 0x0A || 0x01 || pk)[:4]. */
export function ed25519KeyId(name: string, publicKey: Uint8Array): Uint8Array {
  if (!encodesAsUtf8(name)) throw new TypeError("key name holds a lone surrogate");
  return sha256(concatBytes(utf8(name), Uint8Array.of(0x0a, ALG_ED25519), publicKey)).slice(0, 4);
}

/** `name+hex8(keyid)+base64(0x01 || public key)` (c2sp.org/signed-note, vkey). */
export function formatVerifierKey(name: string, publicKey: Uint8Array): string {
  const keyId = ed25519KeyId(name, publicKey);
  return `${name}+${toHex(keyId)}+${base64Encode(concatBytes(Uint8Array.of(ALG_ED25519), publicKey))}`;
}

/** A trusted Ed25519 note verifier key (name, key id, public key). Only built by
 * {@link VerifierKey.parse} and {@link VerifierKey.fromPublicKey}, which check it. */
export class VerifierKey {
  private constructor(
    readonly name: string,
    readonly keyId: Uint8Array,
    readonly publicKey: Uint8Array,
  ) {
    Object.freeze(this);
  }

  /** Parse `<name>+<hex8 key id>+<base64(0x01 || pubkey)>`; the key id must match. */
  static parse(vkey: string): VerifierKey {
    // Python bounds len(vkey) in code points; more than 2048 code units is always more
    // than 1024 code points, so only short strings are counted.
    if (typeof vkey !== "string" || vkey.length > 2048 || codePointLength(vkey) > 1024) {
      throw new MalformedError("verifier key must be a short string", { check: "vkey.format" });
    }
    // name and key id contain no '+'; the base64 key after them may (Python's split("+", 2)).
    const first = vkey.indexOf("+");
    const second = first < 0 ? -1 : vkey.indexOf("+", first + 1);
    if (second < 0) {
      throw new MalformedError("verifier key must be name+keyid+key", { check: "vkey.format" });
    }
    const name = vkey.slice(0, first);
    const hexId = vkey.slice(first + 1, second);
    const b64 = vkey.slice(second + 1);
    checkKeyName(name, "vkey.name");
    if (!/^[0-9a-f]{8}$/.test(hexId)) {
      throw new MalformedError("key id must be 8 lowercase hex digits", { check: "vkey.key_id" });
    }
    const raw = b64decodeStrict(b64, "vkey.key");
    if (raw.length !== 33 || raw[0] !== ALG_ED25519) {
      throw new MalformedError("only Ed25519 verifier keys (type 0x01, 32 bytes) are supported", {
        check: "vkey.alg",
      });
    }
    const publicKey = checkPublicKey(raw.slice(1));
    const keyId = Uint8Array.from(hexId.match(/../g) as string[], (h) => parseInt(h, 16));
    if (!constantTimeEqual(keyId, ed25519KeyId(name, publicKey))) {
      throw new MalformedError("key id does not match name and public key", { check: "vkey.key_id" });
    }
    return new VerifierKey(name, keyId, publicKey);
  }

  /** Build the verifier key of an Ed25519 public key under `name`. */
  static fromPublicKey(name: string, publicKey: Uint8Array): VerifierKey {
    checkKeyName(name, "vkey.name");
    checkPublicKey(publicKey);
    const pk = publicKey.slice();
    return new VerifierKey(name, ed25519KeyId(name, pk), pk);
  }

  toString(): string {
    return formatVerifierKey(this.name, this.publicKey);
  }
}

/** One signature line: key name, 4-byte key id, signature bytes. */
export interface NoteSignature {
  readonly name: string;
  readonly keyId: Uint8Array;
  readonly signature: Uint8Array;
}

/** A syntactically valid signed note; nothing about it is trusted yet. */
export class SignedNote {
  private constructor(
    readonly text: string,
    readonly signatures: readonly NoteSignature[],
  ) {
    Object.freeze(this);
  }

  /** Parse note bytes strictly (see the module doc). Throws MalformedError. */
  static parse(data: Uint8Array): SignedNote {
    if (!(data instanceof Uint8Array)) {
      throw new MalformedError("note must be bytes", { check: "note.type" });
    }
    if (data.length > MAX_NOTE_BYTES) {
      throw new LimitExceededError(`note of ${data.length} bytes exceeds ${MAX_NOTE_BYTES}`, {
        check: "note.size",
      });
    }
    const msg = decodeUtf8Strict(data);
    if (msg === null) throw new MalformedError("note is not valid UTF-8", { check: "note.encoding" });
    if (CONTROL.test(msg)) throw new MalformedError("note contains control characters", { check: "note.encoding" });
    if (!msg.endsWith("\n")) {
      throw new MalformedError("note does not end with a newline", { check: "note.format" });
    }
    const split = msg.lastIndexOf("\n\n");
    if (split < 0) {
      throw new MalformedError("note has no blank line before signatures", { check: "note.format" });
    }
    const text = msg.slice(0, split + 1);
    const sigBlock = msg.slice(split + 2);
    let lines = sigBlock.split("\n");
    if (lines[lines.length - 1] !== "") {
      throw new MalformedError("signature block must end with a newline", { check: "note.format" });
    }
    lines = lines.slice(0, -1);
    if (lines.length === 0) throw new MalformedError("note has no signatures", { check: "note.signatures" });
    if (lines.length > MAX_SIGNATURES) {
      throw new LimitExceededError(`note has ${lines.length} signatures, more than ${MAX_SIGNATURES}`, {
        check: "note.signatures",
      });
    }
    const sigs: NoteSignature[] = [];
    for (const line of lines) {
      if (!line.startsWith(SIG_PREFIX)) {
        throw new MalformedError("signature line must start with '\u2014 '", { check: "note.signature_line" });
      }
      const fields = line.slice(SIG_PREFIX.length).split(" ");
      if (fields.length !== 2) {
        throw new MalformedError("signature line must be '\u2014 <name> <base64>'", {
          check: "note.signature_line",
        });
      }
      const [name, b64] = fields as [string, string];
      checkKeyName(name, "note.signature_line");
      const raw = b64decodeStrict(b64, "note.signature_line");
      if (raw.length < 5) {
        throw new MalformedError("signature is shorter than 5 bytes", { check: "note.signature_line" });
      }
      sigs.push(Object.freeze({ name, keyId: raw.slice(0, 4), signature: raw.slice(4) }));
    }
    return new SignedNote(text, Object.freeze(sigs));
  }

  /**
   * Verify against trusted keys; return the keys whose signatures verified.
   *
   * Signatures whose (name, key id) pair matches no trusted key are ignored. A matching
   * signature that fails throws {@link SignatureError} `note.signature` (the note is
   * rejected whole). No verified signature at all throws {@link UnknownKeyError}
   * `note.trusted_signature`.
   */
  verify(keys: Iterable<VerifierKey>): VerifierKey[] {
    // Names hold no '+' and hex no '+', so "name+hex" identifies the (name, key id) pair.
    const trusted = new Map<string, VerifierKey>();
    for (const k of keys) trusted.set(`${k.name}+${toHex(k.keyId)}`, k);
    const verified: VerifierKey[] = [];
    const message = utf8(this.text);
    for (const sig of this.signatures) {
      const key = trusted.get(`${sig.name}+${toHex(sig.keyId)}`);
      if (key === undefined) continue;
      if (!verifySignature(sig.signature, message, key.publicKey)) {
        throw new SignatureError(`signature by ${key.name} does not verify`, { check: "note.signature" });
      }
      if (!verified.includes(key)) verified.push(key);
    }
    if (verified.length === 0) {
      throw new UnknownKeyError("no signature by a trusted key", { check: "note.trusted_signature" });
    }
    return verified;
  }
}

/** Sign note `text` (must end in one newline and hold no blank line) with a 32-byte
 * Ed25519 seed under `name`; returns the note bytes. For tests and tools: a verifier
 * never signs. */
export function signNote(text: string, name: string, seed: Uint8Array): Uint8Array {
  if (!text.endsWith("\n") || text.includes("\n\n")) {
    throw new RangeError("note text must end in one newline and hold no blank lines");
  }
  checkKeyName(name, "note.signature_line");
  const publicKey = publicKeyFromSeed(seed);
  const sig = signWithSeed(utf8(text), seed);
  const blob = base64Encode(concatBytes(ed25519KeyId(name, publicKey), sig));
  return utf8(`${text}\n${SIG_PREFIX}${name} ${blob}\n`);
}

/** The three lines of a tlog checkpoint: origin, tree size, root hash. */
export class Checkpoint {
  constructor(
    readonly origin: string,
    readonly size: bigint,
    readonly root: Uint8Array,
  ) {
    Object.freeze(this);
  }

  /** Parse checkpoint note text (no extension lines allowed). */
  static parseText(text: string): Checkpoint {
    const lines = text.split("\n");
    if (lines[lines.length - 1] !== "" || lines.length < 4) {
      throw new MalformedError("checkpoint needs origin, size and root lines", { check: "checkpoint.format" });
    }
    const body = lines.slice(0, -1);
    if (body.length !== 3) {
      throw new MalformedError("checkpoint has extension lines; Engram checkpoints carry none", {
        check: "checkpoint.extensions",
      });
    }
    const [origin, sizeText, rootText] = body as [string, string, string];
    if (!origin) throw new MalformedError("checkpoint origin is empty", { check: "checkpoint.origin" });
    const size = parseDecimal(sizeText, "checkpoint.size");
    const root = b64decodeStrict(rootText, "checkpoint.root");
    if (root.length !== HASH_SIZE) {
      throw new MalformedError("checkpoint root is not 32 bytes", { check: "checkpoint.root" });
    }
    return new Checkpoint(origin, size, root);
  }

  text(): string {
    return checkpointText(this.origin, this.size, this.root);
  }
}

/** The note text of a checkpoint: three newline-terminated lines. */
export function checkpointText(origin: string, size: bigint | number, root: Uint8Array): string {
  return `${origin}\n${BigInt(size)}\n${base64Encode(root)}\n`;
}

/** A checkpoint whose log signature verified under a trusted key. */
export interface VerifiedCheckpoint {
  readonly origin: string;
  readonly size: bigint;
  readonly root: Uint8Array;
  readonly note: Uint8Array;
  readonly signedBy: readonly VerifierKey[];
}

/**
 * Verify a checkpoint note against the log's verifier key.
 *
 * Steps:
 *
 * 1. `note.*`: the note parses strictly.
 * 2. `checkpoint.*`: its text is origin / canonical size / 32-byte base64 root, no extensions.
 * 3. `checkpoint.origin`: the origin equals the log key's name (and `origin` if given).
 * 4. `note.signature` / `note.trusted_signature`: the log key's signature verifies.
 */
export function verifyCheckpoint(data: Uint8Array, logKey: VerifierKey, origin?: string): VerifiedCheckpoint {
  const note = SignedNote.parse(data);
  const cp = Checkpoint.parseText(note.text);
  if (cp.origin !== logKey.name) {
    throw new OriginMismatchError(
      `checkpoint origin ${JSON.stringify(cp.origin)} is not the log key's name ${JSON.stringify(logKey.name)}`,
      { check: "checkpoint.origin" },
    );
  }
  if (origin !== undefined && cp.origin !== origin) {
    throw new OriginMismatchError(
      `checkpoint origin ${JSON.stringify(cp.origin)} is not the expected ${JSON.stringify(origin)}`,
      { check: "checkpoint.origin" },
    );
  }
  const signedBy = note.verify([logKey]);
  return Object.freeze({ origin: cp.origin, size: cp.size, root: cp.root, note: data.slice(), signedBy });
}
