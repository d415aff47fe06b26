/**
 * The tier and status of one memory at a checkpoint, folded from the entries that name it.
 * Port of verifier/tiers.py: the same rules, the same answers (specs/mesh.md, "Proof";
 * specs/memory-events.md §4).
 *
 * The fold reads nothing but the entries the log listed as bearing on the memory
 * (mesh_index.ts). Where a fact only the projection knows (a duplicate's flags, the state of
 * the memory a replacement or confirmation names) could keep the memory out of WARM, the
 * fold assumes it does: a replacement supersedes, a confirmation supersedes.
 */

/** From this server time on (2026-11-24T00:00:00Z; memory events v2), a `memory.written`
 * without `tier` is filed by {@link defaultTier}; before it the log filed it in HOT. */
export const DEFAULT_TIER_V2_FROM_US = 1_795_478_400_000_000;

export const CATEGORIES: ReadonlySet<string> = new Set([
  "COMMITMENT",
  "PERFORMANCE",
  "LEARNING",
  "FAILURE",
  "PREFERENCE",
  "ANOMALY",
  "CONTEXT",
]);

/** Entries of the author that change a memory's status or tier, disclosed in a proof. */
export const DISCLOSED_STATUS_KINDS: readonly string[] = Object.freeze([
  "memory.tier_changed",
  "memory.archived",
  "memory.superseded",
  "memory.replaced",
  "memory.erased",
]);
/** Listed without their bodies: the log's index says which memory they name. */
export const EXEMPT_KIND = "memory.decay_exempted";
export const USE_KIND = "memory.accessed";

type Body = { readonly [key: string]: unknown };

function isObject(value: unknown): value is Body {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function get(body: Body, name: string): unknown {
  return Object.hasOwn(body, name) ? body[name] : undefined;
}

/** Python's `type(v) is int` (JSON numbers the strict parser gave are integers already). */
function isInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v);
}

/** The one default tier of a memory written without one. */
export function defaultTier(category: string, tags: readonly string[], session: string | null): string {
  return session || category === "PREFERENCE" || tags.includes("blocker") ? "HOT" : "WARM";
}

function refIndex(ref: string): number {
  return Number(ref.slice(0, ref.indexOf(".")));
}

/** Whether an entry of `kind` with `body` names memory `ref` the way its kind changes a
 * memory (Python's `names_memory`). */
export function namesMemory(kind: string, body: Body, ref: string): boolean {
  if (DISCLOSED_STATUS_KINDS.includes(kind) && kind !== "memory.erased") return get(body, "item") === ref;
  if (kind === EXEMPT_KIND) return get(body, "item") === ref;
  if (kind === USE_KIND) {
    const items = get(body, "items");
    return Array.isArray(items) && items.includes(ref);
  }
  if (kind === "memory.erased") {
    const refs = get(body, "refs");
    const also = get(body, "also");
    const index = get(body, "index");
    const i = refIndex(ref);
    return (
      (Array.isArray(refs) && refs.includes(ref)) ||
      (isInt(index) && index === i) ||
      (Array.isArray(also) && also.some((a) => isInt(a) && a === i))
    );
  }
  return false;
}

export interface MemoryStatus {
  readonly ref: string;
  readonly category: string | null;
  readonly tier: string;
  readonly status: string;
  readonly why: string;
  /** Active and WARM: the only memories a mesh ever shares. */
  readonly shareable: boolean;
}

interface State {
  tier: string;
  status: string;
  exempt: boolean;
  linked: boolean;
  createdUs: number;
  lastUseUs: number;
  why: string;
}

function lastActivity(st: State): number {
  return Math.max(st.createdUs, st.lastUseUs);
}

function initial(
  ref: string,
  kind: string,
  timestampUs: number,
  body: Body | null,
): [category: string | null, state: State | null, why: string] {
  const pos = Number(ref.slice(ref.indexOf(".") + 1));
  if (body === null) return [null, null, `the body of entry ${refIndex(ref)} is not disclosed (erased?)`];
  let entry: Body;
  let tier: string;
  if (kind === "memory.distilled") {
    const entries = get(body, "entries");
    if (!Array.isArray(entries) || pos >= entries.length) {
      return [null, null, `entry ${refIndex(ref)} has no memory ${pos}`];
    }
    const e: unknown = entries[pos];
    if (!isObject(e)) return [null, null, `memory ${ref} is not disclosed`];
    entry = e;
    tier = "HOT";
  } else if (kind === "memory.written" && pos === 0) {
    entry = body;
    const t = get(body, "tier");
    if (typeof t === "string") {
      tier = t;
    } else if (timestampUs >= DEFAULT_TIER_V2_FROM_US) {
      const tags = get(body, "tags");
      const session = get(body, "session");
      tier = defaultTier(
        String(get(body, "category")),
        Array.isArray(tags) ? tags.filter((x): x is string => typeof x === "string") : [],
        typeof session === "string" ? session : null,
      );
    } else {
      tier = "HOT"; // memory events v1
    }
  } else {
    return [null, null, `entry ${refIndex(ref)} has no memory ${pos}`];
  }
  const category = get(entry, "category");
  if (typeof category !== "string" || !CATEGORIES.has(category)) return [null, null, `memory ${ref} has no category`];
  const provenance = get(entry, "provenance");
  const linked =
    Array.isArray(provenance) &&
    provenance.some((p) => isObject(p) && (get(p, "source_type") === "pact" || get(p, "source_type") === "eval"));
  return [
    category,
    {
      tier,
      status: "active",
      exempt: get(entry, "decay_exempt") === true,
      linked,
      createdUs: timestampUs,
      lastUseUs: 0,
      why: `${ref} written ${tier}`,
    },
    "",
  ];
}

function timeBasisHolds(st: State, timestampUs: number, body: Body): boolean {
  const la = get(body, "last_activity_us");
  const nb = get(body, "not_before_us");
  if (Object.hasOwn(body, "last_activity_us") && (!isInt(la) || la !== lastActivity(st))) return false;
  return !(Object.hasOwn(body, "not_before_us") && (!isInt(nb) || timestampUs < nb));
}

function apply(st: State, index: number, timestampUs: number, kind: string, body: Body | null): void {
  if (kind === USE_KIND) {
    st.lastUseUs = timestampUs;
    return;
  }
  if (kind === EXEMPT_KIND) {
    st.exempt = true;
    if (st.status === "archived") {
      st.status = "active";
      st.why = `restored by the exemption at entry ${index}`;
    }
    return;
  }
  if (body === null) {
    st.status = "unknown";
    st.why = `entry ${index} names the memory but its body is not disclosed`;
    return;
  }
  if (kind === "memory.erased") {
    st.status = "erased";
    st.why = `erased by entry ${index}`;
  } else if (kind === "memory.superseded" || kind === "memory.replaced") {
    if (st.status === "active") {
      st.status = "superseded";
      st.why = `${kind === "memory.superseded" ? "corrected" : "replaced"} by entry ${index}`;
    }
  } else if (kind === "memory.tier_changed") {
    const src = get(body, "from");
    const dst = get(body, "to");
    if (typeof src !== "string" || typeof dst !== "string") {
      st.status = "unknown";
      st.why = `entry ${index} is a tier change without from and to`;
    } else if (st.status === "active" && st.tier === src && st.tier !== "COLD" && timeBasisHolds(st, timestampUs, body)) {
      if (Object.hasOwn(body, "confirms")) {
        st.status = "superseded";
        st.why = `confirmed into another memory by entry ${index}`;
      } else {
        st.tier = dst;
        st.why = `moved ${src} to ${dst} by entry ${index}`;
      }
    }
  } else if (
    kind === "memory.archived" &&
    st.status === "active" &&
    st.tier === "WARM" &&
    !st.exempt &&
    !st.linked &&
    timeBasisHolds(st, timestampUs, body)
  ) {
    st.status = "archived";
    st.why = `archived by entry ${index}`;
  }
}

/** One entry as the fold reads it: (index, server time, kind, body or null where withheld). */
export type StatusEntry = readonly [index: number, timestampUs: number, kind: string, body: Body | null];

/** Memory `ref`'s status at the checkpoint (Python's `fold_status`): `memory` is its entry,
 * `entries` those that name it, in any order. */
export function foldStatus(ref: string, memory: StatusEntry, entries: readonly StatusEntry[]): MemoryStatus {
  const [index, timestampUs, kind, body] = memory;
  const [category, st, why] = initial(ref, kind, timestampUs, body);
  if (st === null) {
    return Object.freeze({ ref, category: null, tier: "NONE", status: "unknown", why, shareable: false });
  }
  for (const [i, ts, k, b] of [...entries].sort((a, c) => a[0] - c[0])) {
    if (i > index) apply(st, i, ts, k, b);
  }
  return Object.freeze({
    ref,
    category,
    tier: st.tier,
    status: st.status,
    why: st.why,
    shareable: st.status === "active" && st.tier === "WARM" && category !== null,
  });
}
