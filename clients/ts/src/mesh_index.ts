/**
 * The mesh-read index: the log's signed list of exactly the entries that bear on one
 * `mesh_read` statement (specs/bundle.md, "mesh_read"). Port of verifier/mesh_index.py:
 * the same note grammar, checks and check names.
 *
 * ```
 * engram.mesh-read/v1
 * origin <origin>
 * size <checkpoint size>
 * root <base64 checkpoint root>
 * claim <reader> <author> <mesh> <kind> <ref>
 * <role> <index> <hex leaf hash>        (roles: memory, status, exempt, use, mesh)
 * ```
 *
 * A log that signs an index leaving out an entry it has included has signed a
 * contradiction: the verifier reports it as a fraud proof (`index.fraud`).
 */

import { base64Encode, toHex } from "./bytes.js";
import { MalformedError, ProofError, VerificationError } from "./errors.js";
import { KEY_KINDS, PER_ENTRY, POLICY_AGENT, type Leaf } from "./event.js";
import { CREATOR_KINDS, MEMBER_KINDS, MESH_KINDS, creatorOf, type Body } from "./mesh.js";
import { SignedNote, parseDecimal, type VerifiedCheckpoint, type VerifierKey } from "./note.js";
import { DISCLOSED_STATUS_KINDS, EXEMPT_KIND, USE_KIND, namesMemory } from "./tiers.js";

export const INDEX_HEADER = "engram.mesh-read/v1";
export const ROLES: readonly string[] = Object.freeze(["memory", "status", "exempt", "use", "mesh"]);
const HEX_HASH = /^[0-9a-f]{64}$/;

/** The mesh-read index is not the log's, not for this claim, or not what the bundle carries. */
export class MeshIndexError extends VerificationError {
  static override readonly defaultCheck: string = "index";
}

type Statement = { readonly [key: string]: unknown };

function claimLine(s: Statement): string {
  return `claim ${String(s["agent"])} ${String(s["author"])} ${String(s["mesh"])} ${String(s["kind"])} ${String(s["ref"])}`;
}

function get(body: Body, name: string): unknown {
  return Object.hasOwn(body, name) ? body[name] : undefined;
}

/** A verified mesh-read index: index -> [role, hex leaf hash], in index order. */
export class MeshReadIndex {
  readonly entries: ReadonlyMap<number, readonly [role: string, leafHash: string]>;

  constructor(entries: Map<number, readonly [string, string]>) {
    this.entries = entries;
  }

  of(role: string): number[] {
    return [...this.entries.entries()].filter(([, [r]]) => r === role).map(([i]) => i);
  }
}

/** The index for `statement`: signed by the log key, bound to `cp`, its claim line the
 * statement's, its lines well formed (`index.*`). */
export function parseIndex(note: Uint8Array, key: VerifierKey, cp: VerifiedCheckpoint, statement: Statement): MeshReadIndex {
  const signed = SignedNote.parse(note);
  signed.verify([key]);
  const lines = signed.text.replace(/\n+$/, "").split("\n");
  if (lines[0] !== INDEX_HEADER) {
    throw new MalformedError(
      `mesh-read index ${JSON.stringify((lines[0] as string).slice(0, 40))} is not ${INDEX_HEADER}`,
      { check: "index.version" },
    );
  }
  const binding = [`origin ${cp.origin}`, `size ${cp.size}`, `root ${base64Encode(cp.root)}`];
  if (lines.length < 4 || binding.some((b, i) => lines[i + 1] !== b)) {
    throw new ProofError("the mesh-read index is not bound to this checkpoint", { check: "index.binding" });
  }
  if (lines.length < 5 || lines[4] !== claimLine(statement)) {
    throw new MeshIndexError("the mesh-read index is for another claim", { check: "index.claim" });
  }
  const entries = new Map<number, readonly [string, string]>();
  let last = -1n;
  for (const line of lines.slice(5)) {
    const parts = line.split(" ");
    if (parts.length !== 3 || !ROLES.includes(parts[0] as string) || !HEX_HASH.test(parts[2] as string)) {
      throw new MalformedError(`bad index line ${JSON.stringify(line.slice(0, 80))}`, { check: "index.format" });
    }
    const index = parseDecimal(parts[1] as string, "index.format");
    if (index <= last || index >= cp.size) {
      throw new MalformedError("index lines are in strictly increasing order, below the checkpoint's size", {
        check: "index.format",
      });
    }
    last = index;
    entries.set(Number(index), [parts[0] as string, parts[2] as string]);
  }
  const ref = String(statement["ref"]);
  const memoryIndex = Number(ref.slice(0, ref.indexOf(".")));
  const memories = [...entries.entries()].filter(([, [r]]) => r === "memory").map(([i]) => i);
  if (memories.length !== 1 || memories[0] !== memoryIndex) {
    throw new MeshIndexError("the index lists the memory's entry once, at its ref's index", { check: "index.format" });
  }
  return new MeshReadIndex(entries);
}

function agentsOf(s: Statement): [reader: string, author: string, creator: string] {
  return [String(s["agent"]), String(s["author"]), creatorOf(String(s["mesh"]))];
}

function mismatch(index: number, role: string, what: string): MeshIndexError {
  return new MeshIndexError(
    `the log listed entry ${index} as a ${role} entry of this claim, but it is ${what}: the index ` +
      "contradicts the entries it lists",
    { check: "index.mismatch" },
  );
}

function inMeshStream(s: Statement, leaf: Leaf): boolean {
  const [reader, author, creator] = agentsOf(s);
  const env = leaf.envelope;
  return (
    (env.agent === creator && CREATOR_KINDS.includes(env.kind)) ||
    ((env.agent === reader || env.agent === author) && MEMBER_KINDS.includes(env.kind))
  );
}

function checkMemoryDisclosure(s: Statement, i: number, kind: string, body: Body | null): void {
  if (kind !== "memory.distilled" || body === null) return;
  const ref = String(s["ref"]);
  const pos = Number(ref.slice(ref.indexOf(".") + 1));
  const entries = get(body, "entries");
  if (get(body, "disclosure") !== PER_ENTRY || !Array.isArray(entries)) {
    throw new MeshIndexError(
      `entry ${i} is a distillation without per-entry commitments: disclosing it would hand over ` +
        "every memory of its session",
      { check: "claim.disclosure" },
    );
  }
  const shown = entries.flatMap((e, n) => (typeof e === "string" ? [] : [n]));
  if (!(shown.length === 0 || (shown.length === 1 && shown[0] === pos))) {
    throw new MeshIndexError(`entry ${i} discloses the session's memories [${shown.join(", ")}], not memory ${pos} alone`, {
      check: "claim.disclosure",
    });
  }
}

/** Every listed entry is carried, is the leaf listed, and is what its role says; what must
 * be disclosed is, what must not be is not (Python's `check_index`). */
export function checkIndex(
  s: Statement,
  index: MeshReadIndex,
  leaves: ReadonlyMap<number, Leaf>,
  bodies: ReadonlyMap<number, Body | null>,
): void {
  const [, author] = agentsOf(s);
  const ref = String(s["ref"]);
  const mesh = String(s["mesh"]);
  for (const [i, [role, leafHash]] of index.entries) {
    const leaf = leaves.get(i);
    if (leaf === undefined) {
      throw new MeshIndexError(`the index lists entry ${i}, which the bundle does not carry`, { check: "index.missing" });
    }
    if (toHex(leaf.hash) !== leafHash) {
      throw new MeshIndexError(`entry ${i} is not the leaf the index lists`, { check: "index.leaf" });
    }
    const env = leaf.envelope;
    const body = bodies.get(i) ?? null;
    const what = `a ${env.kind} of ${env.agent}`;
    if (role === "memory") {
      checkMemoryDisclosure(s, i, env.kind, body);
      continue;
    }
    if (role === "mesh") {
      if (!MESH_KINDS.includes(env.kind) || !inMeshStream(s, leaf)) throw mismatch(i, role, what);
      if (body !== null && get(body, "mesh") !== mesh) throw mismatch(i, role, `${what} of another mesh`);
      continue;
    }
    if (env.agent !== author) throw mismatch(i, role, what);
    if (role === "status") {
      if (!DISCLOSED_STATUS_KINDS.includes(env.kind)) throw mismatch(i, role, what);
      if (body === null) {
        throw new MeshIndexError(`entry ${i} names the memory; its body is needed and not disclosed`, {
          check: "index.undisclosed",
        });
      }
      if (!namesMemory(env.kind, body, ref)) throw mismatch(i, role, `${what} that does not name memory ${ref}`);
    } else if (role === "exempt" || role === "use") {
      if (env.kind !== (role === "exempt" ? EXEMPT_KIND : USE_KIND)) throw mismatch(i, role, what);
      if (body !== null) {
        throw new MeshIndexError(`entry ${i} (${env.kind}) is disclosed: its text is not the shared memory's`, {
          check: "claim.disclosure",
        });
      }
    }
  }
}

/** A `mesh_read` bundle carries what its indexes list and the key history of the agents it
 * names (leaves only), nothing else (`claim.disclosure`); an unlisted entry that bears on a
 * claim is a fraud proof (`index.fraud`). Python's `allowed_entries`. */
export function allowedEntries(
  statements: readonly Statement[],
  indexes: readonly MeshReadIndex[],
  leaves: ReadonlyMap<number, Leaf>,
  bodies: ReadonlyMap<number, Body | null>,
): void {
  const agents = new Set([POLICY_AGENT, ...statements.flatMap((s) => agentsOf(s))]);
  const listed = new Set(indexes.flatMap((idx) => [...idx.entries.keys()]));
  for (const [i, leaf] of [...leaves.entries()].sort((a, b) => a[0] - b[0])) {
    if (listed.has(i)) continue;
    const env = leaf.envelope;
    const body = bodies.get(i) ?? null;
    if (KEY_KINDS.has(env.kind) && agents.has(env.agent)) {
      if (body !== null) throw new MeshIndexError(`entry ${i}'s key event body is disclosed`, { check: "claim.disclosure" });
      continue;
    }
    statements.forEach((s, n) => {
      if (body === null) return;
      const idx = indexes[n] as MeshReadIndex;
      const ofMesh = MESH_KINDS.includes(env.kind) && inMeshStream(s, leaf) && get(body, "mesh") === s["mesh"];
      const names =
        env.agent === String(s["author"]) &&
        [...DISCLOSED_STATUS_KINDS, EXEMPT_KIND].includes(env.kind) &&
        i > (idx.of("memory")[0] as number) &&
        namesMemory(env.kind, body, String(s["ref"]));
      if (ofMesh || names) {
        throw new ProofError(
          `fraud proof: entry ${i} (${env.kind} of ${env.agent}) bears on the claim ` +
            `${claimLine(s).slice(6)} and the log's index for it leaves the entry out`,
          { check: "index.fraud" },
        );
      }
    });
    throw new MeshIndexError(
      `entry ${i} (${env.kind} of ${env.agent}) is not listed by the mesh-read index: a mesh_read ` +
        "bundle discloses nothing else",
      { check: "claim.disclosure" },
    );
  }
}
