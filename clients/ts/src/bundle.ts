/**
 * Attestation bundles: verify, offline, that a claim about an agent's records is true and
 * that no record of the claimed streams was left out (specs/bundle.md, bundle v2).
 * Port of verifier/bundle.py: the same checks, in the same order, with the same check
 * names and the same step lines.
 *
 * Trust role: bytes + the log's verifier key (+ optionally checkpoints the caller already
 * trusts or remembers, a witness policy, and for share tokens the audience and the time)
 * in, a {@link VerifiedBundle} out, or a
 * {@link VerificationError} naming the first failed check. Nothing in the bundle is trusted
 * because it is in the bundle: keys come from the key-history entries (which are
 * themselves proven and complete), sizes and roots from the signed checkpoint, stream
 * heads and the set of agents they cover from a statement the log signed for that
 * checkpoint.
 *
 * Checks, in order (the names a report prints; one function per step below):
 *
 * 1. `format`: bounded size, strict JSON (jcs.ts: no floats, NaN or Infinity, no duplicate
 *    members, bounded containers and values), exact members, strict base64; every optional
 *    member is validated when present.
 * 2. `checkpoint`: the checkpoint is signed by the log key, for the expected origin.
 * 3. `witnesses`: (with a witness policy, witness.ts, or a witness check of the caller's)
 *    cosignatures on the checkpoint meet its quorum.
 * 4. `trusted`: (with trusted or remembered checkpoints) the bundle's checkpoint is not
 *    older than any of them and the bundle proves it consistent with each.
 * 5. `inclusion`: every entry's leaf is in the checkpoint's tree at its index.
 * 6. `timestamps`: server timestamps strictly increase with the index across every
 *    disclosed entry; the log signed both leaves, so a violation is a fraud proof.
 * 7. `heads`: the stream-head statement is signed by the log key, bound to the checkpoint
 *    (same origin, size and root), and names every agent it covers with the number of its
 *    streams.
 * 8. `signatures`: replaying the key-history streams with the entries in log order, every
 *    agent signature verifies under the key valid at that index (keys.ts).
 * 9. `completeness`: every agent a statement is about (and `engram.policy`) is covered by
 *    the stream-head statement; for every stream the claim uses (and the key streams),
 *    versions 0..head are all present, each `prev` is the previous entry's leaf hash, and
 *    the last entry is the attested head. An included entry beyond the attested head is a
 *    fraud proof.
 * 10. `bodies`: every disclosed body matches its signed commitment; erased entries are
 *    reported as undisclosed.
 * 11. `token`: if the bundle carries a share token (token.ts), it is signed by the agent's
 *    active key, allows every disclosed and claimed kind to the verifying audience at the
 *    time given, and none of its revocation ids is in the agent's complete `share.revoked`
 *    stream.
 * 10b. `index` (`mesh_read` statements only): each statement's mesh-read index is the log's,
 *    for this checkpoint and claim; the bundle carries exactly what it lists, disclosed as
 *    its roles say, plus key history (mesh_index.ts).
 * 12. `claim`: each statement, recomputed from the disclosed bodies (and, for `mesh_read`,
 *    the memory's status folded from the entries that name it, tiers.ts, and the mesh folded
 *    from its entries, mesh.ts), equals the claim.
 *
 * Mapping of Python types: sizes, stream versions and head indices from signed text are
 * `bigint` (up to 2^63-1, as parsed by note.ts); entry indices and JSON integers are
 * numbers (safe integers); a stream (agent, kind) is keyed `"<agent>/<kind>"` (neither
 * holds a '/') and sorted as the Python tuple is.
 */

import { base64Encode, hasLoneSurrogate, toHex, utf8 } from "./bytes.js";
import { LimitExceededError, MalformedError, ProofError, StreamChainError, VerificationError } from "./errors.js";
import { KEY_KINDS, POLICY_AGENT, Leaf, checkAgentId, checkKind, verifyBody } from "./event.js";
import { parseStrict, type JSONValue } from "./jcs.js";
import { KeyHistory } from "./keys.js";
import { HASH_SIZE, verifyInclusion } from "./merkle.js";
import {
  MEMORY_KINDS,
  MESH_ID,
  compareCodePoints,
  meshRead,
  statementAgents,
  statementStreams,
  type Body,
  type MeshEvent,
} from "./mesh.js";
import { MeshReadIndex, allowedEntries, checkIndex, parseIndex } from "./mesh_index.js";
import { foldStatus, type StatusEntry } from "./tiers.js";
import {
  SignedNote,
  b64decodeStrict,
  parseDecimal,
  verifyCheckpoint,
  type VerifiedCheckpoint,
  type VerifierKey,
} from "./note.js";
import { StateError, requireExtends, type StatePrefix } from "./state.js";
import { TokenError, verifyToken } from "./token.js";
import { witnessCheck as makeWitnessCheck, type WitnessPolicy } from "./witness.js";

export { TokenError } from "./token.js";

export const MEDIA_TYPE = "application/vnd.engram.bundle.v2+json";
export const HEADS_HEADER = "engram.stream-heads/v2";
/** Media types of earlier bundle versions, refused with the reason (specs/bundle.md, Versions). */
export const RETIRED_MEDIA_TYPES: ReadonlyMap<string, string> = new Map([
  [
    "application/vnd.engram.bundle.v1+json",
    "bundle v1 is no longer accepted: its stream-head statement does not say which agents it " +
      "covers, so it cannot prove that an agent has no records; ask for a v2 bundle " +
      "(engram >= 0.9, `engram bundle create`)",
  ],
]);
export const MAX_BUNDLE_BYTES = 64 * 1024 * 1024;
export const MAX_ENTRIES = 100_000;
export const MAX_STATEMENTS = 32;
export const MAX_CONSISTENCY_PROOFS = 8;
const MAX_PROOF_HASHES = 64;
/** Bounds checked by a linear pre-scan before the JSON is parsed (jcs.ts checkShape). */
export const MAX_CONTAINERS = 2 * MAX_ENTRIES + 4096;
export const MAX_VALUES = 2_000_000;
const MAX_TOKEN_CHARS = 16_384;
const HEX_HASH = /^[0-9a-f]{64}$/;
const TOKEN_ID = /^[A-Za-z0-9_-]{1,128}$/;
const REF = /^(?:0|[1-9][0-9]{0,15})\.(?:0|[1-9][0-9]?)$/;

/** The claim does not match what the records say. */
export class ClaimError extends VerificationError {
  static override readonly defaultCheck: string = "claim";
}

/** A parsed JSON object. */
type JSONObject = { [key: string]: JSONValue };

/** A claim statement after step 1 (its members validated). */
export type ClaimStatement = Readonly<JSONObject>;

/** A passed check and what it established, as a report prints it: `[check, detail]`. */
export type Step = [check: string, detail: string];

export interface ClaimResult {
  readonly statement: ClaimStatement;
  readonly recomputed: JSONValue;
  readonly holds: boolean;
}

/** One head of a verified stream-head statement. */
export interface StreamHead {
  readonly agent: string;
  readonly kind: string;
  readonly version: bigint;
  readonly index: bigint;
  /** Lowercase hex leaf hash. */
  readonly leafHash: string;
}

/** A verified stream-head statement: the agents it covers and their streams' heads, keyed
 * by {@link streamKey}. */
export interface StreamHeads {
  readonly covered: ReadonlySet<string>;
  readonly heads: ReadonlyMap<string, StreamHead>;
}

export interface VerifiedBundle {
  readonly checkpoint: VerifiedCheckpoint;
  readonly entries: number;
  /** Each needed stream with an attested head: its head version, keyed by {@link streamKey}. */
  readonly streams: ReadonlyMap<string, bigint>;
  readonly erased: readonly number[];
  readonly claims: readonly ClaimResult[];
  /** `[check, detail]` in order. */
  readonly steps: readonly Step[];
  readonly covered: ReadonlySet<string>;
  readonly witnesses: readonly string[];
  /** The bundle's consistency proofs by old size. */
  readonly consistency: ReadonlyMap<bigint, readonly Uint8Array[]>;
}

/** `"<agent>/<kind>"`: the key of a stream (agent ids and kinds hold no '/'). */
export function streamKey(agent: string, kind: string): string {
  return `${agent}/${kind}`;
}

type Stream = readonly [agent: string, kind: string];

/** Python's order of (agent, kind) tuples. */
function compareStreams(a: Stream, b: Stream): number {
  return compareCodePoints(a[0], b[0]) || compareCodePoints(a[1], b[1]);
}

// -- helpers --------------------------------------------------------------------------------

/** Python's `str(x)` of a JSON value in messages (never compared). */
function show(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value) ?? String(value);
}

function isObject(value: unknown): value is JSONObject {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Python's `dict.get`: own members only. */
function get(obj: JSONObject, name: string): JSONValue | undefined {
  return Object.hasOwn(obj, name) ? obj[name] : undefined;
}

function has(obj: JSONObject, name: string): boolean {
  return Object.hasOwn(obj, name);
}

function isInt(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value);
}

/** Number of code points (Python's `len` of a str). */
function codePointLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

function b64(value: unknown, what: string): Uint8Array {
  if (typeof value !== "string") throw new MalformedError(`${what} must be base64`, { check: "format" });
  return b64decodeStrict(value, "format");
}

function hashes(value: unknown, what: string): Uint8Array[] {
  if (!Array.isArray(value) || value.length > MAX_PROOF_HASHES) {
    throw new MalformedError(`${what} is a list of at most ${MAX_PROOF_HASHES} base64 hashes`, { check: "format" });
  }
  const out = value.map((h) => b64(h, what));
  if (out.some((h) => h.length !== HASH_SIZE)) {
    throw new MalformedError(`${what} holds a hash that is not ${HASH_SIZE} bytes`, { check: "format" });
  }
  return out;
}

function exact(obj: unknown, required: readonly string[], optional: readonly string[], what: string): JSONObject {
  if (!isObject(obj)) throw new MalformedError(`${what} must be an object`, { check: "format" });
  const missing = required.filter((k) => !has(obj, k)).sort();
  const extra = Object.keys(obj)
    .filter((k) => !required.includes(k) && !optional.includes(k))
    .sort();
  if (missing.length || extra.length) {
    throw new MalformedError(`${what}: missing ${JSON.stringify(missing)}, unknown ${JSON.stringify(extra)}`, {
      check: "format",
    });
  }
  return obj;
}

function utf8Text(text: string): Uint8Array {
  if (hasLoneSurrogate(text)) {
    throw new MalformedError("text is not valid Unicode (lone surrogate)", { check: "format" });
  }
  return utf8(text);
}

/** Python's `type(x)` for a parsed JSON value. */
function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "list";
  return typeof value === "object" ? "dict" : typeof value;
}

/** Type-strict equality (true is not 1, 1 is not "1"), recursively. */
function same(a: unknown, b: unknown): boolean {
  const t = typeOf(a);
  if (t !== typeOf(b)) return false;
  if (t === "dict") {
    const x = a as JSONObject;
    const y = b as JSONObject;
    const kx = Object.keys(x);
    const ky = Object.keys(y);
    return kx.length === ky.length && kx.every((k) => has(y, k)) && kx.every((k) => same(x[k], y[k]));
  }
  if (t === "list") {
    const x = a as unknown[];
    const y = b as unknown[];
    return x.length === y.length && x.every((v, i) => same(v, y[i]));
  }
  return a === b;
}

function matches(body: JSONObject, where: JSONObject): boolean {
  return Object.keys(where).every((k) => has(body, k) && same(body[k], where[k]));
}

/** Python's `json.dumps(value, ensure_ascii=True)` (`sortKeys`, `compact`: the
 * `sort_keys=True, separators=(",", ":")` variant): what claim lines print. */
export function pythonJsonDumps(value: unknown, options: { sortKeys?: boolean; compact?: boolean } = {}): string {
  const item = options.compact ? "," : ", ";
  const key = options.compact ? ":" : ": ";
  const str = (s: string): string => {
    let out = '"';
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      const ch = s[i] as string;
      if (ch === '"') out += '\\"';
      else if (ch === "\\") out += "\\\\";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (ch === "\b") out += "\\b";
      else if (ch === "\f") out += "\\f";
      else if (c >= 0x20 && c <= 0x7e) out += ch;
      else out += "\\u" + c.toString(16).padStart(4, "0"); // UTF-16 units: a pair is two escapes
    }
    return out + '"';
  };
  const dump = (v: unknown): string => {
    if (v === null) return "null";
    if (v === true) return "true";
    if (v === false) return "false";
    if (typeof v === "number") return String(v);
    if (typeof v === "string") return str(v);
    if (Array.isArray(v)) return "[" + v.map(dump).join(item) + "]";
    const o = v as JSONObject;
    const keys = Object.keys(o);
    if (options.sortKeys) keys.sort(compareCodePoints);
    return "{" + keys.map((k) => str(k) + key + dump(o[k])).join(item) + "}";
  };
  return dump(value);
}

/** `count of alice/pact.outcome where {"result":"violated"} = 0`: everything a claim line
 * must name (agent, kind, filter, field, value) so that nothing is hidden. */
export function describeStatement(statement: ClaimStatement, value: JSONValue | null = null): string {
  const shown = value === null ? get(statement, "value") : value;
  if (statement["predicate"] === "mesh_read") {
    return (
      `mesh_read of ${show(statement["author"])}'s ${show(statement["kind"])} ${show(statement["ref"])} by ` +
      `${show(statement["agent"])} through mesh ${show(statement["mesh"])} = ${pythonJsonDumps(shown)}`
    );
  }
  const where = get(statement, "where");
  let text = show(statement["predicate"]);
  const field = get(statement, "field");
  if (field !== undefined && field !== null) text += ` ${show(field)}`;
  text += ` of ${show(statement["agent"])}/${show(statement["kind"])}`;
  // Python's truthiness: a non-empty object (step 1 allows only objects).
  if (isObject(where) ? Object.keys(where).length > 0 : Boolean(where)) {
    text += " where " + pythonJsonDumps(where, { sortKeys: true, compact: true });
  }
  return `${text} = ${pythonJsonDumps(shown)}`;
}

/**
 * The mean of integers as a decimal string with two places, rounded half to even
 * (specs/bundle.md "mean"): what bundles, the oracle and clients all state and compare.
 * Exact (BigInt) where Python divides Decimals with 28 digits and quantizes; both give the
 * same string for any sum of at most 100,000 safe integers. A negative mean that rounds to
 * zero keeps its sign ("-0.00"), as a Python Decimal does.
 */
export function meanQuality(values: readonly number[]): string {
  if (values.length === 0) throw new RangeError("the mean of no values");
  let sum = 0n;
  for (const v of values) sum += BigInt(v);
  const n = BigInt(values.length);
  const negative = sum < 0n;
  const scaled = (negative ? -sum : sum) * 100n;
  let q = scaled / n;
  const twice = (scaled % n) * 2n;
  if (twice > n || (twice === n && q % 2n === 1n)) q += 1n;
  const digits = q.toString().padStart(3, "0");
  return `${negative ? "-" : ""}${digits.slice(0, -2)}.${digits.slice(-2)}`;
}

function evaluate(statement: ClaimStatement, records: readonly (JSONObject | null)[]): JSONValue {
  const pred = statement["predicate"];
  const rawWhere = get(statement, "where");
  const where: JSONObject = isObject(rawWhere) ? rawWhere : {};
  const hasWhere = Object.keys(where).length > 0;
  if (pred === "count" && !hasWhere) return records.length;
  if (records.some((r) => r === null)) {
    throw new ClaimError("the claim needs bodies that are erased or undisclosed", { check: "claim.undisclosed" });
  }
  const bodies = (records as JSONObject[]).filter((r) => matches(r, where));
  if (pred === "count") return bodies.length;
  if (pred === "exists") return bodies.length > 0;
  if (pred === "mean") {
    const name = statement["field"] as string;
    const values = bodies.map((b) => get(b, name));
    const ints = values.filter(isInt);
    if (values.length === 0 || ints.length !== values.length) {
      throw new ClaimError(`no integer ${JSON.stringify(name)} to average`, { check: "claim.field" });
    }
    return meanQuality(ints);
  }
  throw new MalformedError(`unknown predicate ${show(pred)}`, { check: "format.claim" });
}

/** Note text of a stream-head statement (signed by the log key): `agents` are the agents it
 * covers, each with an `agent <id> <n>` line even with no streams, then its `n` head lines
 * (`[agent, kind, version, index, hex leaf hash]`). For tests and tools. */
export function headsText(
  origin: string,
  size: bigint | number,
  rootB64: string,
  heads: readonly (readonly [string, string, bigint | number, bigint | number, string])[],
  agents: readonly string[],
): string {
  const groups = new Map<string, (readonly [string, bigint, bigint, string])[]>();
  for (const a of agents) groups.set(checkAgentId(a), []);
  for (const [a, k, v, i, h] of heads) {
    const group = groups.get(a);
    if (group === undefined) {
      throw new RangeError(`head of ${JSON.stringify(a)}, an agent the statement does not cover`);
    }
    group.push([k, BigInt(v), BigInt(i), h]);
  }
  const lines = [HEADS_HEADER, `origin ${origin}`, `size ${BigInt(size)}`, `root ${rootB64}`];
  for (const a of [...groups.keys()].sort(compareCodePoints)) {
    const group = (groups.get(a) as (readonly [string, bigint, bigint, string])[]).sort(
      (x, y) =>
        compareCodePoints(x[0], y[0]) ||
        (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0) ||
        (x[2] < y[2] ? -1 : x[2] > y[2] ? 1 : 0) ||
        compareCodePoints(x[3], y[3]),
    );
    lines.push(`agent ${a} ${group.length}`);
    for (const [k, v, i, h] of group) lines.push(`head ${a} ${k} ${v} ${i} ${h}`);
  }
  return lines.join("\n") + "\n";
}

function claimStatements(claim: unknown): ClaimStatement[] {
  const c = exact(claim, ["statements"], [], "claim");
  const stmts = c["statements"];
  if (!Array.isArray(stmts) || !(stmts.length > 0 && stmts.length <= MAX_STATEMENTS)) {
    throw new MalformedError(`a claim holds 1-${MAX_STATEMENTS} statements`, { check: "format.claim" });
  }
  const out: ClaimStatement[] = [];
  for (const raw of stmts) {
    if (isObject(raw) && get(raw, "predicate") === "mesh_read") {
      out.push(meshStatement(raw));
      continue;
    }
    const s = exact(raw, ["predicate", "agent", "kind", "value"], ["where", "field"], "statement");
    const pred = s["predicate"];
    if (pred !== "count" && pred !== "mean" && pred !== "exists") {
      throw new MalformedError(`unknown predicate ${show(pred)}`, { check: "format.claim" });
    }
    checkAgentId(s["agent"]);
    checkKind(s["kind"]);
    if (has(s, "where") && (!isObject(s["where"]) || Object.keys(s["where"]).length > 8)) {
      throw new MalformedError("where is an object of at most 8 members", { check: "format.claim" });
    }
    if (pred === "mean" && typeof get(s, "field") !== "string") {
      throw new MalformedError("mean needs a field", { check: "format.claim" });
    }
    if (pred !== "mean" && has(s, "field")) {
      throw new MalformedError("only mean takes a field", { check: "format.claim" });
    }
    const where = get(s, "where");
    if (isObject(where) && Object.values(where).some((v) => v === null)) {
      throw new MalformedError("where values cannot be null", { check: "format.claim" });
    }
    const value = s["value"];
    const ok =
      pred === "count" ? isInt(value) : pred === "exists" ? typeof value === "boolean" : typeof value === "string";
    if (!ok) {
      const expected = { count: "int", exists: "bool", mean: "str" }[pred];
      throw new MalformedError(`a ${pred} value is a ${expected}`, { check: "format.claim" });
    }
    out.push(s);
  }
  return out;
}

/** `mesh_read`: {agent (the reader), author, mesh, kind (the memory's entry kind), ref (the
 * memory), value (true)}: the memory was shared with the reader through the mesh under
 * grants valid at the checkpoint (mesh.ts). */
function meshStatement(raw: JSONObject): ClaimStatement {
  const s = exact(raw, ["predicate", "agent", "author", "mesh", "kind", "ref", "value"], [], "statement");
  checkAgentId(s["agent"]);
  checkAgentId(s["author"]);
  const mesh = s["mesh"];
  if (typeof mesh !== "string" || !MESH_ID.test(mesh)) {
    throw new MalformedError("mesh is a mesh id <creator>/<name>", { check: "format.claim" });
  }
  if (!MEMORY_KINDS.includes(s["kind"] as string)) {
    throw new MalformedError(`a mesh_read names a ${MEMORY_KINDS.join(" or ")} entry`, { check: "format.claim" });
  }
  const ref = s["ref"];
  if (typeof ref !== "string" || !REF.test(ref)) {
    throw new MalformedError("ref is a memory reference <index>.<n>", { check: "format.claim" });
  }
  if (s["value"] !== true) throw new MalformedError("a mesh_read value is true", { check: "format.claim" });
  return s;
}

// -- the steps ----------------------------------------------------------------------------

/** The bundle's members after step 1, and what later steps establish. */
interface Bundle {
  readonly origin: JSONValue;
  readonly checkpointNote: string;
  readonly streamHeads: string;
  readonly entries: readonly JSONValue[];
  readonly statements: readonly ClaimStatement[];
  readonly consistency: Map<bigint, Uint8Array[]>;
  readonly token: string | null;
  /** The log's mesh-read index of each mesh_read statement, in statement order. */
  readonly meshIndexes: readonly string[];
  /** (leaf, entry) sorted by index, after step 5. */
  readonly leaves: [Leaf, JSONObject][];
}

/** 1. Bounded, strict parse; exact members; every optional member validated. */
function stepFormat(data: Uint8Array): Bundle {
  if (!(data instanceof Uint8Array)) throw new MalformedError("a bundle is bytes", { check: "format" });
  if (data.length > MAX_BUNDLE_BYTES) {
    throw new LimitExceededError(`bundle of ${data.length} bytes exceeds ${MAX_BUNDLE_BYTES}`, {
      check: "format.size",
    });
  }
  const doc = parseStrict(data, { maxBytes: MAX_BUNDLE_BYTES, maxContainers: MAX_CONTAINERS, maxValues: MAX_VALUES });
  const mediaType = isObject(doc) ? get(doc, "media_type") : undefined;
  if (typeof mediaType === "string" && RETIRED_MEDIA_TYPES.has(mediaType)) {
    throw new MalformedError(RETIRED_MEDIA_TYPES.get(mediaType) as string, { check: "format.version" });
  }
  const b = exact(
    doc,
    ["media_type", "origin", "checkpoint", "stream_heads", "entries", "claim"],
    ["consistency", "token", "mesh_indexes"],
    "bundle",
  );
  if (b["media_type"] !== MEDIA_TYPE) {
    throw new MalformedError(`unknown media type ${JSON.stringify(show(b["media_type"]).slice(0, 80))}`, {
      check: "format.version",
    });
  }
  const checkpoint = b["checkpoint"];
  const streamHeads = b["stream_heads"];
  if (typeof checkpoint !== "string" || typeof streamHeads !== "string") {
    throw new MalformedError("checkpoint and stream_heads are note texts", { check: "format" });
  }
  const entries = b["entries"];
  if (!Array.isArray(entries) || !(entries.length > 0 && entries.length <= MAX_ENTRIES)) {
    throw new MalformedError(`a bundle holds 1-${MAX_ENTRIES} entries`, { check: "format" });
  }
  const consistency = new Map<bigint, Uint8Array[]>();
  if (has(b, "consistency")) {
    const items = b["consistency"];
    if (!Array.isArray(items) || !(items.length > 0 && items.length <= MAX_CONSISTENCY_PROOFS)) {
      throw new MalformedError(`consistency is a list of 1-${MAX_CONSISTENCY_PROOFS} proofs`, {
        check: "format.consistency",
      });
    }
    for (const raw of items) {
      const c = exact(raw, ["old_size", "proof"], [], "consistency proof");
      const old = c["old_size"];
      if (!isInt(old) || old < 0 || consistency.has(BigInt(old))) {
        throw new MalformedError("consistency old_size values are distinct non-negative integers", {
          check: "format.consistency",
        });
      }
      consistency.set(BigInt(old), hashes(c["proof"], "consistency hash"));
    }
  }
  const token = get(b, "token");
  const tokenOk = typeof token === "string" && token.length > 0 && codePointLength(token) <= MAX_TOKEN_CHARS;
  if (has(b, "token") && !tokenOk) {
    throw new MalformedError("token is a non-empty string of at most 16 KiB", { check: "format" });
  }
  const statements = claimStatements(b["claim"]);
  return {
    origin: b["origin"] as JSONValue,
    checkpointNote: checkpoint,
    streamHeads,
    entries,
    statements,
    consistency,
    token: typeof token === "string" ? token : null,
    meshIndexes: meshIndexes(b, statements),
    leaves: [],
  };
}

/** `mesh_indexes`: one note per `mesh_read` statement, in order; only with them, and a
 * bundle with them makes no other kind of statement (Python's `_mesh_indexes`). */
function meshIndexes(b: JSONObject, statements: readonly ClaimStatement[]): string[] {
  const reads = statements.filter((s) => s["predicate"] === "mesh_read");
  if (reads.length === 0) {
    if (has(b, "mesh_indexes")) {
      throw new MalformedError("mesh_indexes come only with mesh_read statements", { check: "format" });
    }
    return [];
  }
  if (reads.length !== statements.length) {
    throw new MalformedError("a bundle with a mesh_read statement makes mesh_read statements only", {
      check: "format.claim",
    });
  }
  if (!has(b, "mesh_indexes")) {
    throw new MalformedError(
      "a mesh_read statement needs the log's mesh-read index (mesh_indexes): bundles made before it proved " +
        "memories that were never shared (HOT, replaced, erased) and carried other meshes' and other " +
        "memories' bodies, so they are refused; ask for a new proof (engram mesh prove)",
      { check: "format.mesh_index" },
    );
  }
  const notes = b["mesh_indexes"];
  if (
    !Array.isArray(notes) ||
    notes.length !== reads.length ||
    !notes.every((n) => typeof n === "string" && n.length > 0 && codePointLength(n) <= 64 * 1024)
  ) {
    throw new MalformedError("mesh_indexes is a list of one note text (at most 64 KiB) per mesh_read statement", {
      check: "format.mesh_index",
    });
  }
  return notes as string[];
}

/** 4. Each anchor (a checkpoint the caller trusts or remembers) is extended by `cp`. */
function stepTrusted(
  bundle: Bundle,
  cp: VerifiedCheckpoint,
  logKey: VerifierKey,
  anchors: readonly Uint8Array[],
  prefix: StatePrefix,
): string {
  for (const raw of anchors) {
    const anchor = verifyCheckpoint(raw, logKey);
    if (anchor.size >= cp.size) {
      requireExtends(anchor, cp, null, prefix);
      continue;
    }
    if ([...bundle.consistency.keys()].some((old) => old > cp.size)) {
      throw new MalformedError("a consistency proof starts beyond the checkpoint", { check: "format.consistency" });
    }
    if (!bundle.consistency.has(anchor.size) && anchor.origin === cp.origin) {
      const what = prefix === "state" ? "remembered" : "trusted";
      throw new StateError(
        `the bundle carries no consistency proof from the size ${anchor.size} ${what} to ${cp.size}: ask the ` +
          `agent for a bundle built for it (engram bundle create ... --trusted-size ${anchor.size})`,
        { check: `${prefix}.missing` },
      );
    }
    requireExtends(anchor, cp, bundle.consistency.get(anchor.size) ?? null, prefix);
  }
  const sizes = anchors.map((a) => String(verifyCheckpoint(a, logKey).size)).join(", ");
  return `consistent with the ${prefix === "state" ? "remembered" : "trusted"} checkpoint(s) at size ${sizes}`;
}

/** 5. Every leaf is proven in the checkpoint's tree at its index. */
function stepInclusion(bundle: Bundle, cp: VerifiedCheckpoint): string {
  const seen = new Set<number>();
  for (const rawEntry of bundle.entries) {
    const e = exact(rawEntry, ["index", "leaf", "proof"], ["body", "salt", "erased"], "entry");
    const index = e["index"];
    if (!isInt(index) || seen.has(index)) {
      throw new MalformedError("entry indices are distinct integers", { check: "format" });
    }
    seen.add(index);
    const leaf = Leaf.fromBytes(b64(e["leaf"], "leaf"), { origin: cp.origin });
    if (leaf.index !== index) {
      throw new MalformedError(`entry ${index} holds the leaf of index ${leaf.index}`, { check: "inclusion.index" });
    }
    verifyInclusion({
      leafHash: leaf.hash,
      index: leaf.index,
      size: cp.size,
      proof: hashes(e["proof"], "proof hash"),
      root: cp.root,
    });
    bundle.leaves.push([leaf, e]);
  }
  bundle.leaves.sort((x, y) => x[0].index - y[0].index);
  return `${bundle.leaves.length} leaves proven in the checkpoint's tree`;
}

/** 6. The log assigns strictly increasing server timestamps (specs/leaf.md); two proven
 * leaves that say otherwise are a fraud proof against the log. */
function stepTimestamps(bundle: Bundle): string {
  let previous: Leaf | null = null;
  for (const [leaf] of bundle.leaves) {
    if (previous !== null && leaf.timestampUs <= previous.timestampUs) {
      throw new ProofError(
        `fraud proof: the log signed entry ${leaf.index} with server time ${leaf.timestampUs}, not after ` +
          `entry ${previous.index} (${previous.timestampUs}): timestamps must strictly increase with the index`,
        { check: "timestamps.fraud" },
      );
    }
    previous = leaf;
  }
  return `server timestamps strictly increase over ${bundle.leaves.length} entries`;
}

function headsName(check: (x: unknown) => string, text: string): string {
  try {
    return check(text);
  } catch (e) {
    if (!(e instanceof MalformedError)) throw e;
    throw new MalformedError(`bad name in the stream-head statement: ${e.message}`, {
      check: "heads.format",
      cause: e,
    });
  }
}

/** 7. The stream-head statement: signed, bound to `cp`, every covered agent named. */
export function parseHeads(note: Uint8Array, key: VerifierKey, cp: VerifiedCheckpoint): StreamHeads {
  const signed = SignedNote.parse(note);
  signed.verify([key]);
  const lines = signed.text.replace(/\n+$/, "").split("\n");
  if (lines[0] !== HEADS_HEADER) {
    throw new MalformedError(
      `stream-head statement ${JSON.stringify((lines[0] as string).slice(0, 40))} is not ${HEADS_HEADER}: older ` +
        "statements do not name the agents they cover",
      { check: "heads.version" },
    );
  }
  const binding = [`origin ${cp.origin}`, `size ${cp.size}`, `root ${base64Encode(cp.root)}`];
  if (lines.length < 4 || binding.some((b, i) => lines[i + 1] !== b)) {
    throw new ProofError("the stream-head statement is not bound to this checkpoint", { check: "heads.binding" });
  }
  const covered: string[] = [];
  const heads = new Map<string, StreamHead>();
  let remaining = 0n;
  for (const line of lines.slice(4)) {
    const parts = line.split(" ");
    if (parts[0] === "agent" && parts.length === 3) {
      const agent = headsName(checkAgentId, parts[1] as string);
      const last = covered[covered.length - 1];
      if (remaining !== 0n || (last !== undefined && compareCodePoints(agent, last) <= 0)) {
        throw new MalformedError("agents are listed once, in order, each after all of its counted head lines", {
          check: "heads.format",
        });
      }
      covered.push(agent);
      remaining = parseDecimal(parts[2] as string, "heads.format");
    } else if (parts[0] === "head" && parts.length === 6) {
      if (covered.length === 0 || parts[1] !== covered[covered.length - 1] || remaining === 0n) {
        throw new MalformedError("a head line outside its agent's group", { check: "heads.format" });
      }
      remaining -= 1n;
      const agent = parts[1] as string;
      const kind = headsName(checkKind, parts[2] as string);
      const version = parseDecimal(parts[3] as string, "heads.format");
      const index = parseDecimal(parts[4] as string, "heads.format");
      const leafHash = parts[5] as string;
      const key = streamKey(agent, kind);
      if (index >= cp.size || !HEX_HASH.test(leafHash) || heads.has(key)) {
        throw new MalformedError("head index beyond the checkpoint, bad leaf hash, or a stream listed twice", {
          check: "heads.format",
        });
      }
      heads.set(key, Object.freeze({ agent, kind, version, index, leafHash }));
    } else {
      throw new MalformedError(`bad line ${JSON.stringify(line.slice(0, 80))}`, { check: "heads.format" });
    }
  }
  if (remaining !== 0n) {
    throw new MalformedError("the last agent has fewer head lines than it counts", { check: "heads.format" });
  }
  return Object.freeze({ covered: new Set(covered), heads });
}

/** 8. Key history replayed in log order; every signature under the key valid then. */
function stepSignatures(bundle: Bundle): KeyHistory {
  const history = new KeyHistory();
  for (const [leaf] of bundle.leaves) history.checkAndApply(leaf);
  return history;
}

function statementsAgents(bundle: Bundle): Set<string> {
  return new Set(bundle.statements.flatMap((s) => statementAgents(s)));
}

/** The streams that must be complete: claimed ones, the key streams of the claimed agents
 * and of the policy agent, and (with a token) the agent's revocation list. */
function neededStreams(bundle: Bundle, heads: StreamHeads): Map<string, Stream> {
  const needed = new Map<string, Stream>();
  const add = (s: Stream): void => void needed.set(streamKey(s[0], s[1]), s);
  for (const s of bundle.statements) for (const st of statementStreams(s)) add(st);
  const claimAgents = statementsAgents(bundle);
  if (bundle.token !== null) {
    if (bundle.statements.some((s) => s["predicate"] === "mesh_read")) {
      throw new MalformedError("a bundle with a share token makes no mesh_read claim", { check: "format.claim" });
    }
    if (claimAgents.size !== 1) {
      throw new MalformedError("a bundle with a share token makes claims about one agent", { check: "format.claim" });
    }
    for (const a of claimAgents) if (heads.heads.has(streamKey(a, "share.revoked"))) add([a, "share.revoked"]);
  }
  const agents = new Set([...claimAgents, POLICY_AGENT]);
  for (const h of heads.heads.values()) if (agents.has(h.agent) && KEY_KINDS.has(h.kind)) add([h.agent, h.kind]);
  return needed;
}

/** The leaves of each stream, in index order. */
function leavesByStream(bundle: Bundle): Map<string, Leaf[]> {
  const byStream = new Map<string, Leaf[]>();
  for (const [leaf] of bundle.leaves) {
    const key = streamKey(leaf.envelope.agent, leaf.envelope.kind);
    const list = byStream.get(key);
    if (list === undefined) byStream.set(key, [leaf]);
    else list.push(leaf);
  }
  return byStream;
}

/** A stream's leaves by version (a stable sort, as Python's `sorted`). */
function byVersion(leaves: readonly Leaf[] | undefined): Leaf[] {
  return [...(leaves ?? [])].sort((a, b) => a.envelope.version - b.envelope.version);
}

/** 9. Coverage, then every needed stream from version 0 to its attested head. */
function stepCompleteness(bundle: Bundle, heads: StreamHeads): Map<string, Stream> {
  for (const agent of [...statementsAgents(bundle), POLICY_AGENT]
    .filter((a, i, all) => all.indexOf(a) === i)
    .sort(compareCodePoints)) {
    if (!heads.covered.has(agent)) {
      const covered = [...heads.covered].sort(compareCodePoints).join(", ");
      throw new StreamChainError(
        `the log's stream-head statement does not cover agent ${JSON.stringify(agent)}, so this bundle proves ` +
          `nothing about ${agent}'s records (covered: ${covered})`,
        { check: "completeness.coverage" },
      );
    }
  }
  const needed = neededStreams(bundle, heads);
  const byStream = leavesByStream(bundle);
  const all = new Map<string, Stream>(needed);
  for (const leaves of byStream.values()) {
    const env = (leaves[0] as Leaf).envelope;
    all.set(streamKey(env.agent, env.kind), [env.agent, env.kind]);
  }
  for (const stream of [...all.values()].sort(compareStreams)) {
    const key = streamKey(stream[0], stream[1]);
    const got = byVersion(byStream.get(key));
    const head = heads.heads.get(key);
    if (head === undefined) {
      if (needed.has(key) && got.length === 0) continue; // a covered agent's empty stream
      throw new StreamChainError(`stream ${key} has no attested head`, { check: "completeness.head" });
    }
    for (const lf of got) {
      if (BigInt(lf.envelope.version) > head.version) {
        throw new StreamChainError(
          `fraud proof: entry ${lf.index} is version ${lf.envelope.version} of ${key}, beyond the head ` +
            `version ${head.version} the log signed`,
          { check: "completeness.fraud" },
        );
      }
    }
    if (!needed.has(key)) continue;
    // Python compares the versions with list(range(head + 1)); counted here, not built.
    if (BigInt(got.length) !== head.version + 1n || got.some((lf, i) => lf.envelope.version !== i)) {
      const present = new Set(got.map((lf) => lf.envelope.version));
      const missing: bigint[] = [];
      for (let v = 0n; v <= head.version && missing.length < 10; v++) if (!present.has(Number(v))) missing.push(v);
      throw new StreamChainError(`stream ${key} lacks versions [${missing.join(", ")}]`, {
        check: "completeness.missing",
      });
    }
    let prev: string | null = null;
    for (const lf of got) {
      if (lf.envelope.prev !== prev) {
        throw new StreamChainError(`stream ${key} version ${lf.envelope.version}: broken prev link`, {
          check: "completeness.prev",
        });
      }
      prev = toHex(lf.hash);
    }
    const last = got[got.length - 1] as Leaf;
    if (BigInt(last.index) !== head.index || toHex(last.hash) !== head.leafHash) {
      throw new StreamChainError(`stream ${key} ends before its attested head`, { check: "completeness.head" });
    }
  }
  return needed;
}

/** 10. Disclosed bodies match their commitments; erasures are proven. */
function stepBodies(bundle: Bundle): { bodies: Map<number, JSONObject | null>; erased: number[] } {
  const bodyOf = (leaf: Leaf, e: JSONObject): JSONObject =>
    verifyBody(leaf.envelope, b64(get(e, "salt"), "salt"), b64(e["body"], "body"), { maxBytes: 1 << 20 });
  const erasures = new Set<number>();
  for (const [lf, e] of bundle.leaves) {
    if (lf.envelope.kind === "memory.erased" && has(e, "body")) {
      const index = get(bodyOf(lf, e), "index");
      if (isInt(index)) erasures.add(index);
    }
  }
  const bodies = new Map<number, JSONObject | null>();
  const erased: number[] = [];
  for (const [leaf, e] of bundle.leaves) {
    if (has(e, "erased")) {
      if (e["erased"] !== true) throw new MalformedError("erased is true or absent", { check: "format" });
      if (!erasures.has(leaf.index)) {
        throw new MalformedError(`entry ${leaf.index} is marked erased, but no proven memory.erased entry erases it`, {
          check: "bodies.erased",
        });
      }
      if (has(e, "body") || has(e, "salt")) {
        throw new MalformedError(`entry ${leaf.index} is marked erased but carries a body`, { check: "format" });
      }
      bodies.set(leaf.index, null);
      erased.push(leaf.index);
    } else if (has(e, "body")) {
      bodies.set(leaf.index, bodyOf(leaf, e));
    } else {
      if (has(e, "salt")) {
        throw new MalformedError(`entry ${leaf.index} carries a salt without a body`, { check: "format" });
      }
      bodies.set(leaf.index, null);
    }
  }
  return { bodies, erased };
}

/** 10b. Each mesh_read statement's index is the log's, for this checkpoint and claim; the
 * bundle carries exactly what the indexes list (plus key history), disclosed as their roles
 * say (mesh_index.ts). */
function stepIndex(
  bundle: Bundle,
  bodies: Map<number, JSONObject | null>,
  key: VerifierKey,
  cp: VerifiedCheckpoint,
): [MeshReadIndex[], string] {
  const leaves = new Map(bundle.leaves.map(([lf]) => [lf.index, lf] as const));
  const shown = bodies as Map<number, Body | null>;
  const indexes: MeshReadIndex[] = [];
  bundle.statements.forEach((s, n) => {
    const idx = parseIndex(utf8Text(bundle.meshIndexes[n] as string), key, cp, s);
    checkIndex(s, idx, leaves, shown);
    indexes.push(idx);
  });
  allowedEntries(bundle.statements, indexes, leaves, shown);
  const listed = indexes.reduce((n, i) => n + i.entries.size, 0);
  return [
    indexes,
    `${listed} entries listed by the log's mesh-read index for this checkpoint, all carried; nothing else disclosed`,
  ];
}

/** 11. The share token allows every disclosed and claimed kind and is not revoked. */
function stepToken(
  bundle: Bundle,
  bodies: Map<number, JSONObject | null>,
  history: KeyHistory,
  origin: string,
  audience: string | undefined,
  at: number | bigint | undefined,
): string {
  const token = bundle.token as string;
  if (audience === undefined) {
    throw new TokenError("this bundle carries a share token: give the audience you verify as", {
      check: "token.audience",
    });
  }
  const agent = String((bundle.statements[0] as ClaimStatement)["agent"]); // one agent (step 9)
  const disclosed = (lf: Leaf): boolean => (bodies.get(lf.index) ?? null) !== null;
  for (const [lf] of bundle.leaves) {
    if (disclosed(lf) && lf.envelope.agent !== agent) {
      throw new TokenError(`entry ${lf.index} of another agent is disclosed`, { check: "token.scope" });
    }
  }
  const revoked: string[] = [];
  for (const [lf] of bundle.leaves) {
    if (lf.envelope.kind !== "share.revoked" || lf.envelope.agent !== agent) continue;
    const body = bodies.get(lf.index) ?? null;
    if (body === null) throw new TokenError("the revocation list is not fully disclosed", { check: "token.revoked" });
    const tokenId = get(body, "token_id");
    if (typeof tokenId !== "string" || !TOKEN_ID.test(tokenId)) {
      throw new TokenError(
        `share.revoked entry ${lf.index} names no valid token id: the revocation list cannot be read`,
        { check: "token.revoked" },
      );
    }
    revoked.push(tokenId);
  }
  const scope = new Set([
    ...bundle.leaves.filter(([lf]) => disclosed(lf)).map(([lf]) => lf.envelope.kind),
    ...bundle.statements.map((st) => st["kind"] as string),
  ]);
  scope.delete("share.revoked");
  scope.delete("memory.erased");
  // Only the agent's key active at the checkpoint: a token carries no issue time, so a
  // rotated-out (possibly leaked) key must not mint tokens that still verify.
  const active = history.activeKey(agent);
  const record = active === null ? undefined : history.keys.get(active);
  const verified = verifyToken(token, {
    agentKeys: record === undefined ? [] : [record.publicKey],
    origin,
    agent,
    audience,
    kinds: [...scope].sort(compareCodePoints),
    ...(at === undefined ? {} : { at }),
    revokedIds: revoked,
  });
  return (
    `share token of ${agent} allows ${verified.kinds.join(", ")} to ${audience}; ` +
    `not revoked (${revoked.length} revocations checked)`
  );
}

/** 12. Each statement recomputed from the disclosed bodies equals the claim. */
function stepClaim(
  bundle: Bundle,
  bodies: Map<number, JSONObject | null>,
  indexes: readonly MeshReadIndex[] = [],
): ClaimResult[] {
  const byStream = leavesByStream(bundle);
  const leaves = new Map(bundle.leaves.map(([lf]) => [lf.index, lf] as const));
  const results: ClaimResult[] = [];
  let reads = 0;
  for (const s of bundle.statements) {
    if (s["predicate"] === "mesh_read") {
      results.push(meshClaim(s, indexes[reads++] as MeshReadIndex, leaves, bodies));
      continue;
    }
    const stream = byVersion(byStream.get(streamKey(s["agent"] as string, s["kind"] as string)));
    const value = evaluate(
      s,
      stream.map((lf) => bodies.get(lf.index) ?? null),
    );
    const holds = same(value, s["value"]);
    results.push(Object.freeze({ statement: s, recomputed: value, holds }));
    if (!holds) {
      throw new ClaimError(`claim says ${describeStatement(s)}; the records say ${JSON.stringify(value)}`, {
        check: "claim.value",
      });
    }
  }
  return results;
}

/** Whether the memory at `pos` of an entry is not disclosed: no body, or a distilled body
 * that gives that memory only as its digest (Python's `_withheld`). */
function withheld(kind: string, body: JSONObject | null, pos: number): boolean {
  if (body === null) return true;
  const entries = kind === "memory.distilled" ? get(body, "entries") : undefined;
  return Array.isArray(entries) && pos < entries.length && typeof entries[pos] === "string";
}

/** A `mesh_read` recomputed from what the log's index lists: the memory was active and WARM
 * at the checkpoint (tiers.ts, `claim.status`), and the mesh folded from its entries shared
 * its category with the reader (mesh.ts, `claim.mesh`). */
function meshClaim(
  s: ClaimStatement,
  index: MeshReadIndex,
  leaves: ReadonlyMap<number, Leaf>,
  bodies: Map<number, JSONObject | null>,
): ClaimResult {
  const ref = s["ref"] as string;
  const memoryIndex = index.of("memory")[0] as number;
  const memory = leaves.get(memoryIndex) as Leaf;
  const env = memory.envelope;
  const body = (bodies.get(memoryIndex) ?? null) as Body | null;
  const ours = env.agent === s["author"] && env.kind === s["kind"];
  if (ours && withheld(env.kind, body as JSONObject | null, Number(ref.slice(ref.indexOf(".") + 1)))) {
    throw new ClaimError(`claim says ${describeStatement(s)}; the memory's body is not disclosed (erased?)`, {
      check: "claim.undisclosed",
    });
  }
  const named = ["status", "exempt", "use"].flatMap((role) => index.of(role));
  const entry = (i: number): StatusEntry => {
    const lf = leaves.get(i) as Leaf;
    return [i, lf.timestampUs, lf.envelope.kind, (bodies.get(i) ?? null) as Body | null];
  };
  const status = foldStatus(ref, [memoryIndex, memory.timestampUs, env.kind, body], named.map(entry));
  if (ours && !status.shareable) {
    throw new ClaimError(
      `claim says ${describeStatement(s)}; the log says memory ${ref} was not an active WARM memory at the ` +
        `checkpoint (${status.status}, ${status.tier}: ${status.why})`,
      { check: "claim.status" },
    );
  }
  const events: MeshEvent[] = index.of("mesh").map((i) => {
    const lf = leaves.get(i) as Leaf;
    return [i, lf.envelope.agent, lf.envelope.kind, (bodies.get(i) ?? null) as Body | null];
  });
  const [holds, why] = meshRead(s, events, [env.agent, env.kind, body]);
  if (!holds) {
    throw new ClaimError(`claim says ${describeStatement(s)}; the log says no: ${why}`, { check: "claim.mesh" });
  }
  return Object.freeze({ statement: s, recomputed: true, holds: true });
}

/** A witness check: the names of the witnesses whose cosignatures on `cp` meet the caller's
 * witness policy, or a VerificationError (`witness.*`). */
export type WitnessCheck = (cp: VerifiedCheckpoint) => readonly string[];

export interface VerifyBundleOptions {
  /** A checkpoint the caller trusts (note bytes). */
  trustedCheckpoint?: Uint8Array;
  /** Checkpoints the caller trusts (note bytes). */
  trustedCheckpoints?: readonly Uint8Array[];
  /** The newest checkpoint the caller remembers for this log (its failures are `state.*`). */
  remembered?: Uint8Array;
  /** Checks the checkpoint's cosignatures against a witness policy (step 3): a function of
   * the caller's, as the Python `witnesses` argument. */
  witnesses?: WitnessCheck;
  /** A c2sp.org/tlog-policy (its text or bytes, or parsed): step 3 requires its quorum of
   * cosignatures on the checkpoint, as `engram-verify bundle --witness-policy FILE`. A text
   * that does not parse throws `witness.policy` before any step. Not with `witnesses`. */
  witnessPolicy?: WitnessPolicy | string | Uint8Array;
  /** Receives `[check, detail]` for each check as it passes, so a report can show how far
   * verification got before a failure. */
  steps?: Step[];
  /** The audience the caller verifies as (share tokens), as `engram-verify bundle --audience`. */
  audience?: string;
  /** Unix seconds to verify as of (default: now), as `engram-verify bundle --at`: the share
   * token's expiry, and the clock skew bound of the witness policy's cosignatures. */
  at?: number | bigint;
  /** The former name of `at`, still accepted. */
  now?: number | bigint;
}

/**
 * Run checks 1-12 (module doc); return the verified bundle or throw the first failed
 * check's {@link VerificationError}.
 */
export function verifyBundle(data: Uint8Array, logKey: VerifierKey, options: VerifyBundleOptions = {}): VerifiedBundle {
  const steps: Step[] = options.steps ?? [];
  const at = options.at ?? options.now;
  let witnessCheck = options.witnesses;
  if (options.witnessPolicy !== undefined) {
    if (witnessCheck !== undefined) throw new TypeError("give either witnesses or witnessPolicy, not both");
    witnessCheck = makeWitnessCheck(options.witnessPolicy, at);
  }
  // 1. format
  const bundle = stepFormat(data);
  steps.push([
    "format",
    `${MEDIA_TYPE}, ${bundle.entries.length} entries, ${bundle.statements.length} claim statements`,
  ]);
  // 2. checkpoint (an origin of null names none, as Python's None; any other non-string fails)
  const cp = verifyCheckpoint(
    utf8Text(bundle.checkpointNote),
    logKey,
    bundle.origin === null ? undefined : (bundle.origin as string),
  );
  steps.push(["checkpoint", `signed by ${logKey.name}: size ${cp.size}`]);
  // 3. witnesses
  let cosigned: readonly string[] = [];
  if (witnessCheck !== undefined) {
    cosigned = witnessCheck(cp);
    steps.push(["witnesses", `cosigned by ${cosigned.join(", ")}: the witness policy's quorum is met`]);
  }
  // 4. trusted and remembered checkpoints
  const anchors = [
    ...(options.trustedCheckpoint === undefined ? [] : [options.trustedCheckpoint]),
    ...(options.trustedCheckpoints ?? []),
  ];
  if (anchors.length) steps.push(["trusted", stepTrusted(bundle, cp, logKey, anchors, "trusted")]);
  if (options.remembered !== undefined) {
    steps.push(["trusted", stepTrusted(bundle, cp, logKey, [options.remembered], "state")]);
  }
  // 5. inclusion
  steps.push(["inclusion", stepInclusion(bundle, cp)]);
  // 6. timestamps
  steps.push(["timestamps", stepTimestamps(bundle)]);
  // 7. stream heads
  const heads = parseHeads(utf8Text(bundle.streamHeads), logKey, cp);
  steps.push([
    "heads",
    `${heads.heads.size} stream heads of ${heads.covered.size} agents, signed by the log for this checkpoint`,
  ]);
  // 8. signatures
  const history = stepSignatures(bundle);
  steps.push([
    "signatures",
    `every signature valid under the key of its agent at its index (${history.keys.size} keys)`,
  ]);
  // 9. completeness
  const needed = stepCompleteness(bundle, heads);
  const agents = [...statementsAgents(bundle)].sort(compareCodePoints);
  steps.push([
    "completeness",
    `${agents.join(", ")} covered; ${needed.size} streams complete from version 0 to their attested heads`,
  ]);
  // 10. bodies
  const { bodies, erased } = stepBodies(bundle);
  const shown = [...bodies.values()].filter((v) => v !== null).length;
  steps.push(["bodies", `${shown} bodies match their commitments; ${erased.length} erased`]);
  // 10b. the mesh-read indexes (mesh_read statements only)
  let indexes: MeshReadIndex[] = [];
  if (bundle.meshIndexes.length > 0) {
    const [found, detail] = stepIndex(bundle, bodies, logKey, cp);
    indexes = found;
    steps.push(["index", detail]);
  }
  // 11. share token
  if (bundle.token !== null) {
    steps.push(["token", stepToken(bundle, bodies, history, cp.origin, options.audience, at)]);
  }
  // 12. claim
  const results = stepClaim(bundle, bodies, indexes);
  steps.push(["claim", results.map((r) => describeStatement(r.statement, r.recomputed)).join("; ")]);
  const streams = new Map<string, bigint>();
  for (const key of needed.keys()) {
    const head = heads.heads.get(key);
    if (head !== undefined) streams.set(key, head.version);
  }
  return Object.freeze({
    checkpoint: cp,
    entries: bundle.leaves.length,
    streams,
    erased,
    claims: results,
    steps,
    covered: heads.covered,
    witnesses: cosigned,
    consistency: bundle.consistency,
  });
}
