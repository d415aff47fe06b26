/**
 * Witness cosignatures (c2sp.org/tlog-cosignature v1), witness policies (c2sp.org/tlog-policy)
 * and the add-checkpoint wire format (c2sp.org/tlog-witness). Port of verifier/witness.py
 * (specs/witness.md): the same formats, bounds and check names.
 *
 * Trust role: one log key can sign two different trees of the same size and show each to a
 * different party (a split view). A witness keeps, per log, the newest checkpoint it checked
 * and cosigns a new one only if it is consistent with that; a verifier that requires a quorum
 * of independent witnesses' cosignatures therefore accepts only checkpoints that the rest of
 * the world was shown too.
 *
 * Formats:
 *
 * - cosigner vkey = `<name>+<hex8 key id>+<base64(0x04 || 32-byte Ed25519 key)>`, with
 *   key id = SHA-256(name || 0x0A || 0x04 || public key)[:4];
 * - a cosignature is a note signature line `— <name> base64(key id || u64 timestamp ||
 *   Ed25519 signature)`; the signed message is `cosignature/v1\n`, `time <t>\n` and the
 *   whole checkpoint text (the note without its signature lines);
 * - a policy is lines `log <vkey> [url]`, `witness <name> <vkey> [url]`,
 *   `group <name> <k|all|any> <member>...` and exactly one `quorum <name|none>`;
 * - an add-checkpoint request body is `old <size>\n`, up to 63 base64 consistency-proof
 *   lines, an empty line, and the signed checkpoint.
 *
 * Checks (each a {@link WitnessError} or, for sizes, a LimitExceededError, with `check`):
 * `witness.key` (a cosigner key), `witness.format` (a policy witness's cosignature line is not
 * 76 bytes, or its timestamp exceeds 2^63-1), `witness.timestamp` (zero, or more than
 * `maxSkewS` in the future), `witness.signature` (a policy witness's cosignature does not
 * verify: the checkpoint is rejected whole), `witness.quorum` (the witnesses whose
 * cosignatures verified do not satisfy the quorum), `witness.policy` (the policy does not
 * parse, or does not list the checkpoint's log), `witness.request` (an add-checkpoint body).
 *
 * Only Ed25519 cosignatures (type 0x04); ML-DSA-44 cosigners (type 0x06) are refused
 * (`witness.key`, hence `witness.policy` in a policy), not ignored.
 */

import { sha256 } from "@noble/hashes/sha2.js";

import { base64Encode, concatBytes, constantTimeEqual, decodeUtf8Strict, toHex, utf8 } from "./bytes.js";
import { checkPublicKey, publicKeyFromSeed, signWithSeed, verifySignature } from "./ed25519.js";
import { LimitExceededError, MalformedError, VerificationError } from "./errors.js";
import { HASH_SIZE, MAX_TREE_SIZE } from "./merkle.js";
import { compareCodePoints } from "./mesh.js";
import {
  MAX_NOTE_BYTES,
  SignedNote,
  VerifierKey,
  b64decodeStrict,
  encodesAsUtf8,
  parseDecimal,
  type VerifiedCheckpoint,
} from "./note.js";

export const ALG_COSIGNATURE_V1 = 0x04;
const ALG_MLDSA44_COSIGNATURE = 0x06;
const EM_DASH_PREFIX = "\u2014 ";
const COSIGNATURE_BYTES = 4 + 8 + 64;
export const MAX_TIMESTAMP = (1n << 63n) - 1n;
/** A policy file is small: the spec recommends supporting 32 logs, witnesses and groups. */
export const MAX_POLICY_BYTES = 64 * 1024;
export const MAX_POLICY_ENTRIES = 256;
/** tlog-witness: "The client MUST NOT send more than 63 consistency proof lines." */
export const MAX_PROOF_LINES = 63;
export const MAX_REQUEST_BYTES = MAX_NOTE_BYTES + 8 * 1024;
/** How far in the future a cosignature's timestamp may lie (clock skew), by default. */
export const DEFAULT_MAX_SKEW_S = 600;

/** Python's `\s` (and `str.split()`'s separators): str.isspace characters. */
const PY_SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
const PY_SPACES = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
const POLICY_CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/;

/** A witness cosignature, quorum or policy check failed. */
export class WitnessError extends VerificationError {
  static override readonly defaultCheck: string = "witness";
}

/** Number of code points (Python's `len` of a str). */
function codePointLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** Python's `repr`-ish preview of untrusted text in messages (never compared). */
function preview(text: string, n: number): string {
  return JSON.stringify([...text].slice(0, n).join(""));
}

/** A cosigner key name: 1-255 characters of UTF-8 text, no whitespace, no '+'. */
export function checkWitnessName(name: unknown): string {
  if (
    typeof name !== "string" ||
    name.length === 0 ||
    name.includes("+") ||
    PY_SPACE.test(name) ||
    codePointLength(name) > 255 ||
    !encodesAsUtf8(name)
  ) {
    throw new WitnessError(
      `witness name ${preview(String(name), 60)} must be 1-255 characters of UTF-8 text without spaces or '+'`,
      { check: "witness.key" },
    );
  }
  return name;
}

/** tlog-cosignature key id: SHA-256(name || 0x0A || 0x04 || 32-byte Ed25519 key)[:4]. */
export function cosignerKeyId(name: string, publicKey: Uint8Array): Uint8Array {
  return sha256(concatBytes(utf8(name), Uint8Array.of(0x0a, ALG_COSIGNATURE_V1), publicKey)).slice(0, 4);
}

function formatVkey(name: string, publicKey: Uint8Array): string {
  const blob = base64Encode(concatBytes(Uint8Array.of(ALG_COSIGNATURE_V1), publicKey));
  return `${name}+${toHex(cosignerKeyId(name, publicKey))}+${blob}`;
}

/** A cosigner's Ed25519 key under its name. Only built by {@link WitnessKey.parse} and
 * {@link WitnessKey.fromPublicKey}, which check it. */
export class WitnessKey {
  private constructor(
    readonly name: string,
    readonly keyId: Uint8Array,
    readonly publicKey: Uint8Array,
  ) {
    Object.freeze(this);
  }

  /** Parse `<name>+<hex8>+<base64(0x04 || key)>`; the key id must match (`witness.key`). */
  static parse(vkey: string): WitnessKey {
    if (typeof vkey !== "string" || codePointLength(vkey) > 1024) {
      throw new WitnessError("witness key must be a short string", { check: "witness.key" });
    }
    // Python's split("+", 2): the base64 key after the name and key id may hold '+'.
    const first = vkey.indexOf("+");
    const second = first < 0 ? -1 : vkey.indexOf("+", first + 1);
    if (second < 0) throw new WitnessError("witness key must be name+keyid+key", { check: "witness.key" });
    const name = checkWitnessName(vkey.slice(0, first));
    const hexId = vkey.slice(first + 1, second);
    if (!/^[0-9a-f]{8}$/.test(hexId)) {
      throw new WitnessError("key id must be 8 lowercase hex digits", { check: "witness.key" });
    }
    let raw: Uint8Array;
    try {
      raw = b64decodeStrict(vkey.slice(second + 1), "witness.key");
    } catch (e) {
      if (e instanceof MalformedError) throw new WitnessError(e.message, { check: "witness.key", cause: e });
      throw e;
    }
    if (raw[0] === ALG_MLDSA44_COSIGNATURE) {
      throw new WitnessError("ML-DSA-44 cosigners (type 0x06) are not supported", { check: "witness.key" });
    }
    if (raw.length !== 33 || raw[0] !== ALG_COSIGNATURE_V1) {
      throw new WitnessError("a witness key is an Ed25519 cosignature/v1 key (type 0x04, 32 bytes)", {
        check: "witness.key",
      });
    }
    let publicKey: Uint8Array;
    try {
      publicKey = checkPublicKey(raw.slice(1));
    } catch (e) {
      if (e instanceof MalformedError) throw new WitnessError(e.message, { check: "witness.key", cause: e });
      throw e;
    }
    const keyId = Uint8Array.from(hexId.match(/../g) as string[], (h) => parseInt(h, 16));
    if (!constantTimeEqual(keyId, cosignerKeyId(name, publicKey))) {
      throw new WitnessError("key id does not match name and public key", { check: "witness.key" });
    }
    return new WitnessKey(name, keyId, publicKey);
  }

  static fromPublicKey(name: string, publicKey: Uint8Array): WitnessKey {
    return WitnessKey.parse(formatVkey(checkWitnessName(name), publicKey));
  }

  toString(): string {
    return formatVkey(this.name, this.publicKey);
  }
}

/** The bytes a cosigner signs: header line, time line, then the checkpoint text. */
export function cosignatureMessage(checkpointText: string, timestamp: bigint | number): Uint8Array {
  const t = BigInt(timestamp);
  if (t < 0n || t > MAX_TIMESTAMP) throw new RangeError("cosignature timestamp is outside [0, 2**63-1]");
  return utf8(`cosignature/v1\ntime ${t}\n${checkpointText}`);
}

/** One cosignature note line (ending in a newline) over `checkpointText`, by the witness
 * whose Ed25519 seed is `seed`. For tests and tools: a verifier never signs. */
export function cosign(checkpointText: string, name: string, seed: Uint8Array, timestamp: bigint | number): string {
  const t = BigInt(timestamp);
  if (t < 1n) throw new RangeError("a cosignature carries a non-zero timestamp");
  const publicKey = publicKeyFromSeed(seed);
  const sig = signWithSeed(cosignatureMessage(checkpointText, t), seed);
  const ts = new Uint8Array(8);
  new DataView(ts.buffer).setBigUint64(0, t, false);
  return `${EM_DASH_PREFIX}${name} ${base64Encode(concatBytes(cosignerKeyId(name, publicKey), ts, sig))}\n`;
}

/** A verified cosignature: which witness, and when (POSIX seconds) it cosigned. */
export interface Cosignature {
  readonly witness: string;
  readonly timestamp: bigint;
}

export interface CosignatureOptions {
  /** POSIX seconds (default: now); a timestamp after now + maxSkewS is in the future. */
  readonly now?: number | bigint;
  readonly maxSkewS?: number;
}

/** Whether `ts` lies after `now + skew` (Python's exact int/float comparison). */
function inFuture(ts: bigint, now: number | bigint | undefined, skew: number): boolean {
  if (typeof now === "bigint") return ts > now + BigInt(Math.trunc(skew));
  const limit = (now ?? Date.now() / 1000) + skew;
  if (Number.isNaN(limit) || limit === Infinity) return false;
  if (limit === -Infinity) return true;
  return ts > BigInt(Math.floor(limit));
}

/**
 * Verify the cosignatures of the given witnesses on a checkpoint note.
 *
 * Lines whose (name, key id) matches no witness are ignored (the log's own signature, other
 * witnesses). A matching line that is malformed, stamped zero or in the future, or that does
 * not verify throws. Returns the witnesses whose cosignature verified (the newest each).
 */
export function verifyCosignatures(
  note: Uint8Array | SignedNote,
  witnesses: Iterable<WitnessKey>,
  options: CosignatureOptions = {},
): Map<WitnessKey, Cosignature> {
  const parsed = note instanceof SignedNote ? note : SignedNote.parse(note);
  const known = new Map<string, WitnessKey>();
  for (const w of witnesses) known.set(`${w.name}\n${toHex(w.keyId)}`, w);
  const skew = options.maxSkewS ?? DEFAULT_MAX_SKEW_S;
  const out = new Map<WitnessKey, Cosignature>();
  for (const sig of parsed.signatures) {
    const key = known.get(`${sig.name}\n${toHex(sig.keyId)}`);
    if (key === undefined) continue;
    if (sig.signature.length !== COSIGNATURE_BYTES - 4) {
      throw new WitnessError(
        `cosignature by ${key.name} is ${sig.signature.length + 4} bytes, not ${COSIGNATURE_BYTES}`,
        { check: "witness.format" },
      );
    }
    const ts = new DataView(sig.signature.buffer, sig.signature.byteOffset, 8).getBigUint64(0, false);
    if (ts > MAX_TIMESTAMP) {
      throw new WitnessError(`cosignature by ${key.name}: timestamp exceeds 2**63-1`, { check: "witness.format" });
    }
    if (ts === 0n) {
      throw new WitnessError(`cosignature by ${key.name} carries a zero timestamp`, { check: "witness.timestamp" });
    }
    if (inFuture(ts, options.now, skew)) {
      throw new WitnessError(`cosignature by ${key.name} is dated ${ts}, in the future`, {
        check: "witness.timestamp",
      });
    }
    if (!verifySignature(sig.signature.subarray(8), cosignatureMessage(parsed.text, ts), key.publicKey)) {
      throw new WitnessError(`cosignature by ${key.name} does not verify`, { check: "witness.signature" });
    }
    const seen = out.get(key);
    if (seen === undefined || seen.timestamp < ts) out.set(key, Object.freeze({ witness: key.name, timestamp: ts }));
  }
  return out;
}

// -- policy -------------------------------------------------------------------------------------

export interface WitnessGroup {
  readonly name: string;
  readonly threshold: number;
  readonly members: readonly string[];
}

/** A witness of a policy: its policy name, its key and its optional submission URL. */
export interface PolicyWitness {
  readonly name: string;
  readonly key: WitnessKey;
  readonly url: string | null;
}

/** A c2sp.org/tlog-policy: accepted logs, known witnesses and the quorum rule. `quorum` is
 * null for `quorum none` (no cosignature needed). */
export class WitnessPolicy {
  private constructor(
    readonly logs: readonly VerifierKey[],
    readonly logUrls: ReadonlyMap<string, string>,
    readonly witnesses: readonly PolicyWitness[],
    readonly groups: ReadonlyMap<string, WitnessGroup>,
    readonly quorum: string | null,
  ) {
    Object.freeze(this);
  }

  /** Parse a policy file strictly (names must be UTF-8; see the module doc). */
  static parse(data: string | Uint8Array): WitnessPolicy {
    let raw: Uint8Array;
    if (typeof data === "string") {
      if (!encodesAsUtf8(data)) throw new WitnessError("policy is not UTF-8", { check: "witness.policy" });
      raw = utf8(data);
    } else if (data instanceof Uint8Array) {
      raw = data;
    } else {
      throw new WitnessError("a policy is text or bytes", { check: "witness.policy" });
    }
    if (raw.length > MAX_POLICY_BYTES) {
      throw new LimitExceededError(`policy exceeds ${MAX_POLICY_BYTES} bytes`, { check: "witness.policy" });
    }
    for (const b of raw) {
      if (POLICY_CONTROL.test(String.fromCharCode(b))) {
        throw new WitnessError("policy holds control characters other than tab and newline", {
          check: "witness.policy",
        });
      }
    }
    const text = decodeUtf8Strict(raw);
    if (text === null) throw new WitnessError("policy is not UTF-8", { check: "witness.policy" });
    const logs: VerifierKey[] = [];
    const logUrls = new Map<string, string>();
    const witnesses: PolicyWitness[] = [];
    const groups = new Map<string, WitnessGroup>();
    const names = new Set<string>();
    const publicKeys = new Set<string>();
    let quorum: string | null = null;
    let seenQuorum = false;
    let entries = 0;
    const fail = (lineno: number, msg: string, cause?: unknown): WitnessError =>
      new WitnessError(`policy line ${lineno}: ${msg}`, { check: "witness.policy", cause });
    const lines = text.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const lineno = i + 1;
      // Python's line.replace("\t", " ").split(): any whitespace separates, none is a field.
      const fields = (lines[i] as string)
        .replace(/\t/g, " ")
        .split(PY_SPACES)
        .filter((x) => x !== "");
      if (fields.length === 0 || (fields[0] as string).startsWith("#")) continue;
      entries += 1;
      if (entries > MAX_POLICY_ENTRIES) {
        throw new LimitExceededError(`policy has more than ${MAX_POLICY_ENTRIES} entries`, {
          check: "witness.policy",
        });
      }
      const word = fields[0] as string;
      if (word === "log") {
        if (fields.length !== 2 && fields.length !== 3) throw fail(lineno, "expected 'log <vkey> [<url>]'");
        let key: VerifierKey;
        try {
          key = VerifierKey.parse(fields[1] as string);
        } catch (e) {
          if (e instanceof MalformedError) throw fail(lineno, `log key: ${e.message}`, e);
          throw e;
        }
        const pk = toHex(key.publicKey);
        if (publicKeys.has(pk)) throw fail(lineno, "duplicate public key");
        publicKeys.add(pk);
        logs.push(key);
        if (fields.length === 3) logUrls.set(key.name, fields[2] as string);
      } else if (word === "witness") {
        if (fields.length !== 3 && fields.length !== 4) throw fail(lineno, "expected 'witness <name> <vkey> [<url>]'");
        const name = fields[1] as string;
        if (names.has(name) || name === "none") throw fail(lineno, `name ${preview(name, 60)} is already defined`);
        let wkey: WitnessKey;
        try {
          wkey = WitnessKey.parse(fields[2] as string);
        } catch (e) {
          if (e instanceof WitnessError) throw fail(lineno, e.message, e);
          throw e;
        }
        const pk = toHex(wkey.publicKey);
        if (publicKeys.has(pk)) throw fail(lineno, "duplicate public key");
        publicKeys.add(pk);
        names.add(name);
        witnesses.push(Object.freeze({ name, key: wkey, url: fields.length === 4 ? (fields[3] as string) : null }));
      } else if (word === "group") {
        if (fields.length < 4) throw fail(lineno, "expected 'group <name> <k|all|any> <member>...'");
        const name = fields[1] as string;
        const kText = fields[2] as string;
        const members = fields.slice(3);
        if (names.has(name) || name === "none") throw fail(lineno, `name ${preview(name, 60)} is already defined`);
        if (new Set(members).size !== members.length) throw fail(lineno, "a member is listed twice");
        for (const m of members) {
          if (!names.has(m)) throw fail(lineno, `member ${preview(m, 60)} is not defined on an earlier line`);
        }
        const n = members.length;
        let k: number;
        if (kText === "all") k = n;
        else if (kText === "any") k = 1;
        else {
          try {
            k = Number(parseDecimal(kText, "witness.policy", BigInt(n)));
          } catch (e) {
            if (e instanceof MalformedError) {
              throw fail(lineno, `threshold ${preview(kText, 60)} is not a decimal in [1, ${n}]`, e);
            }
            throw e;
          }
          if (k < 1) throw fail(lineno, `threshold ${preview(kText, 60)} is not a decimal in [1, ${n}]`);
        }
        names.add(name);
        groups.set(name, Object.freeze({ name, threshold: k, members: Object.freeze(members) }));
      } else if (word === "quorum") {
        if (fields.length !== 2) throw fail(lineno, "expected 'quorum <name>'");
        if (seenQuorum) throw fail(lineno, "a policy has exactly one quorum line");
        seenQuorum = true;
        const q = fields[1] as string;
        if (q === "none") quorum = null;
        else if (names.has(q)) quorum = q;
        else throw fail(lineno, `quorum ${preview(q, 60)} is not defined on an earlier line`);
      } else {
        throw fail(lineno, `unknown keyword ${preview(word, 60)}`);
      }
    }
    if (!seenQuorum) throw new WitnessError("policy has no quorum line", { check: "witness.policy" });
    return new WitnessPolicy(Object.freeze(logs), logUrls, Object.freeze(witnesses), groups, quorum);
  }

  /** A policy of `k` of the given witness keys (no log restriction). */
  static threshold(keys: readonly (WitnessKey | string)[], k: number): WitnessPolicy {
    const parsed = keys.map((w) => (w instanceof WitnessKey ? w : WitnessKey.parse(w)));
    if (parsed.length === 0) {
      throw new WitnessError("a witness quorum needs at least one witness key", { check: "witness.policy" });
    }
    const lines = parsed.map((w, i) => `witness w${i} ${w.toString()}`);
    lines.push(`group quorum ${k} ` + parsed.map((_, i) => `w${i}`).join(" "));
    lines.push("quorum quorum");
    return WitnessPolicy.parse(lines.join("\n") + "\n");
  }

  get keys(): WitnessKey[] {
    return this.witnesses.map((w) => w.key);
  }

  /** Whether the witnesses named (policy names) satisfy the quorum. */
  satisfied(cosigned: Iterable<string>): boolean {
    if (this.quorum === null) return true;
    const done = new Set(cosigned);
    const memo = new Map<string, boolean>();
    const met = (name: string): boolean => {
      let value = memo.get(name);
      if (value === undefined) {
        const group = this.groups.get(name);
        value = group === undefined ? done.has(name) : group.members.filter((m) => met(m)).length >= group.threshold;
        memo.set(name, value);
      }
      return value;
    };
    return met(this.quorum);
  }

  /** Require the policy's quorum of cosignatures on a verified checkpoint; return the policy
   * names of the witnesses that cosigned (sorted). */
  check(cp: VerifiedCheckpoint, options: CosignatureOptions = {}): string[] {
    if (
      this.logs.length > 0 &&
      !this.logs.some((k) => k.name === cp.origin && cp.signedBy.some((s) => constantTimeEqual(s.publicKey, k.publicKey)))
    ) {
      throw new WitnessError(
        `the witness policy does not list the log ${JSON.stringify(cp.origin)} under the key that signed it`,
        { check: "witness.policy" },
      );
    }
    const verified = verifyCosignatures(cp.note, this.keys, options);
    const byKey = new Map(this.witnesses.map((w) => [w.key, w.name]));
    const cosigned = [...verified.keys()].map((k) => byKey.get(k) as string).sort(compareCodePoints);
    if (!this.satisfied(cosigned)) {
      const have = cosigned.join(", ") || "no policy witness";
      throw new WitnessError(
        `checkpoint ${cp.origin} size ${cp.size} is cosigned by ${have}: the witness quorum ` +
          `${JSON.stringify(this.quorum)} is not met`,
        { check: "witness.quorum" },
      );
    }
    return cosigned;
  }
}

/** A witness check for `verifyBundle`'s `witnesses` option (the Python CLI's
 * `lambda cp: policy.check(cp, now=args.at)`): the policy parses now (`witness.policy`), its
 * quorum is required of the bundle's checkpoint as of `at` (Unix seconds, default now). */
export function witnessCheck(
  policy: WitnessPolicy | string | Uint8Array,
  at?: number | bigint,
): (cp: VerifiedCheckpoint) => string[] {
  const p = policy instanceof WitnessPolicy ? policy : WitnessPolicy.parse(policy);
  return (cp) => p.check(cp, at === undefined ? {} : { now: at });
}

// -- tlog-witness add-checkpoint -------------------------------------------------------------

/** A parsed add-checkpoint request: old size, consistency proof, checkpoint note bytes. */
export interface AddCheckpoint {
  readonly oldSize: bigint;
  readonly proof: readonly Uint8Array[];
  readonly checkpoint: Uint8Array;
}

/** The request body of `POST <prefix>/add-checkpoint`. */
export function formatAddCheckpoint(oldSize: bigint | number, proof: readonly Uint8Array[], checkpoint: Uint8Array): Uint8Array {
  if (proof.length > MAX_PROOF_LINES) throw new RangeError(`at most ${MAX_PROOF_LINES} consistency proof lines`);
  const head = `old ${BigInt(oldSize)}\n` + proof.map((h) => base64Encode(h) + "\n").join("") + "\n";
  return concatBytes(utf8(head), checkpoint);
}

/** Parse an add-checkpoint request body strictly (`witness.request` on failure). */
export function parseAddCheckpoint(body: Uint8Array): AddCheckpoint {
  if (body.length > MAX_REQUEST_BYTES) {
    throw new LimitExceededError(`request exceeds ${MAX_REQUEST_BYTES} bytes`, { check: "witness.request" });
  }
  let split = -1;
  for (let i = 0; i + 1 < body.length; i++) {
    if (body[i] === 0x0a && body[i + 1] === 0x0a) {
      split = i;
      break;
    }
  }
  if (split < 0) throw new WitnessError("request has no empty line before the checkpoint", { check: "witness.request" });
  const headBytes = body.subarray(0, split + 1);
  if (headBytes.some((b) => b > 0x7f)) throw new WitnessError("request header is not ASCII", { check: "witness.request" });
  const lines = (decodeUtf8Strict(headBytes) as string).split("\n").slice(0, -1);
  const first = lines[0] as string;
  if (!first.startsWith("old ")) throw new WitnessError("request must start with 'old <size>'", { check: "witness.request" });
  let old: bigint;
  try {
    old = parseDecimal(first.slice(4), "witness.request", MAX_TREE_SIZE);
  } catch (e) {
    if (e instanceof MalformedError) throw new WitnessError(e.message, { check: "witness.request", cause: e });
    throw e;
  }
  if (lines.length - 1 > MAX_PROOF_LINES) {
    throw new WitnessError(`more than ${MAX_PROOF_LINES} consistency proof lines`, { check: "witness.request" });
  }
  const proof: Uint8Array[] = [];
  for (const line of lines.slice(1)) {
    let h: Uint8Array;
    try {
      h = b64decodeStrict(line, "witness.request");
    } catch (e) {
      if (e instanceof MalformedError) throw new WitnessError(e.message, { check: "witness.request", cause: e });
      throw e;
    }
    if (h.length !== HASH_SIZE) {
      throw new WitnessError("a consistency proof line is not a 32-byte hash", { check: "witness.request" });
    }
    proof.push(h);
  }
  return Object.freeze({ oldSize: old, proof: Object.freeze(proof), checkpoint: body.slice(split + 2) });
}
