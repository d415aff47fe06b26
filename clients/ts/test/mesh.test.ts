/** Memory Mesh rules (verifier/mesh.py): random event sets from fixtures/bundle-cases.json
 * folded here with the mesh and the mesh_read answers (holds, and why, word for word) the
 * Python verifier gave; plus the rules one by one (their check names as
 * tests/contract/test_mesh_sharing.py names them). */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { VerificationError } from "../src/errors.js";
import {
  Mesh,
  MeshRuleError,
  applyEvent,
  compareCodePoints,
  creatorOf,
  fold,
  meshRead,
  statementAgents,
  statementStreams,
  type Body,
  type MeshEvent,
  type MeshJson,
} from "../src/mesh.js";
import { foldStatus, type StatusEntry } from "../src/tiers.js";
import { loadFixture, throwsCheck } from "../test-support/helpers.js";

interface MeshRead {
  statement: Record<string, unknown>;
  withheld: number[];
  memory: [string, string, Body | null];
  holds: boolean;
  why: string;
}

interface MeshCase {
  mesh: string;
  events: [number, string, string, Body | null][];
  fold: MeshJson | null;
  reads: MeshRead[];
}

const fx = loadFixture<{ mesh_folds: MeshCase[] }>("bundle-cases.json");

/** A case's events with the withheld bodies null. */
function eventsOf(events: MeshCase["events"], withheld: number[]): MeshEvent[] {
  return events.map(([i, a, k, b], p) => [i, a, k, withheld.includes(p) ? null : b] as MeshEvent);
}

describe("mesh: the Python verifier's answers", () => {
  it("holds folds and reads of every outcome", () => {
    const reads = fx.mesh_folds.flatMap((c) => c.reads);
    assert.ok(reads.some((r) => r.holds));
    assert.ok(fx.mesh_folds.some((c) => c.fold === null));
    assert.ok(fx.mesh_folds.some((c) => c.fold?.dissolved_index !== null));
    for (const why of ["does not share", "does not read", "are not both members", "does not exist", "has no"]) {
      assert.ok(
        reads.some((r) => r.why.includes(why)),
        why,
      );
    }
  });

  fx.mesh_folds.forEach((c, n) => {
    it(`random events ${n}`, () => {
      // The generator folds them in reverse: the fold sorts by index.
      const folded = fold([...c.events].reverse() as MeshEvent[], c.mesh);
      assert.deepEqual(folded === null ? null : folded.toJson(), c.fold);
      for (const r of c.reads) {
        assert.deepEqual(meshRead(r.statement, eventsOf(c.events, r.withheld), r.memory), [r.holds, r.why]);
      }
    });
  });
});

const M = "ada/m";
const grant = (share: string[], read: string[], backfill?: boolean): Body =>
  backfill === undefined ? { mesh: M, share, read } : { mesh: M, share, read, backfill };

/** ada creates M, invites bob and cy, both join. */
function swarm(): Mesh {
  let m = applyEvent(null, 1, "ada", "mesh.created", { mesh: M, title: "advisors" });
  m = applyEvent(m, 2, "ada", "mesh.invited", { mesh: M, agent: "bob" });
  m = applyEvent(m, 3, "ada", "mesh.invited", { mesh: M, agent: "cy" });
  m = applyEvent(m, 4, "bob", "mesh.joined", { mesh: M });
  return applyEvent(m, 5, "cy", "mesh.joined", { mesh: M });
}

describe("mesh: the rules", () => {
  it("refuses what the log refuses, with its check", () => {
    const cases: [string, string, Body, string][] = [
      ["dee", "mesh.joined", { mesh: M }, "mesh.not_invited"],
      ["dee", "mesh.granted", grant(["LEARNING"], ["LEARNING"]), "mesh.not_member"],
      ["bob", "mesh.invited", { mesh: M, agent: "dee" }, "mesh.policy"],
      ["bob", "mesh.created", { mesh: "ada/other" }, "mesh.policy"],
      ["ada", "mesh.created", { mesh: M }, "mesh.exists"],
      ["ada", "mesh.left", { mesh: M }, "mesh.policy"],
      ["bob", "mesh.joined", { mesh: M }, "mesh.member"],
      ["ada", "mesh.invited", { mesh: M, agent: "bob" }, "mesh.member"],
      ["ada", "mesh.removed", { mesh: M, agent: "ada" }, "mesh.not_member"],
      ["ada", "mesh.granted", grant(["LUNCH"], []), "mesh.malformed"],
      ["ada", "mesh.granted", { mesh: M, share: [], read: [], backfill: null }, "mesh.malformed"],
      ["ada", "mesh.granted", { mesh: M, share: [] }, "mesh.malformed"],
      ["ada", "mesh.invited", { mesh: M }, "mesh.malformed"],
      ["ada", "mesh.joined", { mesh: "Ada/m" }, "mesh.malformed"],
      ["ada", "mesh.joined", { mesh: 7 }, "mesh.malformed"],
    ];
    for (const [agent, kind, body, check] of cases) {
      const m = swarm();
      const before = JSON.stringify(m.toJson());
      throwsCheck(() => applyEvent(m, 9, agent, kind, body), check, MeshRuleError);
      assert.equal(JSON.stringify(m.toJson()), before, `${kind} changed the mesh`);
    }
    throwsCheck(() => applyEvent(null, 1, "ada", "mesh.joined", { mesh: M }), "mesh.missing");
    assert.throws(() => applyEvent(swarm(), 1, "ada", "mesh.joined", null), /folded for a named mesh/);
    throwsCheck(() => applyEvent(swarm(), 1, "ada", "mesh.joined", ["x"]), "mesh.malformed");
    const dissolved = applyEvent(swarm(), 6, "ada", "mesh.dissolved", { mesh: M });
    throwsCheck(() => applyEvent(dissolved, 7, "bob", "mesh.left", { mesh: M }), "mesh.dissolved");
    assert.ok(new MeshRuleError("x") instanceof VerificationError);
    assert.equal(new MeshRuleError("x").check, "mesh.rule");
  });

  it("shares from the grant that began sharing, or from 0 with backfill", () => {
    const m = swarm();
    const ada = m.members.get("ada");
    assert.ok(ada !== undefined);
    applyEvent(m, 10, "ada", "mesh.granted", grant(["LEARNING"], []));
    applyEvent(m, 20, "ada", "mesh.granted", grant(["LEARNING", "CONTEXT"], ["LEARNING"]));
    assert.deepEqual([...ada.sharedSince()].sort(), [["CONTEXT", 20], ["LEARNING", 10]]);
    applyEvent(m, 30, "ada", "mesh.granted", grant(["CONTEXT"], []));
    applyEvent(m, 40, "ada", "mesh.granted", grant(["LEARNING", "CONTEXT"], [], false));
    assert.deepEqual([...ada.sharedSince()].sort(), [["CONTEXT", 20], ["LEARNING", 40]]);
    applyEvent(m, 50, "ada", "mesh.granted", grant(["LEARNING"], [], true));
    assert.deepEqual([...ada.sharedSince()], [["LEARNING", 0]]);
    assert.deepEqual([...ada.reads], []);
  });

  it("leaves, removes, rejoins after a new invitation, and dissolves", () => {
    const m = swarm();
    applyEvent(m, 6, "bob", "mesh.left", { mesh: M });
    throwsCheck(() => applyEvent(m, 7, "bob", "mesh.joined", { mesh: M }), "mesh.not_invited");
    applyEvent(m, 8, "ada", "mesh.invited", { mesh: M, agent: "bob" });
    applyEvent(m, 9, "bob", "mesh.joined", { mesh: M });
    applyEvent(m, 10, "ada", "mesh.removed", { mesh: M, agent: "cy" });
    assert.deepEqual(
      m.toJson().members.map((x) => [x.agent, x.joined_index, x.left_index]),
      [
        ["ada", 1, null],
        ["bob", 9, null],
        ["cy", 5, 10],
      ],
    );
    assert.deepEqual(
      m.activeMembers().map((x) => x.agent),
      ["ada", "bob"],
    );
    applyEvent(m, 11, "ada", "mesh.dissolved", { mesh: M });
    assert.ok(m.dissolved);
  });

  it("folds in index order, skipping what the rules refuse", () => {
    const events: MeshEvent[] = [
      [5, "bob", "mesh.joined", { mesh: M }],
      [3, "bob", "mesh.joined", { mesh: M }], // before the invitation: no effect
      [1, "ada", "mesh.created", { mesh: M }],
      [4, "ada", "mesh.invited", { mesh: M, agent: "bob" }],
    ];
    assert.deepEqual(
      fold(events)
        ?.toJson()
        .members.map((x) => [x.agent, x.joined_index]),
      [
        ["ada", 1],
        ["bob", 5],
      ],
    );
    assert.equal(fold([]), null);
    assert.equal(fold([[1, "bob", "mesh.created", { mesh: M }]]), null);
  });

  it("never reads a body-less entry as absent: it takes its most restrictive reading", () => {
    const flows = (m: Mesh | null): string[] => {
      if (m === null || m.dissolved) return [];
      const out: string[] = [];
      for (const a of m.activeMembers()) {
        for (const r of m.activeMembers()) {
          if (a.agent === r.agent) continue;
          for (const [c, since] of a.sharedSince()) if (r.reads.has(c)) out.push(`${a.agent}>${r.agent}:${c}@${since}`);
        }
      }
      return out.sort();
    };
    const base = (): MeshEvent[] => [
      [1, "ada", "mesh.created", { mesh: M }],
      [2, "ada", "mesh.invited", { mesh: M, agent: "bob" }],
      [3, "bob", "mesh.joined", { mesh: M }],
      [4, "ada", "mesh.granted", grant(["LEARNING"], [])],
      [5, "bob", "mesh.granted", grant([], ["LEARNING"])],
    ];
    assert.deepEqual(flows(fold(base(), M)), ["ada>bob:LEARNING@4"]);
    // a left member, a dissolution, a removal, a grant: each keeps its effect
    for (const [agent, kind] of [
      ["bob", "mesh.left"],
      ["ada", "mesh.dissolved"],
      ["ada", "mesh.removed"],
      ["ada", "mesh.granted"],
      ["bob", "mesh.granted"],
    ] as const) {
      assert.deepEqual(flows(fold([...base(), [6, agent, kind, null]], M)), [], kind);
    }
    const dissolved = fold([...base(), [6, "ada", "mesh.dissolved", null]], M);
    assert.equal(dissolved?.dissolvedIndex, 6);
    // a body-less creation before the mesh exists: dissolved from the start
    const created = fold([[0, "ada", "mesh.created", null], ...base()], M);
    assert.equal(created?.dissolvedIndex, 0);
    assert.deepEqual(created?.toJson().members, []);
    // a body-less join consumes the invitation, makes no member; an invitation invites no one
    const joined = fold([...base().slice(0, 2), [3, "bob", "mesh.joined", null], [4, "bob", "mesh.joined", { mesh: M }]], M);
    assert.deepEqual(joined?.toJson().invited, {});
    assert.equal(joined?.members.has("bob"), false);
    const invited = fold([base()[0] as MeshEvent, [2, "ada", "mesh.invited", null], [3, "bob", "mesh.joined", { mesh: M }]], M);
    assert.equal(invited?.members.has("bob"), false);
    throwsCheck(() => applyEvent(fold(base(), M), 9, "ada", "mesh.invited", null, M), "mesh.erased", MeshRuleError);
    assert.throws(() => fold([[1, "ada", "mesh.left", null]]), /folded for a named mesh/);
  });

  it("keeps an invitation of any name, even __proto__, as a member of its JSON", () => {
    const m = applyEvent(swarm(), 6, "ada", "mesh.invited", { mesh: M, agent: "__proto__" });
    const shown = m.toJson();
    assert.ok(Object.hasOwn(shown.invited, "__proto__"));
    assert.equal(Object.getPrototypeOf(shown.invited), Object.prototype);
    assert.equal(m.title, "advisors");
  });

  it("names the agents and streams of a statement", () => {
    const s = { predicate: "mesh_read", agent: "bob", author: "cy", mesh: "ada/m", kind: "memory.written", ref: "1.0" };
    assert.deepEqual(statementAgents(s).sort(), ["ada", "bob", "cy"]);
    // a mesh_read needs no stream complete: the log's mesh-read index lists its entries
    assert.deepEqual(statementStreams(s), []);
    assert.deepEqual(statementAgents({ predicate: "count", agent: "bob", kind: "pact.outcome" }), ["bob"]);
    const count = { predicate: "count", agent: "bob", kind: "pact.outcome" };
    assert.deepEqual(statementStreams(count), [["bob", "pact.outcome"]]);
    assert.equal(creatorOf("ada/m"), "ada");
  });

  it("compares strings by code point, as Python sorts them", () => {
    assert.ok(compareCodePoints("\u{10000}", "\uffff") > 0);
    assert.ok("\u{10000}" < "\uffff"); // what JavaScript's order would say
    assert.equal(compareCodePoints("ab", "ab"), 0);
    assert.ok(compareCodePoints("a", "ab") < 0);
  });

  it("reads a distilled memory's category by its position", () => {
    const m: MeshEvent[] = [
      [1, "ada", "mesh.created", { mesh: M }],
      [2, "ada", "mesh.invited", { mesh: M, agent: "bob" }],
      [3, "bob", "mesh.joined", { mesh: M }],
      [4, "ada", "mesh.granted", grant(["LEARNING"], [])],
      [5, "bob", "mesh.granted", grant([], ["LEARNING"])],
    ];
    const streams = m;
    const s = { predicate: "mesh_read", agent: "bob", author: "ada", mesh: M, kind: "memory.distilled", ref: "9.1" };
    const body = { entries: [{ category: "CONTEXT" }, { category: "LEARNING" }] };
    assert.deepEqual(meshRead(s, streams, ["ada", "memory.distilled", body]), [
      true,
      "ada's LEARNING memory 9.1 flows to bob through ada/m",
    ]);
    assert.deepEqual(meshRead({ ...s, ref: "9.0" }, streams, ["ada", "memory.distilled", body]), [
      false,
      "ada's grant does not share CONTEXT memories from entry 9",
    ]);
    assert.deepEqual(meshRead({ ...s, ref: "3.1" }, streams, ["ada", "memory.distilled", body]), [
      false,
      "ada's grant does not share LEARNING memories from entry 3",
    ]);
    assert.deepEqual(meshRead({ ...s, ref: "9.2" }, streams, ["ada", "memory.distilled", body]), [
      false,
      "entry 9 has no memory 2",
    ]);
  });
});

interface StatusCase {
  ref: string;
  memory: StatusEntry;
  entries: StatusEntry[];
  status: { category: string | null; tier: string; status: string; why: string };
  shareable: boolean;
}

describe("tiers: a memory's status folded as the Python verifier folds it", () => {
  const cases = loadFixture<{ status_folds: StatusCase[] }>("bundle-cases.json").status_folds;
  it("holds every outcome", () => {
    for (const s of ["active", "superseded", "archived", "erased", "unknown"]) {
      assert.ok(cases.some((c) => c.status.status === s), s);
    }
    assert.ok(cases.some((c) => c.shareable) && cases.some((c) => !c.shareable));
  });
  cases.forEach((c, n) => {
    it(`random memory ${n}`, () => {
      const got = foldStatus(c.ref, c.memory, c.entries);
      assert.deepEqual({ category: got.category, tier: got.tier, status: got.status, why: got.why }, c.status);
      assert.equal(got.shareable, c.shareable);
    });
  });
});
