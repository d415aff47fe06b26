/**
 * Memory Mesh rules (issue 30): the fold of a mesh's events, and the `mesh_read` claim.
 * Port of verifier/mesh.py: the same rules, the same check names, the same answers.
 *
 * The one definition of what a mesh is, shared by the ledger (which folds meshes from the
 * log and refuses what the rules would ignore) and the offline verifier (a bundle's
 * `mesh_read` statement is recomputed from the complete mesh streams it carries).
 * specs/mesh.md has the rules; in short, applied in log order:
 *
 * - `mesh.created`: only by the agent the id `<creator>/<name>` names, once;
 * - `mesh.invited`, `mesh.removed`, `mesh.dissolved`: only by the creator;
 * - `mesh.joined`: only by an agent invited since it last left, consuming the invitation;
 * - `mesh.granted`: only by a member; it replaces the member's grant (WARM categories it
 *   shares and reads, `backfill`);
 * - `mesh.left`: a member other than the creator.
 *
 * An event that breaks a rule has no effect ({@link MeshRuleError} names the rule:
 * `mesh.malformed`, `mesh.policy`, `mesh.exists`, `mesh.missing`, `mesh.dissolved`,
 * `mesh.member`, `mesh.not_invited`, `mesh.not_member`).
 *
 * Mapping of Python types: dicts keyed by agent are `Map`s (insertion-ordered as Python's
 * dicts; no agent name can hit an inherited member), frozensets are `ReadonlySet`s, a body
 * is a parsed JSON object (jcs.ts) or `null` when it is not disclosed.
 */

import { VerificationError } from "./errors.js";

/** A mesh event the rules give no effect (its `check` names the rule). */
export class MeshRuleError extends VerificationError {
  static override readonly defaultCheck: string = "mesh.rule";
}

export const MESH_KINDS: readonly string[] = Object.freeze([
  "mesh.created",
  "mesh.invited",
  "mesh.joined",
  "mesh.granted",
  "mesh.left",
  "mesh.removed",
  "mesh.dissolved",
]);
/** The creator's mesh streams (a mesh's fold reads them). */
export const CREATOR_KINDS: readonly string[] = Object.freeze([
  "mesh.created",
  "mesh.invited",
  "mesh.removed",
  "mesh.dissolved",
  "mesh.granted",
  "mesh.left",
]);
/** A member's mesh streams (a mesh's fold reads them). */
export const MEMBER_KINDS: readonly string[] = Object.freeze(["mesh.joined", "mesh.granted", "mesh.left"]);
/** The memory kinds a `mesh_read` statement may name. */
export const MEMORY_KINDS: readonly string[] = Object.freeze(["memory.written", "memory.distilled"]);

/** A mesh id `<creator>/<name>` (Python's `MESH_ID.fullmatch`). */
export const MESH_ID = /^[a-z0-9][a-z0-9._-]{0,63}\/[a-z0-9][a-z0-9._-]{0,31}$/;

const CATEGORY_NAMES: ReadonlySet<string> = new Set([
  "COMMITMENT",
  "PERFORMANCE",
  "LEARNING",
  "FAILURE",
  "PREFERENCE",
  "ANOMALY",
  "CONTEXT",
]);

/** A body as the verifier reads it: a parsed JSON object. */
export type Body = { readonly [key: string]: unknown };

export function creatorOf(mesh: string): string {
  const slash = mesh.indexOf("/");
  return slash < 0 ? mesh : mesh.slice(0, slash);
}

/** Python's `sorted` of strings: by code point (JavaScript's `<` compares UTF-16 code
 * units, which differs for characters above U+FFFF against U+E000..U+FFFF). */
export function compareCodePoints(a: string, b: string): number {
  const x = a[Symbol.iterator]();
  const y = b[Symbol.iterator]();
  for (;;) {
    const p = x.next();
    const q = y.next();
    if (p.done || q.done) return p.done && q.done ? 0 : p.done ? -1 : 1;
    const c = (p.value.codePointAt(0) as number) - (q.value.codePointAt(0) as number);
    if (c !== 0) return c;
  }
}

function sortedStrings(items: Iterable<string>): string[] {
  return [...items].sort(compareCodePoints);
}

function isObject(value: unknown): value is Body {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Python's `dict.get`: own members only. */
function get(body: Body, name: string): unknown {
  return Object.hasOwn(body, name) ? body[name] : undefined;
}

/** One grant of a member, in log order: (index, share, read, backfill). */
export type Grant = readonly [index: number, share: ReadonlySet<string>, read: ReadonlySet<string>, backfill: boolean];

export class Member {
  readonly agent: string;
  readonly joinedIndex: number;
  leftIndex: number | null = null;
  /** The member's grants in log order. */
  readonly grants: Grant[] = [];

  constructor(agent: string, joinedIndex: number) {
    this.agent = agent;
    this.joinedIndex = joinedIndex;
  }

  get active(): boolean {
    return this.leftIndex === null;
  }

  /** The categories the member's grant reads. */
  get reads(): ReadonlySet<string> {
    const last = this.grants[this.grants.length - 1];
    return last === undefined ? new Set() : last[2];
  }

  /** Per category the member shares now, the log index from which its memories flow: the
   * grant that began sharing it without a break since (0 with `backfill`). */
  sharedSince(): Map<string, number> {
    let since = new Map<string, number>();
    for (const [index, share] of this.grants) {
      const next = new Map<string, number>();
      for (const c of share) next.set(c, since.get(c) ?? index);
      since = next;
    }
    const last = this.grants[this.grants.length - 1];
    if (last !== undefined && last[3]) {
      since = new Map([...since.keys()].map((c) => [c, 0]));
    }
    return since;
  }
}

/** A grant as {@link Mesh.toJson} shows it. */
export interface GrantJson {
  index: number;
  share: string[];
  read: string[];
  backfill: boolean;
}

/** A mesh as Python's `Mesh.to_json` shows it. */
export interface MeshJson {
  mesh: string;
  creator: string;
  created_index: number;
  title: string | null;
  dissolved_index: number | null;
  invited: { [agent: string]: number };
  members: { agent: string; joined_index: number; left_index: number | null; grant: GrantJson | null }[];
}

export class Mesh {
  readonly mesh: string;
  readonly creator: string;
  readonly createdIndex: number;
  readonly title: string | null;
  dissolvedIndex: number | null = null;
  readonly members = new Map<string, Member>();
  /** Pending invitations: agent -> the index of the invitation. */
  readonly invited = new Map<string, number>();

  constructor(fields: { mesh: string; creator: string; createdIndex: number; title: string | null }) {
    this.mesh = fields.mesh;
    this.creator = fields.creator;
    this.createdIndex = fields.createdIndex;
    this.title = fields.title;
  }

  get dissolved(): boolean {
    return this.dissolvedIndex !== null;
  }

  activeMembers(): Member[] {
    return [...this.members.values()].filter((m) => m.active);
  }

  toJson(): MeshJson {
    // Object.fromEntries defines own members, so an invited "__proto__" stays a member.
    const invited = Object.fromEntries(
      [...this.invited.entries()].sort((a, b) => compareCodePoints(a[0], b[0])),
    ) as { [agent: string]: number };
    return {
      mesh: this.mesh,
      creator: this.creator,
      created_index: this.createdIndex,
      title: this.title,
      dissolved_index: this.dissolvedIndex,
      invited,
      members: [...this.members.values()]
        .sort((a, b) => compareCodePoints(a.agent, b.agent))
        .map((m) => {
          const g = m.grants[m.grants.length - 1];
          return {
            agent: m.agent,
            joined_index: m.joinedIndex,
            left_index: m.leftIndex,
            grant:
              g === undefined
                ? null
                : { index: g[0], share: sortedStrings(g[1]), read: sortedStrings(g[2]), backfill: g[3] },
          };
        }),
    };
  }
}

function refuse(message: string, check: string): MeshRuleError {
  return new MeshRuleError(message, { check });
}

function checkShape(kind: string, body: unknown): asserts body is Body & { mesh: string } {
  let ok = isObject(body) && typeof get(body, "mesh") === "string" && MESH_ID.test(get(body, "mesh") as string);
  if (ok && (kind === "mesh.invited" || kind === "mesh.removed")) {
    ok = typeof get(body as Body, "agent") === "string";
  }
  if (ok && kind === "mesh.granted") {
    const b = body as Body;
    ok =
      ["share", "read"].every((k) => {
        const list = get(b, k);
        return Array.isArray(list) && list.every((c) => typeof c === "string" && CATEGORY_NAMES.has(c));
      }) && typeof (Object.hasOwn(b, "backfill") ? b["backfill"] : false) === "boolean";
  }
  if (!ok) throw refuse(`a ${kind} body of the wrong shape`, "mesh.malformed");
}

/**
 * The mesh after one event, or {@link MeshRuleError} (its check named) when the rules give
 * the event no effect. `state` is null before `mesh.created`. A body that is not the kind's
 * shape (the verifier reads bodies it did not validate) has no effect either
 * (`mesh.malformed`). Like the Python function, it changes `state` in place and returns it
 * (after `mesh.created`, a new mesh); a refused event changes nothing.
 *
 * `body` null is an entry whose body is erased or withheld: it is folded for `mesh` (the
 * mesh being folded, which must be given) by its most restrictive reading
 * ({@link applyBodyless}), never skipped.
 */
export function applyEvent(
  state: Mesh | null,
  index: number,
  agent: string,
  kind: string,
  body: unknown,
  mesh: string | null = null,
): Mesh {
  if (body === null) {
    if (mesh === null || !MESH_ID.test(mesh)) throw new Error("a body-less mesh entry is folded for a named mesh");
    return applyBodyless(state, index, agent, kind, mesh);
  }
  checkShape(kind, body);
  return applyBodied(state, index, agent, kind, body);
}

function applyBodied(
  state: Mesh | null,
  index: number,
  agent: string,
  kind: string,
  body: Body & { mesh: string },
): Mesh {
  const mesh = body.mesh;
  if (kind === "mesh.created") {
    if (agent !== creatorOf(mesh)) {
      throw refuse(`mesh ${mesh} can only be created by ${creatorOf(mesh)}`, "mesh.policy");
    }
    if (state !== null) throw refuse(`mesh ${mesh} already exists`, "mesh.exists");
    const title = get(body, "title");
    const created = new Mesh({
      mesh,
      creator: agent,
      createdIndex: index,
      title: typeof title === "string" ? title : null,
    });
    created.members.set(agent, new Member(agent, index));
    return created;
  }
  if (state === null) throw refuse(`there is no mesh ${mesh}`, "mesh.missing");
  if (state.dissolved) throw refuse(`mesh ${mesh} is dissolved`, "mesh.dissolved");
  const member = state.members.get(agent);
  if ((kind === "mesh.invited" || kind === "mesh.removed" || kind === "mesh.dissolved") && agent !== state.creator) {
    throw refuse(`only ${state.creator}, who created mesh ${mesh}, may do that`, "mesh.policy");
  }
  if (kind === "mesh.invited") {
    const who = get(body, "agent") as string;
    const target = state.members.get(who);
    if (target !== undefined && target.active) throw refuse(`${who} is already a member of ${mesh}`, "mesh.member");
    state.invited.set(who, index);
  } else if (kind === "mesh.joined") {
    if (member !== undefined && member.active) throw refuse(`${agent} is already a member of ${mesh}`, "mesh.member");
    if (!state.invited.has(agent)) throw refuse(`${agent} is not invited to ${mesh}`, "mesh.not_invited");
    state.invited.delete(agent);
    // Python's `members[agent] = Member(...)`: a rejoining member keeps its place in the
    // dict's order (a Map's set on an existing key does too).
    state.members.set(agent, new Member(agent, index));
  } else if (kind === "mesh.granted") {
    if (member === undefined || !member.active) throw refuse(`${agent} is not a member of ${mesh}`, "mesh.not_member");
    member.grants.push([
      index,
      new Set(get(body, "share") as string[]),
      new Set(get(body, "read") as string[]),
      Object.hasOwn(body, "backfill") ? (body["backfill"] as boolean) : false,
    ]);
  } else if (kind === "mesh.left") {
    if (member === undefined || !member.active) throw refuse(`${agent} is not a member of ${mesh}`, "mesh.not_member");
    if (agent === state.creator) throw refuse(`the creator of ${mesh} dissolves it instead of leaving`, "mesh.policy");
    member.leftIndex = index;
  } else if (kind === "mesh.removed") {
    const who = get(body, "agent") as string;
    const target = state.members.get(who);
    if (target === undefined || !target.active || target.agent === state.creator) {
      throw refuse(`${who} is not a removable member of ${mesh}`, "mesh.not_member");
    }
    target.leftIndex = index;
    state.invited.delete(target.agent);
  } else if (kind === "mesh.dissolved") {
    state.dissolvedIndex = index;
  }
  return state;
}

/**
 * A body-less entry of `kind` by `agent` at `index`, folded for `mesh`: it may have
 * concerned this mesh, and its body can no longer say otherwise, so it takes the reading
 * that lets the least flow (specs/mesh.md, "Entries without a body"). Readings that would
 * widen what flows (an invitation, a membership, a grant's categories) are never assumed.
 */
function applyBodyless(state: Mesh | null, index: number, agent: string, kind: string, mesh: string): Mesh {
  const creator = creatorOf(mesh);
  if (kind === "mesh.created") {
    if (agent !== creator) throw refuse(`mesh ${mesh} can only be created by ${creator}`, "mesh.policy");
    if (state !== null) throw refuse(`mesh ${mesh} already exists`, "mesh.exists");
    // It may have been this mesh's creation: the mesh exists from here, dissolved.
    const created = new Mesh({ mesh, creator: agent, createdIndex: index, title: null });
    created.dissolvedIndex = index;
    return created;
  }
  if (state === null) throw refuse(`there is no mesh ${mesh}`, "mesh.missing");
  if (state.dissolved) throw refuse(`mesh ${mesh} is dissolved`, "mesh.dissolved");
  const member = state.members.get(agent);
  if ((kind === "mesh.invited" || kind === "mesh.removed" || kind === "mesh.dissolved") && agent !== state.creator) {
    throw refuse(`only ${state.creator}, who created mesh ${mesh}, may do that`, "mesh.policy");
  }
  if (kind === "mesh.invited") {
    throw refuse(`an invitation without a body invites no one to ${mesh}`, "mesh.erased");
  } else if (kind === "mesh.joined") {
    // It may have consumed the invitation; it never makes a member.
    if (!state.invited.delete(agent)) throw refuse(`${agent} is not invited to ${mesh}`, "mesh.not_invited");
  } else if (kind === "mesh.granted") {
    if (member === undefined || !member.active) throw refuse(`${agent} is not a member of ${mesh}`, "mesh.not_member");
    member.grants.push([index, new Set(), new Set(), false]);
  } else if (kind === "mesh.left") {
    if (member === undefined || !member.active) throw refuse(`${agent} is not a member of ${mesh}`, "mesh.not_member");
    if (agent === state.creator) throw refuse(`the creator of ${mesh} dissolves it instead of leaving`, "mesh.policy");
    member.leftIndex = index;
  } else if (kind === "mesh.removed") {
    // It may have removed any member but the creator: all of them leave.
    for (const m of state.members.values()) {
      if (m.active && m.agent !== state.creator) {
        m.leftIndex = index;
        state.invited.delete(m.agent);
      }
    }
  } else if (kind === "mesh.dissolved") {
    state.dissolvedIndex = index;
  }
  return state;
}

/** One event of a mesh: (index, agent, kind, body). */
export type MeshEvent = readonly [index: number, agent: string, kind: string, body: unknown];

/** A mesh's state from its events, applied in log order (a stable sort by index); events
 * the rules give no effect are skipped. An event with body null (erased or withheld) is
 * folded for `mesh`, the mesh these events are of, by its most restrictive reading
 * ({@link applyEvent}); `mesh` must be given when there is one. */
export function fold(events: Iterable<MeshEvent>, mesh: string | null = null): Mesh | null {
  let state: Mesh | null = null;
  for (const [index, agent, kind, body] of [...events].sort((a, b) => a[0] - b[0])) {
    try {
      state = applyEvent(state, index, agent, kind, body, mesh);
    } catch (e) {
      if (!(e instanceof MeshRuleError)) throw e;
    }
  }
  return state;
}

/** A claim statement as bundle.ts validated it (only the members these functions read). */
export type Statement = { readonly [key: string]: unknown };

/** The agents a claim statement is about (a `mesh_read`: reader, author, creator), each once. */
export function statementAgents(s: Statement): string[] {
  if (s["predicate"] === "mesh_read") {
    return [...new Set([String(s["agent"]), String(s["author"]), creatorOf(String(s["mesh"]))])];
  }
  return [String(s["agent"])];
}

/** The streams a claim statement needs complete. A `mesh_read` needs none: the log's
 * mesh-read index (mesh_index.ts) lists exactly the entries of its mesh and memory. */
export function statementStreams(s: Statement): (readonly [string, string])[] {
  if (s["predicate"] !== "mesh_read") return [[String(s["agent"]), String(s["kind"])]];
  return [];
}

/** The category of memory `s.ref` from its entry (agent, kind, body as disclosed), or null
 * and why not (Python's `memory_category`). */
export function memoryCategory(
  s: Statement,
  memory: readonly [agent: string, kind: string, body: Body | null],
): [string | null, string] {
  const ref = String(s["ref"]);
  const dot = ref.indexOf(".");
  const index = dot < 0 ? ref : ref.slice(0, dot);
  const pos = dot < 0 ? "" : ref.slice(dot + 1);
  const author = String(s["author"]);
  const [agent, kind, body] = memory;
  if (agent !== author || kind !== s["kind"]) {
    return [null, `entry ${index} is a ${kind} of ${agent}, not a ${String(s["kind"])} of ${author}`];
  }
  if (body === null) return [null, `entry ${index}'s body is not disclosed (erased?)`];
  let category: unknown;
  if (kind === "memory.distilled") {
    const entries = get(body, "entries");
    if (!Array.isArray(entries) || !(Number(pos) < entries.length)) {
      return [null, `entry ${index} has no memory ${pos}`];
    }
    const entry: unknown = entries[Number(pos)];
    category = isObject(entry) ? get(entry, "category") : undefined;
  } else {
    category = pos === "0" ? get(body, "category") : undefined;
  }
  if (typeof category !== "string") return [null, `memory ${ref} has no category`];
  return [category, ""];
}

/**
 * Whether the memory `s.ref` (`memory`: its entry's agent, kind and body) was shared with
 * reader `s.agent` by `s.author` through `s.mesh`, as of the mesh's entries given (index,
 * agent, kind, body; bodies of other meshes ignored, body-less ones folded restrictively):
 * the author wrote it, both are active members of the undissolved mesh, the author's grant
 * shares the memory's category from an index at or before the memory's entry, and the
 * reader's grant reads it. Returns [holds, why], `why` worded as Python's.
 *
 * `s` is a statement bundle.ts validated (`ref` is `<index>.<n>`).
 */
export function meshRead(
  s: Statement,
  events: Iterable<MeshEvent>,
  memory: readonly [agent: string, kind: string, body: Body | null],
): [boolean, string] {
  const meshId = String(s["mesh"]);
  const reader = String(s["agent"]);
  const author = String(s["author"]);
  const ref = String(s["ref"]);
  const dot = ref.indexOf(".");
  const index = dot < 0 ? ref : ref.slice(0, dot);
  const [category, why] = memoryCategory(s, memory);
  if (category === null) return [false, why];
  const own: MeshEvent[] = [];
  for (const e of events) {
    const b = e[3];
    // A body-less entry may have been of this mesh: folded, never skipped.
    if (MESH_KINDS.includes(e[2]) && (b === null || (isObject(b) && get(b, "mesh") === meshId))) own.push(e);
  }
  const mesh = fold(own, meshId);
  if (mesh === null || mesh.dissolved) return [false, `mesh ${meshId} does not exist or is dissolved`];
  const a = mesh.members.get(author);
  const r = mesh.members.get(reader);
  if (a === undefined || !a.active || r === undefined || !r.active) {
    return [false, `${author} and ${reader} are not both members of ${meshId}`];
  }
  const since = a.sharedSince().get(category);
  // The index has at most 16 digits (bundle.ts); beyond 2^53 Number rounds it, but it is
  // then larger than any log index either way.
  if (since === undefined || since > Number(index)) {
    return [false, `${author}'s grant does not share ${category} memories from entry ${index}`];
  }
  if (!r.reads.has(category)) return [false, `${reader}'s grant does not read ${category}`];
  return [true, `${author}'s ${category} memory ${ref} flows to ${reader} through ${meshId}`];
}
