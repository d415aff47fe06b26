"""``engram audit``: re-derive every table from the leaves and name each row that differs.

The leaves are the log. Everything else the database holds is derived from them: the
columns beside each leaf, the Merkle nodes, the signed checkpoints, the stream heads, the
key table, the log-state row, the bodies' commitments and the memory projection. An
operator who wants to know whether anything was changed behind the service's back (a
changed, deleted or inserted row; a rolled-back database) runs the audit; it compares every
derived row with what the leaves give and names each difference by table, row and column.

How, in bounded memory:

1. **Leaves, in index order, a batch at a time**, through :class:`verifier.replay.LogReplay`
   (the offline auditor's checks: strict leaf bytes, dense indices, increasing timestamps,
   signatures under the key valid at that index, stream chains). Each row's columns are
   compared with its own bytes. Every Merkle node a leaf completes is compared with its
   stored row; each checkpoint row with the tree at its size (signature, size, root,
   ``signed_at_us``); each body with its envelope's commitment.
2. **Rows past the end**: leaves, bodies, nodes and checkpoints beyond the replayed tree.
3. **Derived state**: ``log_state`` (identity, size, last timestamp), ``stream_heads`` and
   ``agent_keys`` against the replay's heads and key history (their size is the number of
   streams and keys, not entries).
4. **The memory projection**, agent by agent: each agent's entries replayed with
   :func:`ledger.memory.state.evolve` in memory (the projection is per agent) and every
   column of every ``mem_items`` / ``mem_sessions`` row compared, when the projection has
   caught up with the log (a lagging projection is reported, not compared).

Not compared: ``mem_vectors`` (embeddings, recomputed by a rebuild; not a security input),
``cosignatures`` (checked against the witnesses' keys by clients, which hold the policy),
``request_nonces`` (replay protection only), ``ui_revoked_sessions`` (web UI sign-outs, which
expire).

Memory holds one batch of leaves, the stream heads and keys, and one agent's projection.
"""

# ruff: noqa: S608 - every statement here is constant text and the driver's placeholder; values are parameters
from __future__ import annotations

import hmac
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ledger.memory.projection_rows import ITEM_COLS, SESSION_COLS, clone_item, item_row
from ledger.memory.state import (
    InMemoryState,
    Item,
    LoggedEvent,
    evolve,
    ref_key,
    stand_in,
    stand_ins,
)
from ledger.signed_head import ForkRefusedError, SignedHead, SignedHeadRecord
from ledger.storage.store import SqlStore
from verifier.errors import VerificationError
from verifier.event import Leaf, commitment_of
from verifier.jcs import parse_canonical
from verifier.merkle import EMPTY_ROOT, leaf_hash
from verifier.note import VerifierKey, verify_checkpoint
from verifier.replay import LogReplay

__all__ = ["AuditReport", "Finding", "audit"]

#: Leaves read per batch (also the unit of progress).
BATCH = 1000
#: Findings kept in the report (the rest are counted).
MAX_FINDINGS = 1000


@dataclass(frozen=True, slots=True)
class Finding:
    """One derived row that differs from what the leaves give."""

    table: str
    row: str  # the row's key, e.g. "idx=12" or "agent='alice', ref='3.0'"
    column: str | None  # None: the whole row (missing, extra, unparsable)
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "row": self.row, "column": self.column, "message": self.message}

    def __str__(self) -> str:
        where = f"{self.table} [{self.row}]" + (f".{self.column}" if self.column else "")
        return f"{where}: {self.message}"


@dataclass(slots=True)
class AuditReport:
    entries: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    more: int = 0  # findings beyond MAX_FINDINGS, counted only
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings and not self.more

    def add(self, table: str, row: str, column: str | None, message: str) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(Finding(table, row, column, message))
        else:
            self.more += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "entries": self.entries,
            "seconds": round(self.seconds, 3),
            "findings": [f.to_json() for f in self.findings],
            "more_findings": self.more,
            "notes": self.notes,
        }


def _hex(b: bytes | None) -> str | None:
    return None if b is None else bytes(b).hex()


class _Audit:
    def __init__(
        self,
        store: SqlStore,
        log_key: VerifierKey,
        progress: Callable[[int, int], None] | None,
        signed_head: SignedHeadRecord | None = None,
    ) -> None:
        self.signed_head = signed_head
        #: the signer's record, read before the replay; the root the replay has at its size
        self.recorded: SignedHead | None = None
        self.root_at_record: bytes | None = None
        self.store = store
        self.log_key = log_key
        self.progress = progress
        self.report = AuditReport()
        self.replay = LogReplay(log_key.name)
        self.completed: list[tuple[int, int, bytes]] = []
        self.replay.on_nodes = self.completed.extend
        #: (agent, kind) -> (version, leaf hash, index) of the replayed head
        self.heads: dict[tuple[str, str], tuple[int, bytes, int]] = {}
        self.last_ts = 0
        self.prev_cp = 0  # the size of the last checkpoint row compared
        self.ph = "?" if store.engine.dialect.paramstyle == "qmark" else "%s"

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self.store.read() as conn:
            return list(conn.exec_driver_sql(sql, params))

    # -- 1. the leaves, in order ----------------------------------------------------------

    def run(self) -> AuditReport:
        t0 = time.perf_counter()
        ph = self.ph
        self._read_signed_head()
        total = int(self._rows("SELECT count(*) FROM leaves")[0][0])
        state = self._rows("SELECT origin, log_vkey, size, last_timestamp_us FROM log_state WHERE id = 1")
        for cp in self._checkpoint_rows(0, 0):
            self._check_checkpoint(cp, EMPTY_ROOT)
        lo = 0
        while True:
            rows = self._rows(
                "SELECT idx, leaf_hash, agent, kind, version, key_id, timestamp_us, leaf FROM leaves "
                f"WHERE idx >= {ph} ORDER BY idx LIMIT {BATCH}",
                (lo,),
            )
            if not rows:
                break
            hi = int(rows[-1][0]) + 1
            bodies: dict[int, tuple[bytes, bytes]] = {}
            for r in self._rows(
                f"SELECT idx, salt, body FROM bodies WHERE idx >= {ph} AND idx < {ph}", (lo, hi)
            ):
                salt, body = (
                    self._blob("bodies", f"idx={r[0]}", "salt", r[1]),
                    self._blob("bodies", f"idx={r[0]}", "body", r[2]),
                )
                if salt is not None and body is not None:
                    bodies[int(r[0])] = (salt, body)
            cps = {int(r[0]): r for r in self._checkpoint_rows(lo + 1, hi)}
            gap = False
            for r in rows:
                idx = int(r[0])
                if idx != self.replay.size:
                    self.report.add(
                        "leaves",
                        f"idx={self.replay.size}",
                        None,
                        f"missing (the next row is idx={idx}); the leaves after it are not compared",
                    )
                    gap = True
                    break
                self._leaf(r, bodies.get(idx))
                if self.recorded is not None and self.replay.size == self.recorded.size:
                    self.root_at_record = self.replay.tree.root()
                cp = cps.get(self.replay.size)
                if cp is not None:
                    self._check_checkpoint(cp, self.replay.tree.root())
            self._check_nodes()  # every node this batch completed, a query per level
            if gap:
                break
            lo = hi
            if self.progress is not None:
                self.progress(self.replay.size, total)
        size = self.replay.size
        self.report.entries = size
        self._check_signed_head(size)
        self._past_the_end(size)
        self._log_state(state, size)
        self._stream_heads()
        self._agent_keys()
        self._projection(size)
        self.report.seconds = time.perf_counter() - t0
        return self.report

    # -- the signer's record -------------------------------------

    def _read_signed_head(self) -> None:
        if self.signed_head is None:
            return
        try:
            self.recorded = self.signed_head.read()
        except ForkRefusedError as e:
            self.report.add("signer record", str(self.signed_head.path), None, str(e))

    def _check_signed_head(self, size: int) -> None:
        """The log must extend the last checkpoint the signer recorded signing: the append
        path refuses to sign on otherwise (``signer.fork``), so a rollback is a finding here
        too, not "clean"."""
        if self.signed_head is None:
            return
        where = str(self.signed_head.path)
        head = self.recorded
        if head is None:
            if size > 0 and self.signed_head.path.exists() is False:
                self.report.add(
                    "signer record", where, None,
                    f"missing while the log has {size} entries (signer.record_missing): the log will not "
                    "sign until it is re-anchored (engram log reanchor)",
                )  # fmt: skip
            return
        if head.size > size:
            self.report.add(
                "signer record", where, "size",
                f"the signer signed a checkpoint of size {head.size}, the database's log has {size} entries: "
                "the database was rolled back or restored (signer.fork)",
            )  # fmt: skip
        elif self.root_at_record is None or not hmac.compare_digest(self.root_at_record, head.root):
            self.report.add(
                "signer record", where, "root",
                f"the database's tree at size {head.size} is not the one the signer signed: a fork (signer.fork)",
            )  # fmt: skip

    def _checkpoint_rows(self, lo: int, hi: int) -> list[Any]:
        return self._rows(
            f"SELECT size, root, note, signed_at_us, prev_size FROM checkpoints WHERE size >= {self.ph} AND size <= {self.ph} "
            "ORDER BY size",
            (lo, hi),
        )

    def _blob(self, table: str, row: str, column: str, value: object) -> bytes | None:
        """A binary column's bytes, or None after a finding naming its type (a
        body rewritten as TEXT once crashed the audit with a TypeError)."""
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        self.report.add(table, row, column, f"holds {type(value).__name__}, not bytes")
        return None

    def _leaf(self, r: Any, body: tuple[bytes, bytes] | None) -> None:
        idx = int(r[0])
        row = f"idx={idx}"
        raw = self._blob("leaves", row, "leaf", r[7])
        if raw is None:
            return
        lh = leaf_hash(raw)
        leaf: Leaf | None = None
        try:
            leaf = self.replay.parse(raw)
        except VerificationError as e:
            self.report.add("leaves", row, "leaf", f"not a well-formed leaf of this log: {e}")
        if leaf is not None:
            try:
                self.replay.add_parsed(leaf)
            except VerificationError as e:
                self.report.add("leaves", row, "leaf", f"the replay refuses it: {e}")
                leaf_ok = False
            else:
                leaf_ok = True
            env = leaf.envelope
            expected = {
                "leaf_hash": lh,
                "agent": env.agent,
                "kind": env.kind,
                "version": env.version,
                "key_id": env.key_id,
                "timestamp_us": leaf.timestamp_us,
            }
            stored = {
                "leaf_hash": self._blob("leaves", row, "leaf_hash", r[1]),
                "agent": r[2],
                "kind": r[3],
                "version": int(r[4]),
                "key_id": r[5],
                "timestamp_us": int(r[6]),
            }
            for col, want in expected.items():
                got = stored[col]
                if got != want:
                    shown = (_hex(got), _hex(want)) if isinstance(want, bytes) else (got, want)
                    self.report.add("leaves", row, col, f"is {shown[0]!r}, its leaf bytes say {shown[1]!r}")
            if leaf.index != idx:
                self.report.add("leaves", row, "idx", f"the leaf bytes say index {leaf.index}")
            if not leaf_ok:  # keep the tree and clock going so later rows are still compared
                self.completed.extend(self.replay.tree.append(lh))
                self.replay.last_timestamp_us = max(self.replay.last_timestamp_us, leaf.timestamp_us)
            self.heads[env.stream] = (env.version, lh, idx)
            self.last_ts = leaf.timestamp_us
            self._body(row, env.kind, env.body_commitment, body)
        else:
            self.completed.extend(self.replay.tree.append(lh))

    def _body(self, row: str, kind: str, commitment: str, body: tuple[bytes, bytes] | None) -> None:
        if body is None:
            return  # withheld or erased: the leaf keeps its commitment, nothing to compare
        salt, data = body
        try:
            opened = hmac.compare_digest(commitment_of(kind, salt, data), commitment)
        except VerificationError:
            opened = False  # a body that does not parse, or a per-entry body of a bad form
        if not opened:
            self.report.add(
                "bodies", row, "body", "salt and body do not match the commitment signed in the leaf"
            )
            return
        try:
            parse_canonical(data, max_bytes=1 << 24)
        except VerificationError as e:
            self.report.add("bodies", row, "body", f"not canonical JSON: {e}")

    def _check_nodes(self) -> None:
        if not self.completed:
            return
        done, self.completed[:] = list(self.completed), []
        by_level: dict[int, dict[int, bytes]] = {}
        for lv, i, h in done:
            by_level.setdefault(lv, {})[i] = h
        ph = self.ph
        for lv, want in by_level.items():
            ids = sorted(want)
            got = {
                int(r[0]): self._blob("nodes", f"level={lv}, idx={r[0]}", "hash", r[1]) or b""
                for r in self._rows(
                    f"SELECT idx, hash FROM nodes WHERE level = {ph} AND idx IN ({', '.join([ph] * len(ids))})",
                    (lv, *ids),
                )
            }
            for i in ids:
                if i not in got:
                    self.report.add("nodes", f"level={lv}, idx={i}", None, "missing")
                elif not hmac.compare_digest(got[i], want[i]):
                    self.report.add(
                        "nodes",
                        f"level={lv}, idx={i}",
                        "hash",
                        f"is {got[i].hex()}, the leaves give {want[i].hex()}",
                    )

    def _check_checkpoint(self, r: Any, root: bytes) -> None:
        size, signed_at = int(r[0]), int(r[3])
        row = f"size={size}"
        stored_root = self._blob("checkpoints", row, "root", r[1])
        note = self._blob("checkpoints", row, "note", r[2])
        if stored_root is None or note is None:
            return
        prev = r[4]
        if size == 0 and prev is not None:
            self.report.add("checkpoints", row, "prev_size", f"is {prev}; the first checkpoint extends none")
        elif prev is not None and int(prev) != self.prev_cp:
            missing = "" if int(prev) < self.prev_cp else " (no such row: deleted?)"
            self.report.add(
                "checkpoints",
                row,
                "prev_size",
                f"says it extends the checkpoint of size {prev}{missing}, but the previous row is size {self.prev_cp}",
            )
        self.prev_cp = size
        try:
            v = verify_checkpoint(note, self.log_key)
        except VerificationError as e:
            self.report.add("checkpoints", row, "note", f"not a checkpoint signed by this log's key: {e}")
            v = None
        if v is not None and (v.size != size or not hmac.compare_digest(v.root, stored_root)):
            self.report.add(
                "checkpoints", row, "note", "the signed note names another size or root than the row"
            )
        if not hmac.compare_digest(stored_root, root):
            self.report.add(
                "checkpoints", row, "root", f"is {stored_root.hex()}, the leaves give {root.hex()}"
            )
        if size > 0 and signed_at != self.last_ts:
            self.report.add(
                "checkpoints",
                row,
                "signed_at_us",
                f"is {signed_at}, the last entry it covers was stamped {self.last_ts}",
            )

    # -- 2. rows past the end ---------------------------------------------------------------

    def _past_the_end(self, size: int) -> None:
        ph = self.ph
        for (idx,) in self._rows(f"SELECT idx FROM leaves WHERE idx >= {ph} ORDER BY idx LIMIT 100", (size,)):
            self.report.add("leaves", f"idx={idx}", None, f"beyond the contiguous log of {size} entries")
        for (idx,) in self._rows(f"SELECT idx FROM bodies WHERE idx >= {ph} ORDER BY idx LIMIT 100", (size,)):
            self.report.add("bodies", f"idx={idx}", None, f"a body of no entry (the log has {size})")
        for lv in range(64):  # a node (lv, i) covers entries [i << lv, (i + 1) << lv)
            for (idx,) in self._rows(
                f"SELECT idx FROM nodes WHERE level = {ph} AND idx >= {ph} ORDER BY idx LIMIT 100",
                (lv, size >> lv),
            ):
                self.report.add(
                    "nodes", f"level={lv}, idx={idx}", None, f"covers entries beyond the log's {size}"
                )
        for (s,) in self._rows(
            f"SELECT size FROM checkpoints WHERE size > {ph} ORDER BY size LIMIT 100", (size,)
        ):
            self.report.add("checkpoints", f"size={s}", None, f"a checkpoint beyond the log's {size} entries")

    # -- 3. derived state -------------------------------------------------------------------

    def _log_state(self, state: list[Any], size: int) -> None:
        if not state:
            self.report.add("log_state", "id=1", None, "missing")
            return
        origin, vkey, claimed, last_ts = state[0]
        want = {"origin": self.log_key.name, "size": size, "last_timestamp_us": self.last_ts}
        got = {"origin": origin, "size": int(claimed), "last_timestamp_us": int(last_ts)}
        for col, w in want.items():
            if got[col] != w:
                self.report.add("log_state", "id=1", col, f"is {got[col]!r}, the leaves give {w!r}")
        try:
            same_key = VerifierKey.parse(vkey) == self.log_key
        except VerificationError:
            same_key = False
        if not same_key:
            self.report.add(
                "log_state", "id=1", "log_vkey", "is not the verifier key of the log key audited with"
            )

    def _stream_heads(self) -> None:
        seen: set[tuple[str, str]] = set()
        for agent, kind, version, lh, idx in self._rows(
            "SELECT agent, kind, version, leaf_hash, idx FROM stream_heads"
        ):
            key = (agent, kind)
            row = f"agent={agent!r}, kind={kind!r}"
            want = self.heads.get(key)
            if want is None:
                self.report.add("stream_heads", row, None, "a head of no stream in the log")
                continue
            seen.add(key)
            got: tuple[int, bytes, int] = (int(version), bytes(lh), int(idx))
            for col, g, w in zip(("version", "leaf_hash", "idx"), got, want, strict=True):
                if g != w:
                    shown = (_hex(g), _hex(w)) if isinstance(g, bytes) and isinstance(w, bytes) else (g, w)
                    self.report.add(
                        "stream_heads", row, col, f"is {shown[0]!r}, the log's head is {shown[1]!r}"
                    )
        for agent, kind in sorted(set(self.heads) - seen):
            self.report.add("stream_heads", f"agent={agent!r}, kind={kind!r}", None, "missing")

    def _agent_keys(self) -> None:
        keys = self.replay.keys.keys
        seen: set[str] = set()
        for key_id, agent, public_key, added_at, retired_at, retired_how in self._rows(
            "SELECT key_id, agent, public_key, added_at, retired_at, retired_how FROM agent_keys"
        ):
            row = f"key_id={key_id!r}"
            want = keys.get(key_id)
            if want is None:
                self.report.add("agent_keys", row, None, "no key entry of the log registers this key")
                continue
            seen.add(key_id)
            got = {
                "agent": agent,
                "public_key": bytes(public_key),
                "added_at": int(added_at),
                "retired_at": None if retired_at is None else int(retired_at),
                "retired_how": retired_how,
            }
            for col, g in got.items():
                w = getattr(want, col)
                if g != w:
                    shown = (_hex(g), _hex(w)) if isinstance(w, bytes) else (g, w)
                    self.report.add("agent_keys", row, col, f"is {shown[0]!r}, the log says {shown[1]!r}")
        for key_id in sorted(set(keys) - seen):
            self.report.add("agent_keys", f"key_id={key_id!r}", None, "missing")

    # -- 4. the memory projection -----------------------------------------------------------

    def _projection(self, size: int) -> None:
        cursor = self._rows("SELECT applied_size FROM mem_cursor WHERE id = 1")
        if not cursor:
            self.report.add("mem_cursor", "id=1", None, "missing")
            return
        applied = int(cursor[0][0])
        if applied > size:
            self.report.add(
                "mem_cursor", "id=1", "applied_size", f"is {applied}, beyond the log's {size} entries"
            )
            return
        if applied < size:
            self.report.notes.append(
                f"the memory projection has applied {applied} of {size} entries (it catches up in the "
                "background): not compared"
            )
            return
        agents = [r[0] for r in self._rows("SELECT DISTINCT agent FROM leaves ORDER BY agent")]
        for agent in agents:
            self._agent_projection(agent, size)
        known = set(agents)
        for table in ("mem_items", "mem_sessions"):
            for (agent,) in self._rows(f"SELECT DISTINCT agent FROM {table}"):
                if agent not in known:
                    self.report.add(
                        table, f"agent={agent!r}", None, "rows of an agent with no entry in the log"
                    )

    def _events(self, agent: str, size: int) -> Iterator[LoggedEvent]:
        ph = self.ph
        last = -1
        # Erased session entries replay as their session id only, erased version 1
        # replacement decisions as their decision (ledger.memory.state.stand_ins).
        erasures = []
        for (body,) in self._rows(
            "SELECT b.body FROM leaves l JOIN bodies b ON b.idx = l.idx "
            f"WHERE l.agent = {ph} AND l.kind = 'memory.erased' AND l.idx < {ph}",
            (agent, size),
        ):
            try:
                parsed = parse_canonical(bytes(body), max_bytes=1 << 24)
            except (VerificationError, TypeError):
                continue  # already reported with its row
            erasures.append(parsed if isinstance(parsed, dict) else None)
        replays = stand_ins(erasures)
        while True:
            rows = self._rows(
                "SELECT l.idx, l.leaf, b.body FROM leaves l LEFT JOIN bodies b ON b.idx = l.idx "
                f"WHERE l.agent = {ph} AND l.idx > {ph} AND l.idx < {ph} ORDER BY l.idx LIMIT {BATCH}",
                (agent, last, size),
            )
            if not rows:
                return
            for _idx, raw, body in rows:
                if not isinstance(raw, (bytes, memoryview)) or not (
                    body is None or isinstance(body, (bytes, memoryview))
                ):
                    continue  # a column of the wrong type: already reported with its row
                try:
                    leaf = Leaf.from_bytes(bytes(raw))
                    parsed = None if body is None else parse_canonical(bytes(body), max_bytes=1 << 24)
                except VerificationError:
                    continue  # already reported with its row
                if not isinstance(parsed, dict) and parsed is not None:
                    continue
                yield stand_in(
                    LoggedEvent(
                        index=leaf.index,
                        timestamp_us=leaf.timestamp_us,
                        agent=leaf.envelope.agent,
                        kind=leaf.envelope.kind,
                        body=parsed,
                    ),
                    replays,
                )
            last = int(rows[-1][0])

    def _agent_projection(self, agent: str, size: int) -> None:
        state = _IndexedState()
        for ev in self._events(agent, size):
            try:
                evolve(state, ev)
            except (KeyError, TypeError, ValueError) as e:  # a body the log admitted cannot do this
                self.report.add("bodies", f"idx={ev.index}", "body", f"does not replay: {e!r}")
        items = {it.ref: item_row(it) for it in state.all_items()}
        self._compare(agent, "mem_items", "ref", ITEM_COLS, items)
        sessions = {
            s.session: {**s.to_json(), "hot_snapshot": json.dumps(s.hot_snapshot)}
            for s in state.all_sessions()
        }
        self._compare(agent, "mem_sessions", "session", SESSION_COLS, sessions)

    def _compare(
        self, agent: str, table: str, key: str, cols: tuple[str, ...], want: dict[str, dict[str, Any]]
    ) -> None:
        """Every row of ``table`` for ``agent`` against the replay's rows (by ``key``)."""
        for r in self._rows(f"SELECT * FROM {table} WHERE agent = {self.ph}", (agent,)):
            got = dict(r._mapping)
            row = f"agent={agent!r}, {key}={got[key]!r}"
            expected = want.pop(got[key], None)
            if expected is None:
                self.report.add(table, row, None, "a row the log does not give")
                continue
            for col in cols:
                if _norm(got[col]) != _norm(expected[col]):
                    self.report.add(table, row, col, f"is {got[col]!r}, the log gives {expected[col]!r}")
        for name in want:
            self.report.add(table, f"agent={agent!r}, {key}={name!r}", None, "missing")


class _IndexedState(InMemoryState):
    """The in-memory state port with a hash map for duplicates (one agent's projection can
    hold many items: the base class scans them all for each write) and cheap copies."""

    def __init__(self) -> None:
        super().__init__()
        self._by_norm: dict[tuple[str, str], set[str]] = {}

    def item(self, agent: str, ref: str) -> Item | None:
        it = self.items.get((agent, ref))
        return None if it is None else clone_item(it)

    def put_item(self, item: Item) -> None:
        self.items[(item.agent, item.ref)] = clone_item(item)
        self._by_norm.setdefault((item.agent, item.norm), set()).add(item.ref)

    def find_duplicate(self, agent: str, tier: str, norm: str) -> Item | None:
        best: Item | None = None
        for ref in self._by_norm.get((agent, norm), ()):
            it = self.items[(agent, ref)]
            same = it.status == "active" and it.tier == tier and it.norm == norm
            if same and (best is None or ref_key(it.ref) < ref_key(best.ref)):
                best = it
        return None if best is None else clone_item(best)


def _norm(v: Any) -> Any:
    # Booleans come back as 0/1 from SQLite; JSON text compares as text.
    return int(v) if isinstance(v, bool) else v


def audit_ledger(ledger: Any, *, progress: Callable[[int, int], None] | None = None) -> AuditReport:
    """:func:`audit` of a :class:`~ledger.log.Ledger`: its store, its key and its signer's
    record (what ``engram audit`` and ``POST /v1/operator/audit`` run)."""
    return audit(ledger.store, ledger.verifier_key, progress=progress, signed_head=ledger.signed_head)


def audit(
    store: SqlStore,
    log_key: VerifierKey,
    *,
    progress: Callable[[int, int], None] | None = None,
    signed_head: SignedHeadRecord | None = None,
) -> AuditReport:
    """Compare every derived row of ``store`` with what its leaves give (module docstring),
    and the log with the signer's record of what it signed (``signed_head``, if given)."""
    return _Audit(store, log_key, progress, signed_head).run()
