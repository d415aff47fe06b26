/**
 * Share tokens (specs/share-token.md): an agent's scoped, expiring, attenuable permission to
 * disclose some kinds of its records. Port of verifier/token.py's verification side.
 *
 * A share token is a Biscuit v3 token as biscuit-python 0.4.0 (biscuit-auth 6.0.0) mints
 * it. This module reads it without a Biscuit library: base64url as the Rust `base64` 0.13
 * crate decodes it, the protobuf wire format as prost 0.10 decodes it (protobuf.ts), the
 * signature chain as Biscuit defines it (signature payloads v0 and v1, Ed25519 as
 * ed25519-dalek's `verify_strict`, P-256 as the `p256` crate; p256.ts), then interprets
 * ONLY Engram's fixed templates instead of general Datalog:
 *
 * ```
 * authority:   token_format("engram.share/v1"); origin("<log>"); agent("<id>"); right("<kind>");...
 *              check if audience($a), $a == "<audience>";
 *              check if time($t), $t <= <expires>;
 * attenuation: check if kind($k), {"<kind>", ...}.contains($k);
 *              check if time($t), $t <= <sooner expiry>;
 * ```
 *
 * Checks, in the order and with the names of the Python verifier:
 *
 * 1. `token.audience`: the audience the caller verifies as is in the grammar.
 * 2. `token.format`: 1-16384 characters.
 * 3. `token.signature`: the token decodes, the authority block verifies under one of the
 *    agent's keys and every block under the key its predecessor names (and third-party
 *    blocks under their external key), the proof matches (the last block's secret, or a
 *    seal), the symbol and public key tables are disjoint (`Biscuit.from_base64`).
 * 4. `token.template`: every block after the authority block is made of the attenuation
 *    templates only (at least one check; no facts, no rules).
 * 5. `token.limits`: biscuit-auth can convert the authority block and load every block
 *    into an authorizer (every symbol, variable and trusted key index names something,
 *    every rule's head variables are in its body), as `_authority_facts` requires.
 * 6. `token.template`: the authority block is the engram.share/v1 template and its
 *    `token_format`, `origin` and `agent` facts are exactly the expected ones.
 * 7. `token.revoked`: none of the token's revocation ids (the hex of each block's signature)
 *    is revoked.
 * 8. `token.kinds` / `token.scope`: for each kind, in sorted order, the kind is a kind name
 *    and the token allows disclosing it to the audience at the time given (its rights, the
 *    audience check, every expiry and every kind restriction).
 *
 * Where this port answers differently from the Python verifier (README, "Share tokens"):
 * biscuit-python evaluates the authority block as general Datalog and checks attenuation
 * blocks by their printed source; this port accepts only blocks that are the templates, so
 * a token whose blocks merely print like them, or whose authority block is other Datalog,
 * fails `token.template` here. A token with an attenuation block that biscuit-auth cannot
 * convert makes the Python verifier raise an exception that is not a VerificationError; this
 * port fails `token.template`.
 */

import { bytesEqual, concatBytes, toHex, utf8 } from "./bytes.js";
import { isDalekPoint, publicKeyFromSeed, verifyDalekStrict } from "./ed25519.js";
import { MalformedError, SignatureError, VerificationError } from "./errors.js";
import { compareCodePoints } from "./mesh.js";
import * as p256 from "./p256.js";
import {
  ProtobufError,
  decodeMessage,
  schema,
  type DecodedMessage,
  type MessageSchema,
  type OneofValue,
} from "./protobuf.js";

export const TOKEN_FORMAT = "engram.share/v1";
export const MAX_TOKEN_CHARS = 16 * 1024;
const KIND = /^[a-z][a-z0-9_.]{0,63}$/;
export const AUDIENCE = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$/;
/** The largest expiry an attenuation block may state: it prints as at most 12 digits. */
const MAX_ATTENUATION_EXPIRY = 999_999_999_999n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

/** The share token does not allow this disclosure (scope, audience, expiry, revocation). */
export class TokenError extends VerificationError {
  static override readonly defaultCheck: string = "token";
}

export interface VerifiedToken {
  readonly agent: string;
  readonly origin: string;
  readonly audience: string;
  /** The kinds this token allows, for this audience, at this time (sorted). */
  readonly kinds: readonly string[];
  /** Hex revocation ids, the authority block's first (revoking it revokes every token
   * attenuated from it). */
  readonly revocationIds: readonly string[];
  /** The agent key the authority block verified under. */
  readonly rootKey: Uint8Array;
}

// -- base64url (the Rust `base64` crate 0.13, URL_SAFE) ------------------------------------------

const URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const URL_VALUES: ReadonlyMap<string, number> = new Map([...URL_ALPHABET].map((c, i) => [c, i]));

/**
 * Decode URL-safe base64 as `base64::decode_config(text, URL_SAFE)` of the base64 crate 0.13
 * does (what biscuit-auth 6.0.0 calls), or return null: a length of 1 or 5 modulo 8 is
 * refused; '=' may appear only in the last (up to 8-character) chunk, after at least two
 * symbols of its quad, and no symbol follows a '='; padding may be absent or partial; the
 * unused low bits of the last symbol must be zero.
 */
export function decodeBase64Url(text: string): Uint8Array | null {
  const n = text.length;
  const rem = n % 8;
  if (rem === 1 || rem === 5) return null;
  const lastStart = rem === 0 ? Math.max(0, n - 8) : n - rem;
  const morsels: number[] = [];
  for (let i = 0; i < lastStart; i++) {
    const v = URL_VALUES.get(text[i] as string);
    if (v === undefined) return null;
    morsels.push(v);
  }
  let padding = 0;
  for (let i = lastStart; i < n; i++) {
    const c = text[i] as string;
    if (c === "=") {
      if ((i - lastStart) % 4 < 2) return null;
      padding++;
      continue;
    }
    if (padding > 0) return null;
    const v = URL_VALUES.get(c);
    if (v === undefined) return null;
    morsels.push(v);
  }
  const out = new Uint8Array(Math.floor((morsels.length * 6) / 8));
  let acc = 0;
  let bits = 0;
  let at = 0;
  for (const m of morsels) {
    acc = ((acc << 6) | m) & 0xffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[at++] = (acc >> bits) & 0xff;
    }
  }
  if (bits > 0 && (acc & ((1 << bits) - 1)) !== 0) return null; // trailing bits set
  return out;
}

// -- the protobuf schema of biscuit-auth 6.0.0 (eclipse-biscuit/biscuit schema.proto) ------------

const f = (
  name: string,
  type: "uint32" | "int32" | "uint64" | "int64" | "bool" | "enum" | "bytes" | "string" | "message",
  opts: { message?: () => MessageSchema; repeated?: boolean; required?: boolean; oneof?: string } = {},
) => ({ name, type, ...opts });

const S: Record<string, MessageSchema> = {};
S["PublicKey"] = schema("PublicKey", [
  [1, f("algorithm", "enum", { required: true })],
  [2, f("key", "bytes", { required: true })],
]);
S["ExternalSignature"] = schema("ExternalSignature", [
  [1, f("signature", "bytes", { required: true })],
  [2, f("publicKey", "message", { message: () => S["PublicKey"] as MessageSchema, required: true })],
]);
S["SignedBlock"] = schema("SignedBlock", [
  [1, f("block", "bytes", { required: true })],
  [2, f("nextKey", "message", { message: () => S["PublicKey"] as MessageSchema, required: true })],
  [3, f("signature", "bytes", { required: true })],
  [4, f("externalSignature", "message", { message: () => S["ExternalSignature"] as MessageSchema })],
  [5, f("version", "uint32")],
]);
S["Proof"] = schema("Proof", [
  [1, f("nextSecret", "bytes", { oneof: "content" })],
  [2, f("finalSignature", "bytes", { oneof: "content" })],
]);
S["Biscuit"] = schema("Biscuit", [
  [1, f("rootKeyId", "uint32")],
  [2, f("authority", "message", { message: () => S["SignedBlock"] as MessageSchema, required: true })],
  [3, f("blocks", "message", { message: () => S["SignedBlock"] as MessageSchema, repeated: true })],
  [4, f("proof", "message", { message: () => S["Proof"] as MessageSchema, required: true })],
]);
S["Scope"] = schema("Scope", [
  [1, f("scopeType", "enum", { oneof: "content" })],
  [2, f("publicKey", "int64", { oneof: "content" })],
]);
S["Empty"] = schema("Empty", []);
S["TermSet"] = schema("TermSet", [[1, f("set", "message", { message: () => S["TermV2"] as MessageSchema, repeated: true })]]);
S["Array"] = schema("Array", [[1, f("array", "message", { message: () => S["TermV2"] as MessageSchema, repeated: true })]]);
S["MapKey"] = schema("MapKey", [
  [1, f("integer", "int64", { oneof: "content" })],
  [2, f("string", "uint64", { oneof: "content" })],
]);
S["MapEntry"] = schema("MapEntry", [
  [1, f("key", "message", { message: () => S["MapKey"] as MessageSchema, required: true })],
  [2, f("value", "message", { message: () => S["TermV2"] as MessageSchema, required: true })],
]);
S["Map"] = schema("Map", [[1, f("entries", "message", { message: () => S["MapEntry"] as MessageSchema, repeated: true })]]);
S["TermV2"] = schema("TermV2", [
  [1, f("variable", "uint32", { oneof: "content" })],
  [2, f("integer", "int64", { oneof: "content" })],
  [3, f("string", "uint64", { oneof: "content" })],
  [4, f("date", "uint64", { oneof: "content" })],
  [5, f("bytes", "bytes", { oneof: "content" })],
  [6, f("bool", "bool", { oneof: "content" })],
  [7, f("set", "message", { message: () => S["TermSet"] as MessageSchema, oneof: "content" })],
  [8, f("null", "message", { message: () => S["Empty"] as MessageSchema, oneof: "content" })],
  [9, f("array", "message", { message: () => S["Array"] as MessageSchema, oneof: "content" })],
  [10, f("map", "message", { message: () => S["Map"] as MessageSchema, oneof: "content" })],
]);
S["PredicateV2"] = schema("PredicateV2", [
  [1, f("name", "uint64", { required: true })],
  [2, f("terms", "message", { message: () => S["TermV2"] as MessageSchema, repeated: true })],
]);
S["OpUnary"] = schema("OpUnary", [
  [1, f("kind", "enum", { required: true })],
  [2, f("ffiName", "uint64")],
]);
S["OpBinary"] = schema("OpBinary", [
  [1, f("kind", "enum", { required: true })],
  [2, f("ffiName", "uint64")],
]);
S["OpClosure"] = schema("OpClosure", [
  [1, f("params", "uint32", { repeated: true })],
  [2, f("ops", "message", { message: () => S["Op"] as MessageSchema, repeated: true })],
]);
S["Op"] = schema("Op", [
  [1, f("value", "message", { message: () => S["TermV2"] as MessageSchema, oneof: "content" })],
  [2, f("unary", "message", { message: () => S["OpUnary"] as MessageSchema, oneof: "content" })],
  [3, f("binary", "message", { message: () => S["OpBinary"] as MessageSchema, oneof: "content" })],
  [4, f("closure", "message", { message: () => S["OpClosure"] as MessageSchema, oneof: "content" })],
]);
S["ExpressionV2"] = schema("ExpressionV2", [
  [1, f("ops", "message", { message: () => S["Op"] as MessageSchema, repeated: true })],
]);
S["RuleV2"] = schema("RuleV2", [
  [1, f("head", "message", { message: () => S["PredicateV2"] as MessageSchema, required: true })],
  [2, f("body", "message", { message: () => S["PredicateV2"] as MessageSchema, repeated: true })],
  [3, f("expressions", "message", { message: () => S["ExpressionV2"] as MessageSchema, repeated: true })],
  [4, f("scope", "message", { message: () => S["Scope"] as MessageSchema, repeated: true })],
]);
S["CheckV2"] = schema("CheckV2", [
  [1, f("queries", "message", { message: () => S["RuleV2"] as MessageSchema, repeated: true })],
  [2, f("kind", "enum")],
]);
S["FactV2"] = schema("FactV2", [
  [1, f("predicate", "message", { message: () => S["PredicateV2"] as MessageSchema, required: true })],
]);
S["Block"] = schema("Block", [
  [1, f("symbols", "string", { repeated: true })],
  [2, f("context", "string")],
  [3, f("version", "uint32")],
  [4, f("facts", "message", { message: () => S["FactV2"] as MessageSchema, repeated: true })],
  [5, f("rules", "message", { message: () => S["RuleV2"] as MessageSchema, repeated: true })],
  [6, f("checks", "message", { message: () => S["CheckV2"] as MessageSchema, repeated: true })],
  [7, f("scope", "message", { message: () => S["Scope"] as MessageSchema, repeated: true })],
  [8, f("publicKeys", "message", { message: () => S["PublicKey"] as MessageSchema, repeated: true })],
]);

// Typed views of decoded messages.
const msgs = (m: DecodedMessage, name: string): DecodedMessage[] => (m[name] as DecodedMessage[] | undefined) ?? [];
const sub = (m: DecodedMessage, name: string): DecodedMessage => m[name] as DecodedMessage;
const oneof = (m: DecodedMessage): OneofValue | undefined => m["content"] as OneofValue | undefined;

// -- keys and signatures -------------------------------------------------------------------------

const ALG_ED25519 = 0;
const ALG_SECP256R1 = 1;

/** A Biscuit public key: Ed25519 (the 32 bytes as given, which are what is signed over and
 * compared) or P-256 (the point; signed over in compressed form). */
type BiscuitKey =
  | { readonly alg: typeof ALG_ED25519; readonly bytes: Uint8Array }
  | { readonly alg: typeof ALG_SECP256R1; readonly point: p256.AffinePoint };

/** biscuit-auth's `PublicKey::from_proto`, or null. */
function parseKey(proto: DecodedMessage): BiscuitKey | null {
  const alg = proto["algorithm"] as number;
  const key = proto["key"] as Uint8Array;
  if (alg === ALG_ED25519) return isDalekPoint(key) ? { alg, bytes: key } : null;
  if (alg === ALG_SECP256R1) {
    const point = p256.parsePublicKey(key);
    return point === null ? null : { alg, point };
  }
  return null;
}

function keyBytes(k: BiscuitKey): Uint8Array {
  return k.alg === ALG_ED25519 ? k.bytes : p256.compressPublicKey(k.point);
}

function keysEqual(a: BiscuitKey, b: BiscuitKey): boolean {
  if (a.alg === ALG_ED25519) return b.alg === ALG_ED25519 && bytesEqual(a.bytes, b.bytes);
  return b.alg === ALG_SECP256R1 && p256.pointsEqual(a.point, b.point);
}

function verifyWith(k: BiscuitKey, signature: Uint8Array, message: Uint8Array): boolean {
  return k.alg === ALG_ED25519 ? verifyDalekStrict(signature, message, k.bytes) : p256.verifyEcdsa(signature, message, k.point);
}

/** The public key of a proof's secret for the algorithm of the last key, or null. */
function keyOfSecret(alg: number, secret: Uint8Array): BiscuitKey | null {
  if (secret.length !== 32) return null;
  if (alg === ALG_ED25519) return { alg, bytes: publicKeyFromSeed(secret) };
  const point = p256.publicKeyFromSecret(secret);
  return point === null ? null : { alg: ALG_SECP256R1, point };
}

const le32 = (n: number): Uint8Array => {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n >>> 0, true);
  return out;
};
const TAG = (s: string): Uint8Array => utf8(s);

interface SignedBlock {
  readonly data: Uint8Array;
  readonly nextKey: BiscuitKey;
  readonly signature: Uint8Array;
  readonly external: { readonly key: BiscuitKey; readonly signature: Uint8Array } | null;
  readonly version: number;
}

/** Signature payloads (Biscuit specification, "Signed payload generation"). */
function blockPayload(b: SignedBlock, previous: Uint8Array | null): Uint8Array {
  const alg = le32(b.nextKey.alg);
  const next = keyBytes(b.nextKey);
  if (b.version === 0) {
    return concatBytes(b.data, b.external?.signature ?? new Uint8Array(0), alg, next);
  }
  const parts = [TAG("\0BLOCK\0\0VERSION\0"), le32(b.version), TAG("\0PAYLOAD\0"), b.data];
  parts.push(TAG("\0ALGORITHM\0"), alg, TAG("\0NEXTKEY\0"), next);
  if (previous !== null) {
    parts.push(TAG("\0PREVSIG\0"), previous);
    if (b.external !== null) parts.push(TAG("\0EXTERNALSIG\0"), b.external.signature);
  }
  return concatBytes(...parts);
}

function externalPayload(b: SignedBlock, previous: Uint8Array): Uint8Array {
  return concatBytes(TAG("\0EXTERNAL\0\0VERSION\0"), le32(b.version), TAG("\0PAYLOAD\0"), b.data, TAG("\0PREVSIG\0"), previous);
}

// -- loading (Biscuit::from_base64) ---------------------------------------------------------------

const DEFAULT_SYMBOLS: readonly string[] = [
  "read", "write", "resource", "operation", "right", "time", "role", "owner", "tenant", "namespace",
  "user", "team", "service", "admin", "email", "group", "member", "ip_address", "client", "client_ip",
  "domain", "path", "version", "cluster", "node", "hostname", "nonce", "query",
];
const DEFAULT_SET: ReadonlySet<string> = new Set(DEFAULT_SYMBOLS);
const OFFSET = 1024n;

/** A symbol table: the default symbols (0-27) and the custom ones from index 1024. */
class Symbols {
  constructor(
    readonly custom: readonly string[],
    readonly keys: readonly BiscuitKey[],
  ) {}

  get(index: bigint): string | undefined {
    if (index < OFFSET) return index < BigInt(DEFAULT_SYMBOLS.length) ? DEFAULT_SYMBOLS[Number(index)] : undefined;
    const i = index - OFFSET;
    return i < BigInt(this.custom.length) ? this.custom[Number(i)] : undefined;
  }
}

interface LoadedBlock {
  readonly signed: SignedBlock;
  readonly block: DecodedMessage;
  /** The table the block's symbols resolve in (its own for a third-party block). */
  readonly symbols: Symbols;
}

/** A failure where biscuit-python's `Biscuit.from_base64` fails (`token.signature`). */
class LoadError extends Error {}

function fail(message: string): never {
  throw new LoadError(message);
}

function decodeBlock(data: Uint8Array): DecodedMessage {
  try {
    return decodeMessage(data, S["Block"] as MessageSchema);
  } catch (e) {
    if (e instanceof ProtobufError) fail(`block: ${e.message}`);
    throw e;
  }
}

/** Decode and verify everything that does not depend on the root key; return the blocks
 * and a function checking the authority signature under a candidate root key. */
function load(token: string): { blocks: LoadedBlock[]; verifyRoot: (key: Uint8Array) => boolean } {
  const raw = decodeBase64Url(token);
  if (raw === null) fail("not base64url");
  let wrapper: DecodedMessage;
  try {
    wrapper = decodeMessage(raw, S["Biscuit"] as MessageSchema);
  } catch (e) {
    if (e instanceof ProtobufError) fail(`token: ${e.message}`);
    throw e;
  }
  const signedOf = (m: DecodedMessage, authority: boolean): SignedBlock => {
    const nextKey = parseKey(sub(m, "nextKey")) ?? fail("bad next key");
    const version = m["version"] as number | undefined;
    let external: SignedBlock["external"] = null;
    const ext = m["externalSignature"] as DecodedMessage | undefined;
    if (ext !== undefined) {
      if (authority) fail("the authority block must not contain an external signature");
      if (version !== 1) fail("unsupported third party block version");
      const key = parseKey(sub(ext, "publicKey")) ?? fail("bad external key");
      external = { key, signature: ext["signature"] as Uint8Array };
    }
    return { data: m["block"] as Uint8Array, nextKey, signature: m["signature"] as Uint8Array, external, version: version ?? 0 };
  };
  const signed = [signedOf(sub(wrapper, "authority"), true), ...msgs(wrapper, "blocks").map((b) => signedOf(b, false))];
  const last = signed[signed.length - 1] as SignedBlock;
  const proof = oneof(sub(wrapper, "proof")) ?? fail("could not find proof");
  const proofValue = proof.value as Uint8Array;
  let secretKey: BiscuitKey | null = null;
  if (proof.field === "nextSecret") secretKey = keyOfSecret(last.nextKey.alg, proofValue) ?? fail("bad proof secret");

  // Signatures (SerializedBiscuit::verify, but for the root key).
  for (const b of signed) if (b.version !== 0 && b.version !== 1) fail(`unsupported block version ${b.version}`);
  for (let i = 1; i < signed.length; i++) {
    const b = signed[i] as SignedBlock;
    const prev = signed[i - 1] as SignedBlock;
    if (!verifyWith(prev.nextKey, b.signature, blockPayload(b, prev.signature))) fail(`block ${i} signature`);
    if (b.external !== null && !verifyWith(b.external.key, b.external.signature, externalPayload(b, prev.signature))) {
      fail(`block ${i} external signature`);
    }
  }
  if (secretKey !== null) {
    if (!keysEqual(secretKey, last.nextKey)) fail("the last public key does not match the private key");
  } else {
    const seal = concatBytes(last.data, le32(last.nextKey.alg), keyBytes(last.nextKey), last.signature);
    if (!verifyWith(last.nextKey, proofValue, seal)) fail("seal signature");
  }

  // Blocks and symbol tables (SerializedBiscuit::extract_blocks).
  const custom: string[] = [];
  const keys: BiscuitKey[] = [];
  const decoded = signed.map((b) => decodeBlock(b.data));
  decoded.forEach((block, i) => {
    if ((signed[i] as SignedBlock).external !== null) return;
    const symbols = block["symbols"] as string[];
    if (symbols.some((s) => DEFAULT_SET.has(s))) fail("symbol table overlap (default symbols)");
    const seen = new Set(custom);
    if (symbols.some((s) => seen.has(s))) fail("symbol table overlap");
    custom.push(...symbols);
    for (const pk of msgs(block, "publicKeys")) {
      const key = parseKey(pk) ?? fail("bad public key in a block");
      if (keys.some((k) => keysEqual(k, key))) fail("public key table overlap");
      keys.push(key);
    }
  });
  const tokenSymbols = new Symbols(custom, keys);
  const blocks = decoded.map((block, i): LoadedBlock => {
    const s = signed[i] as SignedBlock;
    if (s.external === null) return { signed: s, block, symbols: tokenSymbols };
    // A third-party block resolves in its own table (checked when it is converted).
    const own: BiscuitKey[] = [];
    for (const pk of msgs(block, "publicKeys")) {
      const key = parseKey(pk);
      if (key !== null) own.push(key);
    }
    return { signed: s, block, symbols: new Symbols(block["symbols"] as string[], own) };
  });
  const authority = signed[0] as SignedBlock;
  const verifyRoot = (rootKey: Uint8Array): boolean =>
    rootKey.length === 32 &&
    isDalekPoint(rootKey) &&
    verifyWith({ alg: ALG_ED25519, bytes: rootKey }, authority.signature, blockPayload(authority, null));
  return { blocks, verifyRoot };
}

// -- the templates -------------------------------------------------------------------------------

type TemplateCheck =
  | { readonly kind: "audience"; readonly value: string }
  | { readonly kind: "time"; readonly expires: bigint }
  | { readonly kind: "kinds"; readonly values: ReadonlySet<string> };

const BIN_LESS_OR_EQUAL = 2;
const BIN_EQUAL = 4;
const BIN_CONTAINS = 5;
const BIN_HETEROGENEOUS_EQUAL = 21;

/** The check is not a template. */
class NotTemplate extends Error {}

/** A term's oneof member and value, or null. */
function termOf(term: DecodedMessage | undefined): OneofValue | null {
  return term === undefined ? null : (oneof(term) ?? null);
}

/** The template a check is, as printed by biscuit-auth (attenuation) or as read here
 * (authority). `attenuation`: names must be exactly `kind($k)` / `time($t)`, kinds in the
 * kind grammar, expiries of 1-12 digits, as `_ATTENUATION_LINES` of verifier/token.py require
 * of the printed line; otherwise any variable name and the audience check are allowed. */
function matchCheck(check: DecodedMessage, symbols: Symbols, attenuation: boolean): TemplateCheck {
  const kindField = check["kind"] as number | undefined;
  if (kindField !== undefined && kindField !== 0) throw new NotTemplate();
  const queries = msgs(check, "queries");
  if (queries.length !== 1) throw new NotTemplate();
  const q = queries[0] as DecodedMessage;
  const head = sub(q, "head");
  const body = msgs(q, "body");
  const exprs = msgs(q, "expressions");
  if (msgs(head, "terms").length !== 0 || body.length !== 1 || exprs.length !== 1 || msgs(q, "scope").length !== 0) {
    throw new NotTemplate();
  }
  const pred = body[0] as DecodedMessage;
  const predTerms = msgs(pred, "terms");
  if (predTerms.length !== 1) throw new NotTemplate();
  const bodyVar = termOf(predTerms[0]);
  const ops = msgs(exprs[0] as DecodedMessage, "ops");
  if (bodyVar?.field !== "variable" || ops.length !== 3) throw new NotTemplate();
  const op = (i: number): OneofValue => oneof(ops[i] as DecodedMessage) ?? ({ field: "", value: 0 } as OneofValue);
  const [o0, o1, o2] = [op(0), op(1), op(2)];
  if (o2.field !== "binary" || (o2.value as DecodedMessage)["ffiName"] !== undefined) throw new NotTemplate();
  const binary = (o2.value as DecodedMessage)["kind"] as number;
  if (o0.field !== "value" || o1.field !== "value") throw new NotTemplate();
  const t0 = termOf(o0.value as DecodedMessage);
  const t1 = termOf(o1.value as DecodedMessage);
  const name = (index: bigint): string => {
    const s = symbols.get(index);
    if (s === undefined) throw new NotTemplate();
    return s;
  };
  const predName = name(pred["name"] as bigint);
  const varName = name(BigInt(bodyVar.value as number));
  const sameVar = (t: OneofValue | null): boolean => t?.field === "variable" && name(BigInt(t.value as number)) === varName;
  let template: TemplateCheck;
  if (binary === BIN_CONTAINS && t0?.field === "set" && sameVar(t1)) {
    const values = new Set<string>();
    const elements = msgs(t0.value as DecodedMessage, "set");
    if (attenuation && elements.length === 0) throw new NotTemplate();
    for (const e of elements) {
      const t = termOf(e);
      if (t?.field !== "string") throw new NotTemplate();
      const s = name(t.value as bigint);
      if (attenuation && !KIND.test(s)) throw new NotTemplate();
      values.add(s);
    }
    if (predName !== "kind" || (attenuation && varName !== "k")) throw new NotTemplate();
    template = { kind: "kinds", values };
  } else if (binary === BIN_LESS_OR_EQUAL && sameVar(t0) && t1?.field === "integer") {
    const expires = t1.value as bigint;
    if (predName !== "time" || (attenuation && (varName !== "t" || expires < 0n || expires > MAX_ATTENUATION_EXPIRY))) {
      throw new NotTemplate();
    }
    template = { kind: "time", expires };
  } else if (
    !attenuation &&
    (binary === BIN_EQUAL || binary === BIN_HETEROGENEOUS_EQUAL) &&
    sameVar(t0) &&
    t1?.field === "string"
  ) {
    if (predName !== "audience") throw new NotTemplate();
    template = { kind: "audience", value: name(t1.value as bigint) };
  } else {
    throw new NotTemplate();
  }
  return template;
}

// -- what biscuit-auth can read -----------------------------------------------------------------

const V3_1_BINARY: ReadonlySet<number> = new Set([17, 18, 19, 20]); // bitwise and, or, xor; !=
/** Binary kinds biscuit-auth 6.0.0 counts as datalog v3.3 (heterogeneous ==, !=, lazy and /
 * or, all, any, ffi; not get or try_or) and the largest kind it knows (try_or). */
const V3_3_BINARY: ReadonlySet<number> = new Set([21, 22, 23, 24, 25, 26, 28]);
const MAX_BINARY = 29;
const UNARY_FFI = 4;
const BINARY_FFI = 28;

class Unreadable extends Error {}

function unreadable(message: string): never {
  throw new Unreadable(message);
}

/** proto_id_to_token_term: every term has content; a set holds no variable, no set, and
 * elements of one type. */
function convertTerm(term: DecodedMessage): void {
  const t = oneof(term) ?? unreadable("empty term");
  if (t.field === "set") {
    let kind: string | null = null;
    for (const e of msgs(t.value as DecodedMessage, "set")) {
      const c = oneof(e) ?? unreadable("empty term");
      if (c.field === "variable" || c.field === "set") unreadable("a set holds a variable or a set");
      if (kind !== null && kind !== c.field) unreadable("set elements of two types");
      kind = c.field;
      convertTerm(e);
    }
  } else if (t.field === "array") {
    for (const e of msgs(t.value as DecodedMessage, "array")) convertTerm(e);
  } else if (t.field === "map") {
    for (const entry of msgs(t.value as DecodedMessage, "entries")) {
      if (oneof(sub(entry, "key")) === undefined) unreadable("empty map key");
      convertTerm(sub(entry, "value"));
    }
  }
}

function convertOp(op: DecodedMessage): void {
  const o = oneof(op) ?? unreadable("empty op");
  const m = o.value as DecodedMessage;
  if (o.field === "value") convertTerm(m);
  else if (o.field === "closure") for (const inner of msgs(m, "ops")) convertOp(inner);
  else {
    const kind = m["kind"] as number;
    const [max, ffi] = o.field === "unary" ? [UNARY_FFI, UNARY_FFI] : [MAX_BINARY, BINARY_FFI];
    if (kind < 0 || kind > max) unreadable(`${o.field} operation ${kind}`);
    if ((kind === ffi) !== (m["ffiName"] !== undefined)) unreadable("ffi name");
  }
}

function convertScope(scope: DecodedMessage): void {
  const c = oneof(scope) ?? unreadable("empty scope");
  if (c.field === "scopeType" && c.value !== 0 && c.value !== 1) unreadable(`scope type ${String(c.value)}`);
}

function convertPredicate(p: DecodedMessage): void {
  for (const t of msgs(p, "terms")) convertTerm(t);
}

function convertRule(rule: DecodedMessage, version: number): void {
  msgs(rule, "body").forEach(convertPredicate);
  for (const e of msgs(rule, "expressions")) for (const op of msgs(e, "ops")) convertOp(op);
  if (version < 4 && msgs(rule, "scope").length > 0) unreadable("scopes need datalog v3.1");
  msgs(rule, "scope").forEach(convertScope);
  convertPredicate(sub(rule, "head"));
}

/** datalog/mod.rs contains_v3_3_term: null, or a set holding null. */
function isV33Term(term: DecodedMessage): boolean {
  const t = oneof(term);
  if (t?.field === "null") return true;
  return t?.field === "set" && msgs(t.value as DecodedMessage, "set").some((e) => oneof(e)?.field === "null");
}

function opsOf(rule: DecodedMessage): DecodedMessage[] {
  return msgs(rule, "expressions").flatMap((e) => msgs(e, "ops"));
}

function isV33Op(op: DecodedMessage): boolean {
  const o = oneof(op) as OneofValue;
  const m = o.value as DecodedMessage;
  if (o.field === "value") return isV33Term(m);
  if (o.field === "closure") return true;
  if (o.field === "unary") return m["kind"] === 3 || m["kind"] === UNARY_FFI; // type_of, ffi
  return V3_3_BINARY.has(m["kind"] as number);
}

/** Why biscuit-auth 6.0.0 cannot convert the block (format/convert.rs
 * proto_block_to_token_block, datalog/mod.rs get_schema_version), or null if it can. */
function conversionError(b: LoadedBlock): string | null {
  const block = b.block;
  const version = (block["version"] as number | undefined) ?? 0;
  try {
    if (version < 3 || version > 6) unreadable(`block version ${version}`);
    for (const fact of msgs(block, "facts")) convertPredicate(sub(fact, "predicate"));
    for (const rule of msgs(block, "rules")) convertRule(rule, version);
    const checks = msgs(block, "checks");
    for (const c of checks) {
      const kind = c["kind"] as number | undefined;
      if (version < 4 && kind !== undefined) unreadable("check kinds need datalog v3.1");
      if (version < 6 && kind === 2) unreadable("reject if needs datalog v3.3");
    }
    if (version < 5 && b.signed.external !== null) unreadable("third-party blocks need datalog v3.2");
    for (const c of checks) {
      for (const q of msgs(c, "queries")) convertRule(q, version);
      const kind = c["kind"] as number | undefined;
      if (kind !== undefined && (kind < 0 || kind > 2)) unreadable("check kind");
    }
    msgs(block, "scope").forEach(convertScope);
    const own: BiscuitKey[] = [];
    for (const pk of msgs(block, "publicKeys")) {
      const key = parseKey(pk) ?? unreadable("public key");
      if (own.some((k) => keysEqual(k, key))) unreadable("a public key twice");
      own.push(key);
    }
    if ((block["symbols"] as string[]).some((s) => DEFAULT_SET.has(s))) unreadable("symbol table overlap");
    // get_schema_version, check_compatibility
    const rules = msgs(block, "rules");
    const queries = checks.flatMap((c) => msgs(c, "queries"));
    const scopes =
      msgs(block, "scope").length > 0 || [...rules, ...queries].some((r) => msgs(r, "scope").length > 0);
    const checkAll = checks.some((c) => c["kind"] === 1);
    const v31 = [...rules, ...queries].some((r) =>
      opsOf(r).some((o) => oneof(o)?.field === "binary" && V3_1_BINARY.has((oneof(o)?.value as DecodedMessage)["kind"] as number)),
    );
    const v33 =
      checks.some((c) => c["kind"] === 2) ||
      rules.some(
        (r) =>
          msgs(sub(r, "head"), "terms").some(isV33Term) ||
          msgs(r, "body").some((p) => msgs(p, "terms").some(isV33Term)) ||
          opsOf(r).some(isV33Op),
      ) ||
      queries.some((q) => msgs(q, "body").some((p) => msgs(p, "terms").some(isV33Term)) || opsOf(q).some(isV33Op)) ||
      msgs(block, "facts").some((fact) => msgs(sub(fact, "predicate"), "terms").some(isV33Term));
    if (version < 4 && (scopes || v31 || checkAll)) unreadable("datalog v3.1 features");
    if (version >= 4 && version < 6 && v33) unreadable("datalog v3.3 features");
  } catch (e) {
    if (e instanceof Unreadable) return e.message;
    throw e;
  }
  return null;
}

/** Whether an authorizer can load the block (load_and_translate_block): every symbol it uses
 * (names, strings, variables, closure parameters, ffi names) and every `trusting` key index
 * exists in the block's tables, and every rule's head variables appear in its body. */
function translatable(b: LoadedBlock): boolean {
  const s = b.symbols;
  const known = (i: bigint | number): boolean => s.get(BigInt(i)) !== undefined;
  const term = (t: DecodedMessage): boolean => {
    const c = oneof(t) as OneofValue;
    switch (c.field) {
      case "variable":
      case "string":
        return known(c.value as number | bigint);
      case "set":
        return msgs(c.value as DecodedMessage, "set").every(term);
      case "array":
        return msgs(c.value as DecodedMessage, "array").every(term);
      case "map":
        return msgs(c.value as DecodedMessage, "entries").every((e) => {
          const k = oneof(sub(e, "key")) as OneofValue;
          return (k.field !== "string" || known(k.value as bigint)) && term(sub(e, "value"));
        });
      default:
        return true;
    }
  };
  const op = (o: DecodedMessage): boolean => {
    const c = oneof(o) as OneofValue;
    const m = c.value as DecodedMessage;
    if (c.field === "value") return term(m);
    if (c.field === "closure") return (m["params"] as number[]).every(known) && msgs(m, "ops").every(op);
    return m["ffiName"] === undefined || known(m["ffiName"] as bigint);
  };
  const scope = (sc: DecodedMessage): boolean => {
    const c = oneof(sc) as OneofValue;
    return c.field !== "publicKey" || BigInt.asUintN(64, c.value as bigint) < BigInt(s.keys.length);
  };
  const predicate = (p: DecodedMessage): boolean => known(p["name"] as bigint) && msgs(p, "terms").every(term);
  const rule = (r: DecodedMessage): boolean =>
    predicate(sub(r, "head")) && msgs(r, "body").every(predicate) && opsOf(r).every(op) && msgs(r, "scope").every(scope);
  const vars = (p: DecodedMessage): number[] =>
    msgs(p, "terms").flatMap((t) => (oneof(t)?.field === "variable" ? [oneof(t)?.value as number] : []));
  const safe = (r: DecodedMessage): boolean => {
    const body = new Set(msgs(r, "body").flatMap(vars));
    return vars(sub(r, "head")).every((v) => body.has(v));
  };
  return (
    msgs(b.block, "scope").every(scope) &&
    msgs(b.block, "facts").every((f) => predicate(sub(f, "predicate"))) &&
    msgs(b.block, "rules").every((r) => safe(r) && rule(r)) &&
    msgs(b.block, "checks").every((c) => msgs(c, "queries").every(rule))
  );
}

interface Interpreted {
  readonly formats: string[];
  readonly origins: string[];
  readonly agents: string[];
  readonly rights: ReadonlySet<string>;
  readonly checks: readonly TemplateCheck[];
}

const AUTHORITY_FACTS: ReadonlySet<string> = new Set(["token_format", "origin", "agent", "right"]);

/** verifier/token.py `_check_templates`: every block after the first is one of the two
 * attenuation templates (`token.template`); returns their checks. A block biscuit-auth cannot
 * convert makes the Python verifier raise (not a VerificationError): `token.template` here. */
function attenuations(blocks: readonly LoadedBlock[]): TemplateCheck[] {
  const checks: TemplateCheck[] = [];
  for (let i = 1; i < blocks.length; i++) {
    const b = blocks[i] as LoadedBlock;
    const notAttenuation = (): never => {
      throw new TokenError(`block ${i} is not an engram.share/v1 attenuation`, { check: "token.template" });
    };
    if (conversionError(b) !== null) notAttenuation();
    const blockChecks = msgs(b.block, "checks");
    if (msgs(b.block, "facts").length || msgs(b.block, "rules").length || blockChecks.length === 0) notAttenuation();
    for (const c of blockChecks) {
      try {
        checks.push(matchCheck(c, b.symbols, true));
      } catch (e) {
        if (e instanceof NotTemplate) notAttenuation();
        throw e;
      }
    }
  }
  return checks;
}

/**
 * Interpret a loaded token: the attenuation templates (`token.template`), then the authority
 * block (`token.limits` where biscuit-auth could not load the blocks into an authorizer, as
 * verifier/token.py `_authority_facts`; `token.template` if it is not Engram's template).
 */
function interpret(blocks: readonly LoadedBlock[]): Interpreted {
  const checks = attenuations(blocks);
  // _authority_facts: an authorizer converts the authority block and loads every block.
  const a = blocks[0] as LoadedBlock;
  if (conversionError(a) !== null || !blocks.every(translatable)) {
    throw new TokenError("the token cannot be evaluated: the authorizer cannot load its blocks", {
      check: "token.limits",
    });
  }
  // The authority block: Engram's template (this port's rule; see the module doc).
  const notTemplate = (): never => {
    throw new TokenError("the token is not an engram.share/v1 token of this agent and log", {
      check: "token.template",
    });
  };
  if (msgs(a.block, "rules").length) notTemplate();
  const facts: [string, string][] = [];
  for (const fact of msgs(a.block, "facts")) {
    const pred = sub(fact, "predicate");
    const terms = msgs(pred, "terms");
    const t = termOf(terms[0]);
    if (terms.length !== 1 || t?.field !== "string") notTemplate();
    const name = a.symbols.get(pred["name"] as bigint) as string;
    if (!AUTHORITY_FACTS.has(name)) notTemplate();
    facts.push([name, a.symbols.get((t as OneofValue).value as bigint) as string]);
  }
  const authorityChecks: TemplateCheck[] = [];
  for (const c of msgs(a.block, "checks")) {
    try {
      authorityChecks.push(matchCheck(c, a.symbols, false));
    } catch (e) {
      if (e instanceof NotTemplate) notTemplate();
      throw e;
    }
  }
  const values = (name: string): string[] =>
    [...new Set(facts.filter(([n]) => n === name).map(([, v]) => v))].sort(compareCodePoints);
  return {
    formats: values("token_format"),
    origins: values("origin"),
    agents: values("agent"),
    rights: new Set(values("right")),
    checks: [...authorityChecks, ...checks],
  };
}

// -- verification --------------------------------------------------------------------------------

function checkAudience(audience: unknown): string {
  if (typeof audience !== "string" || !AUDIENCE.test(audience)) {
    throw new MalformedError("audience must be 1-128 characters of [A-Za-z0-9._:@/-]", { check: "token.audience" });
  }
  return audience;
}

/** Number of code points (Python's `len` of a str). */
function codePointLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** verifier/token.py `_parse`: size, then the first agent key the token verifies under. */
function parse(token: unknown, agentKeys: readonly Uint8Array[]): { blocks: LoadedBlock[]; rootKey: Uint8Array } {
  if (typeof token !== "string" || token.length === 0 || codePointLength(token) > MAX_TOKEN_CHARS) {
    throw new TokenError(`a token is 1-${MAX_TOKEN_CHARS} characters`, { check: "token.format" });
  }
  let loaded: ReturnType<typeof load> | null = null;
  try {
    loaded = load(token);
  } catch (e) {
    if (!(e instanceof LoadError)) throw e;
  }
  if (loaded !== null) {
    for (const key of agentKeys) {
      if (key instanceof Uint8Array && loaded.verifyRoot(key)) return { blocks: loaded.blocks, rootKey: key.slice() };
    }
  }
  throw new SignatureError("the token is not signed by a valid key of this agent", { check: "token.signature" });
}

/** Hex revocation ids of a verified token, authority block first (revoking it revokes all). */
export function revocationIds(token: string, options: { agentKeys: readonly Uint8Array[] }): string[] {
  const { blocks } = parse(token, options.agentKeys);
  attenuations(blocks);
  return blocks.map((b) => toHex(b.signed.signature));
}

export interface VerifyTokenOptions {
  /** Public keys (32-byte Ed25519) the authority block may be signed by. */
  readonly agentKeys: readonly Uint8Array[];
  readonly origin: string;
  readonly agent: string;
  /** Who the caller is: the audience the token must name. */
  readonly audience: string;
  /** Kinds that must be allowed (`token.scope` otherwise). */
  readonly kinds: readonly string[];
  /** Unix seconds (default: now), as `engram-verify token --at`. */
  readonly at?: number | bigint;
  /** Revocation ids of the agent's `share.revoked` stream; a function is called only once
   * the signature and the templates verified. */
  readonly revokedIds?: Iterable<string> | (() => Iterable<string>);
  /** Further kinds to try without failing: the result's `kinds` lists those allowed too. */
  readonly candidates?: readonly string[];
}

function toI64(at: number | bigint | undefined): bigint | null {
  const value = at === undefined ? BigInt(Math.floor(Date.now() / 1000)) : typeof at === "bigint" ? at : Number.isFinite(at) ? BigInt(Math.trunc(at)) : null;
  return value !== null && value >= I64_MIN && value <= I64_MAX ? value : null;
}

function allows(t: Interpreted, kind: string, audience: string, at: bigint | null): boolean {
  if (at === null) return false; // Python: the time does not fit a Biscuit integer
  if (!t.rights.has(kind)) return false; // allow if right($r), kind($r)
  return t.checks.every((c) =>
    c.kind === "audience" ? c.value === audience : c.kind === "time" ? at <= c.expires : c.values.has(kind),
  );
}

/**
 * Check the token allows disclosing each of `kinds` to `audience` at `at` (port of
 * verifier/token.py `verify_token`; `engram-verify token`). Throws the first failed check's
 * {@link VerificationError} (module doc for the order and the names).
 */
export function verifyToken(token: string, options: VerifyTokenOptions): VerifiedToken {
  const audience = checkAudience(options.audience);
  const { blocks, rootKey } = parse(token, options.agentKeys);
  const t = interpret(blocks);
  if (
    t.formats.length !== 1 ||
    t.formats[0] !== TOKEN_FORMAT ||
    t.origins.length !== 1 ||
    t.origins[0] !== options.origin ||
    t.agents.length !== 1 ||
    t.agents[0] !== options.agent
  ) {
    throw new TokenError("the token is not an engram.share/v1 token of this agent and log", {
      check: "token.template",
    });
  }
  const ids = blocks.map((b) => toHex(b.signed.signature));
  const revokedSource = options.revokedIds ?? [];
  const revokedList = typeof revokedSource === "function" ? revokedSource() : revokedSource;
  const idSet = new Set(ids);
  const revoked = [...new Set(revokedList)].filter((id) => idSet.has(id)).sort(compareCodePoints);
  if (revoked.length > 0) {
    throw new TokenError(`the token was revoked (${(revoked[0] as string).slice(0, 16)}...)`, { check: "token.revoked" });
  }
  const at = toI64(options.at);
  const required = new Set(options.kinds);
  const all = [...new Set([...options.kinds, ...(options.candidates ?? [])])].sort(compareCodePoints);
  const allowed: string[] = [];
  for (const kind of all) {
    if (typeof kind !== "string" || !KIND.test(kind)) {
      if (required.has(kind)) {
        throw new MalformedError(`${JSON.stringify(String(kind).slice(0, 64))} is not a kind`, { check: "token.kinds" });
      }
      continue;
    }
    if (!allows(t, kind, audience, at)) {
      if (!required.has(kind)) continue;
      throw new TokenError(
        `the token does not allow disclosing ${kind} to ${audience} at ${String(options.at ?? at)} (scope, audience or expiry)`,
        { check: "token.scope" },
      );
    }
    allowed.push(kind);
  }
  return Object.freeze({
    agent: options.agent,
    origin: options.origin,
    audience,
    kinds: Object.freeze(allowed),
    revocationIds: Object.freeze(ids),
    rootKey,
  });
}

