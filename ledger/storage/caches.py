"""What one process keeps of the log's immutable, committed state, and the checks that
decide what a stored row may stand for: the proof cache (nodes and checkpoints), the
checkpoint signature check, and the key state derived from the log's own key entries.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection

from engram.protocol.errors import ConfigError, LogIntegrityError
from ledger.storage.dbapi import Db
from ledger.storage.rows import StoredCheckpoint, blob, checkpoint_row
from ledger.storage.sql import IN_CHUNK, marks
from verifier.errors import VerificationError
from verifier.event import Leaf
from verifier.keys import KeyRecord
from verifier.note import VerifierKey, verify_checkpoint

__all__ = ["CheckpointCheck", "KeyStreams", "ProofCache", "cross_check_keys", "latest_checkpoint_row"]

_log = logging.getLogger("ledger.storage.store")

#: Merkle nodes one process keeps in memory (LRU): a proof's upper levels are shared by
#: every proof, so a warm cache answers most of a proof without the database. ~10 MiB.
NODE_CACHE_ENTRIES = 1 << 16
#: Checkpoints (and sizes known to have none) one process keeps in memory (LRU).
CHECKPOINT_CACHE_ENTRIES = 4096


class ProofCache:
    """What one process keeps of the log's immutable, committed proof material.

    Why caching is sound: a Merkle node ``(level, idx)`` and the checkpoint signed at a size
    never change once committed (append-only tables, specs/storage.md), and only committed
    values enter the cache (read in a committed read transaction, or written by this
    process's own append after its commit returned). "No checkpoint at size s" is
    permanent once the log is larger than s (checkpoints are only signed at the size a
    commit reaches), so it is cached too, but only below the latest size seen. The
    latest size seen only grows; a size beyond it is always looked up. Several processes
    each keep their own cache; none can be stale, because nothing cached can change.

    Someone who rewrites the tables behind the service's back is not served by the cache
    (the process keeps proving the tree it committed); ``engram audit`` is what compares
    the tables with the leaves.
    """

    def __init__(self, nodes: int = NODE_CACHE_ENTRIES, checkpoints: int = CHECKPOINT_CACHE_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._nodes: OrderedDict[tuple[int, int], bytes] = OrderedDict()
        self._cps: OrderedDict[int, StoredCheckpoint | None] = OrderedDict()
        self._max_nodes = nodes
        self._max_cps = checkpoints
        #: the largest checkpoint size known to be committed
        self.latest = -1

    def nodes(
        self, coords: Iterable[tuple[int, int]]
    ) -> tuple[dict[tuple[int, int], bytes], list[tuple[int, int]]]:
        """(the cached nodes among ``coords``, the coordinates not cached)."""
        got: dict[tuple[int, int], bytes] = {}
        missing: list[tuple[int, int]] = []
        with self._lock:
            for c in coords:
                h = self._nodes.get(c)
                if h is None:
                    missing.append(c)
                else:
                    self._nodes.move_to_end(c)
                    got[c] = h
        return got, missing

    def add_nodes(self, items: Iterable[tuple[tuple[int, int], bytes]]) -> None:
        with self._lock:
            for c, h in items:
                self._nodes[c] = h
                self._nodes.move_to_end(c)
            while len(self._nodes) > self._max_nodes:
                self._nodes.popitem(last=False)

    def checkpoints(self, sizes: Iterable[int]) -> tuple[dict[int, StoredCheckpoint], list[int]]:
        """(the cached checkpoints among ``sizes``, the sizes not known); a size known to
        have no checkpoint is in neither."""
        got: dict[int, StoredCheckpoint] = {}
        unknown: list[int] = []
        with self._lock:
            for size in sizes:
                if size not in self._cps:
                    unknown.append(size)
                    continue
                self._cps.move_to_end(size)
                cp = self._cps[size]
                if cp is not None:
                    got[size] = cp
        return got, unknown

    def add_checkpoints(
        self, found: Mapping[int, StoredCheckpoint], looked_up: Iterable[int], latest: int
    ) -> None:
        """Record ``found`` and, for sizes looked up below ``latest`` without one, that there is none."""
        with self._lock:
            self.latest = max(self.latest, latest)
            for size in looked_up:
                if size in found:
                    self._cps[size] = found[size]
                elif size < latest:
                    self._cps[size] = None
                else:
                    continue
                self._cps.move_to_end(size)
            while len(self._cps) > self._max_cps:
                self._cps.popitem(last=False)

    def committed(
        self,
        node_rows: Iterable[Mapping[str, Any]],
        checkpoint: StoredCheckpoint,
        border: Iterable[tuple[tuple[int, int], bytes]] = (),
    ) -> None:
        """What this process's own append committed (called after the commit returned): the
        nodes it wrote, the border it extended (read in its transaction) and its checkpoint."""
        self.add_nodes(border)
        self.add_nodes(((r["level"], r["idx"]), r["hash"]) for r in node_rows)
        self.add_checkpoints({checkpoint.size: checkpoint}, [checkpoint.size], checkpoint.size)


#: How many of the newest checkpoint rows are looked at for one whose signature verifies.
LATEST_CANDIDATES = 8
#: Verified checkpoint notes one process remembers (a dict lookup instead of a signature).
VERIFIED_NOTES = 4096


class CheckpointCheck:
    """Accepts a checkpoint row only if its note is signed by the log key and names the
    row's own size and root (a row INSERTed past the end, with any bytes, must
    not become what the service serves). Verified notes are remembered (bounded): a note
    that verified once always will."""

    def __init__(self, log_key: VerifierKey) -> None:
        self.log_key = log_key
        self._lock = threading.Lock()
        self._ok: OrderedDict[bytes, tuple[int, bytes]] = OrderedDict()

    def valid(self, cp: StoredCheckpoint) -> bool:
        with self._lock:
            known = self._ok.get(cp.note)
        if known is None:
            try:
                v = verify_checkpoint(cp.note, self.log_key)
            except VerificationError:
                return False
            known = (v.size, v.root)
            with self._lock:
                self._ok[cp.note] = known
                while len(self._ok) > VERIFIED_NOTES:
                    self._ok.popitem(last=False)
        return known[0] == cp.size and hmac.compare_digest(known[1], cp.root)

    def refused(self, cp: StoredCheckpoint) -> None:
        _log.error(
            "checkpoints row of size %d is not a checkpoint signed by this log's key (note or "
            "columns changed, or a row inserted): ignored; run `engram audit`",
            cp.size,
        )


#: The kinds whose entries change an agent's key state (verifier.keys).
KEY_KINDS = ("key.registered", "key.rotated", "key.revoked")
#: Parsed key entries one process remembers, by leaf bytes (an entry never changes).
KEY_ENTRIES_CACHED = 65_536


class KeyStreams:
    """Key state derived from the log's own key entries.

    ``agent_keys`` is a table the append path must be able to UPDATE (a rotation retires a
    key), so whoever can write to it could bring a revoked, stolen key back with one
    ``UPDATE agent_keys SET retired_at = NULL``. The decisions that matter (which key may
    sign an event at an index, which key authenticates a request) therefore come from the
    ``key.*`` entries of the agents concerned, replayed in log order: each agent has a
    handful, read with one indexed query, and parsed once per process (cached by their
    exact bytes, the validation tag: a changed row is a different key). Leaves are
    append-only (UPDATE and DELETE are refused by triggers, and a row inserted past the
    end is not below the signed size these reads are bounded by); ``engram audit`` checks
    the rest (every leaf against the tree, every column against its leaf)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parsed: OrderedDict[bytes, tuple[int, str, str, str | None, bytes | None]] = OrderedDict()

    def _parse(self, raw: bytes) -> tuple[int, str, str, str | None, bytes | None]:
        with self._lock:
            hit = self._parsed.get(raw)
        if hit is not None:
            return hit
        leaf = Leaf.from_bytes(raw)
        self._keep(leaf)
        return self._fields(leaf)

    @staticmethod
    def _fields(leaf: Leaf) -> tuple[int, str, str, str | None, bytes | None]:
        env = leaf.envelope
        nk = env.new_key
        return (
            leaf.index,
            env.agent,
            env.kind,
            None if nk is None else nk.key_id,
            None if nk is None else nk.public_key,
        )

    def _keep(self, leaf: Leaf) -> None:
        with self._lock:
            self._parsed[leaf.raw] = self._fields(leaf)
            while len(self._parsed) > KEY_ENTRIES_CACHED:
                self._parsed.popitem(last=False)

    def appended(self, leaves: Iterable[Leaf]) -> None:
        """The key entries among ``leaves``, which this process built and the log committed:
        their parse is known (a leaf's fields are what it was built from; ``Leaf.build``
        and ``Leaf.from_bytes`` are inverse, verifier tests), so a later derivation that
        reads the same bytes back does not parse them again (a fresh agent's
        registration leaf costs a key check and a proof-of-possession verify to parse)."""
        for leaf in leaves:
            if leaf.envelope.kind in KEY_KINDS:
                self._keep(leaf)

    def derive(
        self, conn: Db | Connection, agents: Iterable[str], below: int
    ) -> tuple[dict[str, KeyRecord], dict[str, str | None]]:
        """(every key of ``agents`` with its span, each agent's active key id or None), from
        their key entries below index ``below`` (``conn``: a driver connection, or a
        SQLAlchemy connection whose driver connection is used).

        Raises:
            LogIntegrityError: a key entry's row disagrees with its bytes, or the entries do
                not replay (check ``state.leaves``).
        """
        names = sorted(set(agents))
        keys: dict[str, KeyRecord] = {}
        active: dict[str, str | None] = dict.fromkeys(names)
        db = conn if isinstance(conn, Db) else Db.of(conn)
        ph = db.ph
        rows: list[tuple[int, bytes]] = []
        for i in range(0, len(names), IN_CHUNK):
            chunk = names[i : i + IN_CHUNK]
            rows += [
                (int(r[0]), blob(r[1], "leaves", r[0], "leaf"))
                for r in db.rows(
                    f"SELECT idx, leaf FROM leaves WHERE agent IN ({marks(ph, len(chunk))}) "  # noqa: S608
                    f"AND kind IN ({marks(ph, len(KEY_KINDS))}) AND idx < {ph}",
                    (*chunk, *KEY_KINDS, below),
                )
            ]
        rows.sort()
        for idx, raw in rows:
            try:
                index, agent, kind, new_id, new_pk = self._parse(raw)
            except VerificationError as e:
                raise LogIntegrityError(
                    f"leaves row {idx} does not parse as a leaf: {e}", check="state.leaves"
                ) from e
            if index != idx or agent not in active or kind not in KEY_KINDS:
                raise LogIntegrityError(
                    f"leaves row {idx}: its index, agent or kind columns disagree with its bytes "
                    f"(index {index}, agent {agent!r}, kind {kind!r})",
                    check="state.leaves",
                )
            old = active[agent]
            if kind != "key.registered":
                if old is None:
                    raise LogIntegrityError(
                        f"leaves row {idx}: {kind} of {agent} without an active key", check="state.leaves"
                    )
                how = "rotated" if kind == "key.rotated" else "revoked"
                rec = keys[old]
                keys[old] = KeyRecord(
                    key_id=rec.key_id,
                    agent=agent,
                    public_key=rec.public_key,
                    added_at=rec.added_at,
                    retired_at=idx,
                    retired_how=how,
                )
                active[agent] = None
            if kind != "key.revoked":
                if new_id is None or new_pk is None:
                    raise LogIntegrityError(
                        f"leaves row {idx}: {kind} without a new key", check="state.leaves"
                    )
                keys[new_id] = KeyRecord(key_id=new_id, agent=agent, public_key=new_pk, added_at=idx)
                active[agent] = new_id
        return keys, active


def cross_check_keys(
    table: Mapping[str, KeyRecord],
    table_active: Mapping[str, str | None],
    log: Mapping[str, KeyRecord],
    log_active: Mapping[str, str | None],
) -> None:
    """Refuse (LogIntegrityError, check ``state.agent_keys``) when the ``agent_keys`` rows
    read for a batch disagree with the key state its log entries give, naming the row and
    column: the log never extends a database whose key table was changed behind it."""
    problems: list[str] = []
    for key_id, row in sorted(table.items()):
        want = log.get(key_id)
        if want is None:
            problems.append(f"agent_keys row {key_id}: no key entry of agent {row.agent!r} registers it")
            continue
        for col in ("agent", "public_key", "added_at", "retired_at", "retired_how"):
            got, exp = getattr(row, col), getattr(want, col)
            if got != exp:
                problems.append(f"agent_keys row {key_id}: {col} is {got!r}, the log says {exp!r}")
    for agent, active_id in sorted(table_active.items()):
        if agent in log_active and log_active[agent] != active_id:
            problems.append(
                f"agent_keys: the active key of {agent!r} is {active_id!r}, the log says {log_active[agent]!r}"
            )
    for key_id, want in sorted(log.items()):
        if key_id not in table and (want.agent in table_active) and log_active.get(want.agent) == key_id:
            problems.append(f"agent_keys row {key_id} (active key of {want.agent!r}) is missing")
    if problems:
        raise LogIntegrityError(
            "the key table disagrees with the log's key entries; refusing to append (run `engram audit`): "
            + "; ".join(problems[:8]),
            check="state.agent_keys",
        )


#: The newest checkpoint rows at sizes the log has reached (the candidates of
#: :func:`latest_checkpoint_row`).
_LATEST_SQL = (
    "SELECT size, root, note, signed_at_us FROM checkpoints "  # noqa: S608 - constants only
    "WHERE size <= (SELECT coalesce(max(idx) + 1, 0) FROM leaves) "
    f"ORDER BY size DESC LIMIT {LATEST_CANDIDATES}"
)


def latest_checkpoint_row(conn: Db | Connection, check: CheckpointCheck | None) -> StoredCheckpoint:
    """The newest checkpoint row whose signature verifies (the newest row without a check)."""
    # Only rows at sizes the log has reached are candidates: rows INSERTed ahead of it never
    # are (eight of them stopped the ledger from opening).
    rows = (conn if isinstance(conn, Db) else Db.of(conn)).rows(_LATEST_SQL)
    if not rows:
        raise ConfigError("the log has no checkpoint; run `engram init`")
    for r in rows:
        cp = checkpoint_row(r)
        if check is None or check.valid(cp):
            return cp
        check.refused(cp)
    raise LogIntegrityError(
        f"none of the {len(rows)} newest checkpoint rows carries this log's signature; run `engram audit`",
        check="state.checkpoints",
    )
