/**
 * Event envelopes, body commitments and log leaves (specs/event-envelope.md, specs/leaf.md).
 * Port of verifier/event.py: same grammar, same bounds, same checks in the same order,
 * same check names.
 *
 * Trust role: turns leaf bytes into a {@link Leaf} value only if they are the one canonical
 * encoding of a well-formed leaf, and checks agent signatures and body commitments over the
 * exact bytes that were signed.
 *
 * Domain separation: every hash or signature input starts with its own ASCII label followed
 * by a NUL byte, so no signature or hash made for one purpose is valid for another:
 *
 * - event signature: Ed25519 over `"engram/event/v1\0" || JCS(envelope)`
 * - key possession:  Ed25519 over `"engram/key-pop/v1\0" || JCS(statement)`
 * - body commitment: SHA-256(`"engram/body/v1\0" || salt(16) || JCS(body)`)
 * - a `memory.distilled` body of per-entry form (`"disclosure": "per-entry/v1"`):
 *   SHA-256(`"engram/body-digest/v1\0" || salt(16) || JCS(digest form)`), each entry replaced
 *   by hex SHA-256(`"engram/distilled-entry/v1\0" || JCS(entry)`) (specs/event-envelope.md §3)
 * - agent key id:    SHA-256(`"engram/agent-key/v1\0" || public key`)[:16], hex
 *
 * The leaf itself is hashed as an RFC 9162 leaf (0x00 prefix) by merkle.ts. Checkpoint
 * notes cannot collide with these inputs because notes may not contain NUL.
 *
 * Mapping of Python types: `int` fields are JS numbers (every one is a safe integer, so
 * exact), `bytes` are `Uint8Array` (copied in and never shared), `None` is `null`, a
 * parsed JSON object is a plain object (see jcs.ts). The key history rules of
 * verifier/keys.py (which key is valid at which index) are in keys.ts.
 */

import { sha256 } from "@noble/hashes/sha2.js";

import { base64Encode, bytesEqual, concatBytes, constantTimeEqual, toHex, utf8 } from "./bytes.js";
import { checkPublicKey, publicKeyFromSeed, signWithSeed, verifySignature } from "./ed25519.js";
import {
  CanonicalFormError,
  LimitExceededError,
  MalformedError,
  OriginMismatchError,
  SignatureError,
} from "./errors.js";
import { MAX_SAFE_INTEGER, canonicalBytes, parseCanonical, type JSONValue } from "./jcs.js";
import { leafHash } from "./merkle.js";
import { b64decodeStrict } from "./note.js";

export const ENVELOPE_VERSION = 1;
export const LEAF_FORMAT = "engram.leaf/v1";
export const EVENT_DOMAIN: Uint8Array = utf8("engram/event/v1\x00");
export const POP_DOMAIN: Uint8Array = utf8("engram/key-pop/v1\x00");
export const BODY_DOMAIN: Uint8Array = utf8("engram/body/v1\x00");
/** Per-entry commitments of `memory.distilled` bodies (issue 40). */
export const DIGEST_BODY_DOMAIN: Uint8Array = utf8("engram/body-digest/v1\x00");
export const DISTILLED_ENTRY_DOMAIN: Uint8Array = utf8("engram/distilled-entry/v1\x00");
/** The member (inside the committed bytes) that says a `memory.distilled` body is of the
 * per-entry form, and its one value. */
export const DISCLOSURE_MEMBER = "disclosure";
export const PER_ENTRY = "per-entry/v1";
export const KEY_ID_DOMAIN: Uint8Array = utf8("engram/agent-key/v1\x00");
export const SALT_SIZE = 16;
/** tlog-tiles entry bundles prefix each entry with a uint16 length, so a leaf can never be
 * longer than 65,535 bytes; this is also the default (and the maximum) configurable limit. */
export const DEFAULT_MAX_LEAF_BYTES = 65_535;
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;
export const MAX_ENVELOPE_BYTES = 8 * 1024;
/** The ledger's own authority (policy decisions, forced revocations). Agent ids beginning
 * with "engram." are reserved for the ledger. */
export const POLICY_AGENT = "engram.policy";

/** A set that cannot be changed at run time (Python's frozenset). */
function frozenSet(items: readonly string[]): ReadonlySet<string> {
  const set = new Set(items);
  const refuse = (): never => {
    throw new TypeError("this set is frozen");
  };
  Object.defineProperties(set, { add: { value: refuse }, delete: { value: refuse }, clear: { value: refuse } });
  return Object.freeze(set);
}

export const KEY_KINDS: ReadonlySet<string> = frozenSet(["key.registered", "key.rotated", "key.revoked"]);
/** Kinds signed by the ledger's policy key in the subject agent's streams (event-envelope.md §5). */
export const POLICY_KINDS: ReadonlySet<string> = frozenSet([
  "memory.distilled",
  "memory.tier_changed",
  "memory.archived",
  "memory.replaced",
  "memory.accessed",
]);
/** Kinds that the agent itself or the policy key may sign. */
export const AGENT_OR_POLICY_KINDS: ReadonlySet<string> = frozenSet(["memory.decay_exempted"]);

// Python's re.fullmatch: anchored at both ends; JS `$` without the m flag is the end only.
const AGENT_ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const KIND = /^[a-z][a-z0-9_]{0,31}(?:\.[a-z][a-z0-9_]{0,31}){0,3}$/;
const KEY_ID = /^[0-9a-f]{32}$/;
const HEX_HASH = /^[0-9a-f]{64}$/;

/** A short printable form of an untrusted value for messages (Python's `str(x)[:80]!r`). */
function preview(value: unknown): string {
  let text: string;
  try {
    text = typeof value === "string" ? value : String(value);
  } catch {
    text = typeof value;
  }
  return JSON.stringify(text.slice(0, 80));
}

/** Number of code points, counting a lone surrogate as one (Python's `len` of a str). */
function codePointLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** Constant-time equality of two strings (Python's hmac.compare_digest on str). */
function stringsEqualCT(a: string, b: string): boolean {
  return constantTimeEqual(utf8(a), utf8(b));
}

/** A parsed JSON object (Python's `isinstance(x, dict)`): a plain object, not an array. */
type JSONObject = { [key: string]: unknown };

function isPlainObject(value: unknown): value is JSONObject {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Python's `dict.get`: own members only (never the prototype's `constructor`, say). */
function member(obj: JSONObject, name: string): unknown {
  return Object.hasOwn(obj, name) ? obj[name] : undefined;
}

/** Agent ids: 1-64 chars of `[a-z0-9._-]`, starting with a letter or digit.
 * @throws MalformedError `envelope.agent` */
export function checkAgentId(agent: unknown): string {
  if (typeof agent !== "string" || !AGENT_ID.test(agent)) {
    throw new MalformedError(`agent id ${preview(agent)} must match [a-z0-9][a-z0-9._-]{0,63}`, {
      check: "envelope.agent",
    });
  }
  return agent;
}

/** Kind names: dotted lowercase identifiers (the registry is closed; see engram.protocol.kinds).
 * @throws MalformedError `envelope.kind` */
export function checkKind(kind: unknown): string {
  if (typeof kind !== "string" || !KIND.test(kind)) {
    throw new MalformedError(`kind ${preview(kind)} is not a valid kind name`, { check: "envelope.kind" });
  }
  return kind;
}

/**
 * Key id of an agent Ed25519 public key: hex of a domain-separated SHA-256, 16 bytes.
 * The key itself is validated (checkPublicKey) where it is introduced, in
 * {@link NewKey.fromObj}.
 * @throws MalformedError `key.public_key`: not 32 bytes.
 */
export function agentKeyId(publicKey: Uint8Array): string {
  if (publicKey.length !== 32) {
    throw new MalformedError("Ed25519 public keys are 32 bytes", { check: "key.public_key" });
  }
  return toHex(sha256(concatBytes(KEY_ID_DOMAIN, publicKey)).subarray(0, 16));
}

/** Hex SHA-256 over the body domain label, a 16-byte salt and the body's JCS bytes.
 * @throws MalformedError `body.salt`: the salt is not 16 bytes. */
export function bodyCommitment(salt: Uint8Array, bodyJcs: Uint8Array): string {
  if (salt.length !== SALT_SIZE) {
    throw new MalformedError(`salt must be ${SALT_SIZE} bytes`, { check: "body.salt" });
  }
  return toHex(sha256(concatBytes(BODY_DOMAIN, salt, bodyJcs)));
}

const NONCE = /^[0-9a-f]{32}$/;
const HEX64 = /^[0-9a-f]{64}$/;

function formError(why: string): MalformedError {
  return new MalformedError(`a per-entry memory.distilled body ${why}`, { check: "body.form" });
}

/** Hex SHA-256 of one distilled entry (with its `nonce`): what stands in its place in the
 * digest form. @throws MalformedError `body.form`: not an object with a 16-byte hex nonce. */
export function entryDigest(entry: unknown): string {
  if (!isPlainObject(entry)) throw formError("has an entry without a 16-byte hex nonce");
  const nonce = Object.hasOwn(entry, "nonce") ? (entry as JSONObject)["nonce"] : undefined;
  if (typeof nonce !== "string" || !NONCE.test(nonce)) throw formError("has an entry without a 16-byte hex nonce");
  return toHex(sha256(concatBytes(DISTILLED_ENTRY_DOMAIN, canonicalBytes(entry))));
}

/** Whether `body` is committed to in the per-entry form (Python's `_per_entry`): a
 * `memory.distilled` body whose `disclosure` member says so; any other value is refused. */
function perEntry(kind: string, body: unknown): body is JSONObject {
  if (kind !== "memory.distilled" || !isPlainObject(body) || !Object.hasOwn(body, DISCLOSURE_MEMBER)) return false;
  const form = (body as JSONObject)[DISCLOSURE_MEMBER];
  if (form !== PER_ENTRY) {
    throw formError(`names disclosure ${JSON.stringify(String(form).slice(0, 40))}, not "${PER_ENTRY}"`);
  }
  return true;
}

/** The digest form of a per-entry body, full or partly disclosed: every object entry is
 * replaced by its {@link entryDigest}; an entry given as a digest (64 lowercase hex) stays. */
export function digestForm(body: JSONObject): JSONObject {
  const entries = Object.hasOwn(body, "entries") ? body["entries"] : undefined;
  if (!Array.isArray(entries)) throw formError("has no list of entries");
  const out: JSONValue[] = entries.map((e) => {
    if (typeof e === "string") {
      if (!HEX64.test(e)) throw formError("gives an undisclosed entry that is not a hex SHA-256");
      return e;
    }
    return entryDigest(e);
  });
  return { ...body, entries: out };
}

/** The commitment an event of `kind` signs for a body (verifier/event.py `commitment_of`):
 * {@link bodyCommitment} of its bytes, or for a per-entry `memory.distilled` body, SHA-256
 * over `engram/body-digest/v1`, the salt and the JCS of its {@link digestForm}. */
export function commitmentOf(kind: string, salt: Uint8Array, bodyJcs: Uint8Array, parsed?: JSONValue): string {
  if (kind !== "memory.distilled") return bodyCommitment(salt, bodyJcs);
  const value = parsed === undefined ? parseCanonical(bodyJcs, { maxBytes: Math.max(bodyJcs.length, 1) }) : parsed;
  if (!perEntry(kind, value)) return bodyCommitment(salt, bodyJcs);
  if (salt.length !== SALT_SIZE) {
    throw new MalformedError(`salt must be ${SALT_SIZE} bytes`, { check: "body.salt" });
  }
  return toHex(sha256(concatBytes(DIGEST_BODY_DOMAIN, salt, canonicalBytes(digestForm(value)))));
}

function intField(obj: JSONObject, name: string, minimum = 0): number {
  const value = member(obj, name);
  // Python's `type(value) is int`: booleans and floats are not integers.
  if (typeof value !== "number" || !Number.isInteger(value) || !(minimum <= value && value <= MAX_SAFE_INTEGER)) {
    throw new MalformedError(`${name} must be an integer >= ${minimum}`, { check: `envelope.${name}` });
  }
  return value === 0 ? 0 : value; // -0 is 0
}

function strField(obj: JSONObject, name: string, pattern: RegExp, check: string): string {
  const value = member(obj, name);
  if (typeof value !== "string" || !pattern.test(value)) {
    throw new MalformedError(`${name} is malformed`, { check });
  }
  return value;
}

function exactFields(obj: unknown, required: readonly string[], optional: readonly string[], check: string): JSONObject {
  if (!isPlainObject(obj)) throw new MalformedError("expected a JSON object", { check });
  const keys = Object.keys(obj);
  const missing = required.filter((k) => !Object.hasOwn(obj, k)).sort();
  const extra = keys.filter((k) => !required.includes(k) && !optional.includes(k)).sort();
  if (missing.length) throw new MalformedError(`missing fields ${JSON.stringify(missing)}`, { check });
  if (extra.length) throw new MalformedError(`unknown fields ${JSON.stringify(extra)}`, { check });
  return obj;
}

/** A key introduced by `key.registered` / `key.rotated`, with proof of possession. */
export class NewKey {
  readonly keyId: string;
  readonly publicKey: Uint8Array;
  readonly pop: Uint8Array;

  constructor(fields: { keyId: string; publicKey: Uint8Array; pop: Uint8Array }) {
    this.keyId = fields.keyId;
    this.publicKey = fields.publicKey.slice();
    this.pop = fields.pop.slice();
    Object.freeze(this);
  }

  /**
   * Validate a parsed `new_key` object: exactly alg / key_id / public_key / pop, alg
   * `ed25519`, canonical base64 of 32 and 64 bytes, a valid public key of large order, and
   * the key id of that key.
   *
   * @throws MalformedError `envelope.new_key`; `key.encoding` / `key.small_order` (the key).
   */
  static fromObj(obj: unknown): NewKey {
    const o = exactFields(obj, ["alg", "key_id", "public_key", "pop"], [], "envelope.new_key");
    if (o["alg"] !== "ed25519") {
      throw new MalformedError("only ed25519 agent keys are supported", { check: "envelope.new_key" });
    }
    const publicKeyText = o["public_key"];
    const popText = o["pop"];
    if (typeof publicKeyText !== "string" || typeof popText !== "string") {
      throw new MalformedError("public_key and pop are base64 strings", { check: "envelope.new_key" });
    }
    const publicKey = b64decodeStrict(publicKeyText, "envelope.new_key");
    const pop = b64decodeStrict(popText, "envelope.new_key");
    const keyId = strField(o, "key_id", KEY_ID, "envelope.new_key");
    if (publicKey.length !== 32 || pop.length !== 64) {
      throw new MalformedError("bad public key or pop length", { check: "envelope.new_key" });
    }
    checkPublicKey(publicKey);
    if (!stringsEqualCT(keyId, agentKeyId(publicKey))) {
      throw new MalformedError("new key id does not match its public key", { check: "envelope.new_key" });
    }
    return new NewKey({ keyId, publicKey, pop });
  }

  toObj(): { alg: string; key_id: string; public_key: string; pop: string } {
    return {
      alg: "ed25519",
      key_id: this.keyId,
      public_key: base64Encode(this.publicKey),
      pop: base64Encode(this.pop),
    };
  }
}

export interface EnvelopeFields {
  origin: string;
  agent: string;
  keyId: string;
  kind: string;
  version: number;
  prev: string | null;
  clientTimeUs: number;
  bodyCommitment: string;
  newKey?: NewKey | null;
}

/** What an agent signs. Stream = (agent, kind); `version` counts from 0 per stream.
 * The constructor checks nothing (as the Python dataclass); {@link Envelope.fromObj} and
 * {@link Envelope.fromBytes} validate. */
export class Envelope {
  readonly origin: string;
  readonly agent: string;
  readonly keyId: string;
  readonly kind: string;
  readonly version: number;
  readonly prev: string | null;
  readonly clientTimeUs: number;
  readonly bodyCommitment: string;
  readonly newKey: NewKey | null;

  constructor(fields: EnvelopeFields) {
    this.origin = fields.origin;
    this.agent = fields.agent;
    this.keyId = fields.keyId;
    this.kind = fields.kind;
    this.version = fields.version;
    this.prev = fields.prev;
    this.clientTimeUs = fields.clientTimeUs;
    this.bodyCommitment = fields.bodyCommitment;
    this.newKey = fields.newKey ?? null;
    Object.freeze(this);
  }

  get stream(): readonly [string, string] {
    return [this.agent, this.kind];
  }

  /** The envelope as the JSON object that is signed (`prev` and `new_key` only when set). */
  toObj(): Record<string, unknown> {
    const obj: Record<string, unknown> = {
      v: ENVELOPE_VERSION,
      origin: this.origin,
      agent: this.agent,
      key_id: this.keyId,
      kind: this.kind,
      version: this.version,
      client_time_us: this.clientTimeUs,
      body_commitment: this.bodyCommitment,
    };
    if (this.prev !== null) obj["prev"] = this.prev;
    if (this.newKey !== null) obj["new_key"] = this.newKey.toObj();
    return obj;
  }

  /** JCS(envelope): the bytes an agent signs (after {@link EVENT_DOMAIN}). */
  canonical(): Uint8Array {
    return canonicalBytes(this.toObj());
  }

  /**
   * Validate a parsed envelope object (exact field set, types, ranges, prev rule).
   *
   * Checks, in this order: `envelope.fields`, `envelope.v`, `envelope.origin`,
   * `envelope.version`, `envelope.prev`, `envelope.kind`, the new key (`envelope.new_key`,
   * `key.encoding`, `key.small_order`), `envelope.new_key` (present exactly for
   * key.registered / key.rotated), `envelope.agent`, `envelope.key_id`,
   * `envelope.client_time_us`, `envelope.body_commitment`.
   *
   * @throws MalformedError with one of those checks.
   */
  static fromObj(obj: unknown): Envelope {
    const o = exactFields(
      obj,
      ["v", "origin", "agent", "key_id", "kind", "version", "client_time_us", "body_commitment"],
      ["prev", "new_key"],
      "envelope.fields",
    );
    if (o["v"] !== ENVELOPE_VERSION) {
      throw new MalformedError(`unsupported envelope version ${preview(o["v"])}`, { check: "envelope.v" });
    }
    const origin = o["origin"];
    if (typeof origin !== "string" || !(origin.length > 0 && codePointLength(origin) <= 255)) {
      throw new MalformedError("origin must be a non-empty string", { check: "envelope.origin" });
    }
    const version = intField(o, "version");
    const prev = member(o, "prev");
    // Presence, not value: "prev": null at version 0 would be a second encoding of the
    // same envelope (a different leaf hash for the same signed event).
    if (version === 0 && Object.hasOwn(o, "prev")) {
      throw new MalformedError("version 0 has no prev member", { check: "envelope.prev" });
    }
    if (version > 0 && (typeof prev !== "string" || !HEX_HASH.test(prev))) {
      throw new MalformedError(`version ${version} needs prev, a hex leaf hash`, { check: "envelope.prev" });
    }
    const kind = checkKind(o["kind"]);
    const newKey = Object.hasOwn(o, "new_key") ? NewKey.fromObj(o["new_key"]) : null;
    if ((kind === "key.registered" || kind === "key.rotated") !== (newKey !== null)) {
      throw new MalformedError("new_key is required for key.registered/key.rotated and forbidden otherwise", {
        check: "envelope.new_key",
      });
    }
    // The order of the Python constructor's keyword arguments, evaluated left to right.
    const agent = checkAgentId(o["agent"]);
    const keyId = strField(o, "key_id", KEY_ID, "envelope.key_id");
    const clientTimeUs = intField(o, "client_time_us");
    const commitment = strField(o, "body_commitment", HEX_HASH, "envelope.body_commitment");
    return new Envelope({
      origin,
      agent,
      keyId,
      kind,
      version,
      prev: (prev as string | undefined) ?? null,
      clientTimeUs,
      bodyCommitment: commitment,
      newKey,
    });
  }

  /**
   * Parse envelope bytes that must be canonical JCS (at most {@link MAX_ENVELOPE_BYTES})
   * and exactly this envelope's encoding.
   *
   * @throws LimitExceededError / MalformedError / CanonicalFormError `json.*`, `canonical.*`;
   *   everything {@link Envelope.fromObj} throws; `envelope.form` (a guard).
   */
  static fromBytes(data: Uint8Array): Envelope {
    const env = Envelope.fromObj(parseCanonical(data, { maxBytes: MAX_ENVELOPE_BYTES }));
    if (!bytesEqual(env.canonical(), data)) {
      throw new CanonicalFormError("envelope does not re-encode to its bytes", { check: "envelope.form" });
    }
    return env;
  }
}

/** `EVENT_DOMAIN || JCS(envelope)`: what an event signature signs. */
export function eventSigningInput(envelopeJcs: Uint8Array): Uint8Array {
  return concatBytes(EVENT_DOMAIN, envelopeJcs);
}

/** `POP_DOMAIN || JCS({agent, key_id, origin, public_key})`: what a proof of possession signs. */
export function popSigningInput(args: {
  origin: string;
  agent: string;
  keyId: string;
  publicKey: Uint8Array;
}): Uint8Array {
  const statement = {
    origin: args.origin,
    agent: args.agent,
    key_id: args.keyId,
    public_key: base64Encode(args.publicKey),
  };
  return concatBytes(POP_DOMAIN, canonicalBytes(statement));
}

/** Sign an envelope with a 32-byte Ed25519 seed (for tests and tools: a verifier never signs). */
export function signEvent(envelope: Envelope, seed: Uint8Array): Uint8Array {
  return signWithSeed(eventSigningInput(envelope.canonical()), seed);
}

/** The `new_key` of a 32-byte Ed25519 seed, with its proof of possession for this origin
 * and agent (for tests and tools). */
export function signPop(args: { origin: string; agent: string; seed: Uint8Array }): NewKey {
  const publicKey = publicKeyFromSeed(args.seed);
  const keyId = agentKeyId(publicKey);
  const pop = signWithSeed(
    popSigningInput({ origin: args.origin, agent: args.agent, keyId, publicKey }),
    args.seed,
  );
  return new NewKey({ keyId, publicKey, pop });
}

/**
 * Throw {@link SignatureError} unless `signature` is the key's over the envelope.
 *
 * The caller has chosen `publicKey` as the key valid for `envelope.keyId` at this log
 * position (keys.ts, `KeyHistory.checkAndApply`) and that key passed checkPublicKey when it
 * was registered; the key id must match the key. `envelopeJcs` may pass the exact bytes
 * the envelope was parsed from (already proven canonical by {@link Envelope.fromBytes}, or
 * {@link Leaf.envelopeJcs}) to save re-encoding them.
 *
 * Unlike the Python verifier (OpenSSL), a key of small order that no registration checked
 * fails here (`event.signature`) even for the signatures OpenSSL accepts under it: the
 * library's strict verification refuses such keys (ed25519.ts). Registered keys never are.
 *
 * @throws MalformedError `key.public_key`: the key is not 32 bytes.
 * @throws SignatureError `event.key_id`: the envelope's key id is not that key's;
 *   `event.signature`: not 64 bytes, or does not verify.
 */
export function verifyEventSignature(
  envelope: Envelope,
  signature: Uint8Array,
  publicKey: Uint8Array,
  options: { envelopeJcs?: Uint8Array } = {},
): void {
  if (!stringsEqualCT(agentKeyId(publicKey), envelope.keyId)) {
    throw new SignatureError("envelope key_id does not belong to that public key", { check: "event.key_id" });
  }
  if (signature.length !== 64) {
    throw new SignatureError("Ed25519 signatures are 64 bytes", { check: "event.signature" });
  }
  const signed = options.envelopeJcs ?? envelope.canonical();
  if (!verifySignature(signature, eventSigningInput(signed), publicKey)) {
    throw new SignatureError(
      `event signature of ${envelope.agent}/${envelope.kind} v${envelope.version} does not verify`,
      { check: "event.signature" },
    );
  }
}

/**
 * Check the new key's proof of possession bound to this origin and agent; return the key.
 *
 * @throws MalformedError `envelope.new_key`: the envelope introduces no key.
 * @throws SignatureError `key.pop`: the proof does not verify.
 */
export function verifyPop(envelope: Envelope): NewKey {
  const nk = envelope.newKey;
  if (nk === null) throw new MalformedError("envelope introduces no key", { check: "envelope.new_key" });
  const message = popSigningInput({
    origin: envelope.origin,
    agent: envelope.agent,
    keyId: nk.keyId,
    publicKey: nk.publicKey,
  });
  if (!verifySignature(nk.pop, message, nk.publicKey)) {
    throw new SignatureError(`proof of possession for key ${nk.keyId} does not verify`, { check: "key.pop" });
  }
  return nk;
}

/**
 * Check a disclosed body against the envelope's commitment; return the parsed body.
 *
 * The body must be a canonical JSON object (at most `maxBytes`, 64 KiB by default); the
 * commitment is compared in constant time. A per-entry `memory.distilled` body may give
 * undisclosed entries as their digests ({@link commitmentOf}).
 *
 * @throws everything parseCanonical throws (`json.*`, `canonical.*`); MalformedError
 *   `body.type` (not an object), `body.salt` (not 16 bytes), `body.form` (a per-entry body
 *   of a bad form); SignatureError
 *   `body.commitment` (salt and body do not open the commitment).
 */
export function verifyBody(
  envelope: Envelope,
  salt: Uint8Array,
  body: Uint8Array,
  options: { maxBytes?: number } = {},
): { [key: string]: JSONValue } {
  const value = parseCanonical(body, { maxBytes: options.maxBytes ?? DEFAULT_MAX_BODY_BYTES });
  if (!isPlainObject(value)) throw new MalformedError("a body is a JSON object", { check: "body.type" });
  if (!stringsEqualCT(commitmentOf(envelope.kind, salt, body, value), envelope.bodyCommitment)) {
    throw new SignatureError("body does not match the signed commitment", { check: "body.commitment" });
  }
  return value as { [key: string]: JSONValue };
}

export interface LeafFields {
  index: number;
  timestampUs: number;
  envelope: Envelope;
  signature: Uint8Array;
  raw: Uint8Array;
}

/** A log leaf: index, server timestamp, the agent-signed envelope and its signature.
 * `raw` is the leaf's bytes, verbatim (what is hashed and proven). */
export class Leaf {
  readonly index: number;
  readonly timestampUs: number;
  readonly envelope: Envelope;
  readonly signature: Uint8Array;
  readonly raw: Uint8Array;

  constructor(fields: LeafFields) {
    this.index = fields.index;
    this.timestampUs = fields.timestampUs;
    this.envelope = fields.envelope;
    this.signature = fields.signature.slice();
    this.raw = fields.raw.slice();
    Object.freeze(this);
  }

  /** The RFC 9162 leaf hash of the leaf's bytes. */
  get hash(): Uint8Array {
    return leafHash(this.raw);
  }

  /** The envelope's canonical bytes, as they appear inside this leaf (what its agent signed). */
  envelopeJcs(): Uint8Array {
    return this.envelope.canonical();
  }

  private static obj(fields: {
    index: number;
    timestampUs: number;
    envelope: Envelope;
    signature: Uint8Array;
  }): Record<string, unknown> {
    return {
      format: LEAF_FORMAT,
      index: fields.index,
      timestamp_us: fields.timestampUs,
      event: fields.envelope.toObj(),
      sig: base64Encode(fields.signature),
    };
  }

  /** The leaf of these values (its bytes are their JCS encoding). */
  static build(fields: { index: number; timestampUs: number; envelope: Envelope; signature: Uint8Array }): Leaf {
    const raw = canonicalBytes(Leaf.obj(fields));
    return new Leaf({ ...fields, raw });
  }

  /**
   * Parse leaf bytes: canonical JCS, exact fields, valid envelope, bounded size.
   *
   * Steps: `leaf.size` bound (`maxBytes`, 65,535 by default); `json.*` / `canonical.*` JCS
   * form; `leaf.fields`; `leaf.format`; `envelope.index`; `envelope.timestamp_us` (>= 1);
   * `leaf.sig`; `envelope.*` ({@link Envelope.fromObj}); `leaf.origin` when the expected
   * `origin` is given; `leaf.form` (a guard). The agent signature is *not* checked here
   * (it needs the key valid at `index`): use `KeyHistory.checkAndApply` (keys.ts), or
   * {@link verifyEventSignature} with that key.
   */
  static fromBytes(data: Uint8Array, options: { maxBytes?: number; origin?: string } = {}): Leaf {
    const maxBytes = options.maxBytes ?? DEFAULT_MAX_LEAF_BYTES;
    if (data.length > maxBytes) {
      throw new LimitExceededError(`leaf of ${data.length} bytes exceeds ${maxBytes}`, { check: "leaf.size" });
    }
    const obj = parseCanonical(data, { maxBytes });
    const o = exactFields(obj, ["format", "index", "timestamp_us", "event", "sig"], [], "leaf.fields");
    if (o["format"] !== LEAF_FORMAT) {
      throw new MalformedError(`unknown leaf format ${preview(o["format"])}`, { check: "leaf.format" });
    }
    const index = intField(o, "index");
    const timestampUs = intField(o, "timestamp_us", 1);
    const sigText = o["sig"];
    if (typeof sigText !== "string") throw new MalformedError("sig must be base64", { check: "leaf.sig" });
    const signature = b64decodeStrict(sigText, "leaf.sig");
    if (signature.length !== 64) throw new MalformedError("sig must be 64 bytes", { check: "leaf.sig" });
    const envelope = Envelope.fromObj(o["event"]);
    if (options.origin !== undefined && envelope.origin !== options.origin) {
      throw new OriginMismatchError(
        `leaf names origin ${preview(envelope.origin)}, expected ${preview(options.origin)}`,
        { check: "leaf.origin" },
      );
    }
    // Exact bytes: the leaf must be what build() makes of its parsed values, so the
    // signature checked over envelope.canonical() is over the very bytes in the leaf.
    const rebuilt = canonicalBytes(Leaf.obj({ index, timestampUs, envelope, signature }));
    if (!bytesEqual(rebuilt, data)) {
      throw new CanonicalFormError("leaf does not re-encode to its bytes", { check: "leaf.form" });
    }
    return new Leaf({ index, timestampUs, envelope, signature, raw: data });
  }
}
