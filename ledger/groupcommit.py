"""Group commit: concurrent single-event appends of one process integrated as one batch.

Every append of a single signed event (the SDK in process, each HTTP request) goes through
:class:`GroupCommit`. A caller queues its event and takes the leader lock; the caller that
holds it (the leader) takes every event queued so far (up to ``max_batch``, at most one per
stream) and appends them with one :meth:`Ledger.append_batch`: one writer lock, one
transaction, one checkpoint signature, one fsync. Each caller gets its own receipt (its
inclusion proof against that batch's checkpoint) or its own error.

Why this is correct:

* **Crashes.** A batch is one transaction, exactly as a multi-event ``append`` always was:
  it commits whole or not at all, and no caller is answered before the commit returned. A
  crash before the commit loses only events nobody was told were logged.
* **Concurrency.** Within the process only the leader appends; across processes (HTTP
  workers, other services) the store's writer lock orders batches as it ordered single
  appends. A batch never holds two events of one stream (the second waits for the next
  batch), because an event's ``prev`` names a leaf that only exists once its predecessor is
  logged.
* **One bad event refuses only itself.** A batch is all-or-nothing, so when it fails (a bad
  signature, a stream that moved, a precondition) its events are appended again one by one:
  each gets exactly the result, receipt or typed error, it would have had alone, and the
  failing one writes nothing. This rests on ``append_batch`` raising only when nothing of the
  batch was committed: after its commit it builds the receipts from the batch's own nodes
  and never raises, so an event is never appended twice.
* **No waiting when idle.** There is no batching window: a lone caller becomes the leader at
  once and appends a batch of one, so latency at one client is unchanged; batches grow only
  while a commit is in flight (the usual group-commit effect).
* **Pipelined acknowledgement.** After its commit the leader gives up the
  leadership, so the next batch's leader commits while this one writes the signer's record
  of the checkpoint (``record``: two fsyncs of a small file, ledger.signed_head) and answers
  its callers. No caller is answered before its batch is committed and that record written;
  records written out of order keep the larger size (``SignedHeadRecord.advance``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engram.protocol.errors import EngramError
from engram.protocol.wire import Receipt, Submission
from ledger.envelopes import Prepared, parse_envelope

__all__ = ["MAX_BATCH", "GroupCommit", "SingleAppends"]

_log = logging.getLogger("engram.log")

#: The most events one leader appends in one transaction.
MAX_BATCH = 256


class SingleAppends(Protocol):
    """Where ``Ledger.append`` hands one checked event: a :class:`GroupCommit`, or the host's
    sequencer in front of one (ledger.sequencer)."""

    def append(
        self, sub: Submission | Prepared, *, operator: bool = False, system: bool = False
    ) -> Receipt: ...


@dataclass(slots=True)
class _Waiter:
    sub: Submission | Prepared
    operator: bool
    system: bool
    stream: tuple[str, str] | None
    done: bool = False
    #: in a batch some leader took (so that leader answers it)
    taken: bool = False
    receipt: Receipt | None = None
    error: BaseException | None = None
    event: threading.Event = field(default_factory=threading.Event)


def _stream(sub: Submission | Prepared) -> tuple[str, str] | None:
    if isinstance(sub, Prepared):  # prepared at the edge: parsed already
        return sub.envelope.agent, sub.envelope.kind
    try:
        env = parse_envelope(sub.envelope)
    except EngramError:
        return None  # malformed: appended alone, where the ledger reports it
    return env.agent, env.kind


class GroupCommit:
    """Batches concurrent single appends (see the module docstring)."""

    def __init__(
        self,
        append_batch: Callable[..., list[Receipt]],
        *,
        max_batch: int = MAX_BATCH,
        record: Callable[[int, bytes], None] | None = None,
    ) -> None:
        """``record(size, root)``: written after a batch commits and before its callers are
        answered, outside the leadership; None: ``append_batch`` records it itself."""
        self._append = append_batch
        self._record = record
        self.max_batch = max_batch
        self._mutex = threading.Lock()  # guards the queue
        self._leader = threading.Lock()  # held by the one caller appending a batch
        self._queue: list[_Waiter] = []
        self._owner: int | None = None  # the leader's thread
        #: batches appended and events in them (for the benchmarks and tests)
        self.batches = 0
        self.events = 0

    def leading(self) -> bool:
        """Whether the calling thread is appending a batch now (its appends must not wait)."""
        return self._owner == threading.get_ident()

    def append(self, sub: Submission | Prepared, *, operator: bool = False, system: bool = False) -> Receipt:
        if self._owner == threading.get_ident():  # an append made while leading: never wait on ourselves
            (r,) = self._append([sub], operator=operator, system=system)
            return r
        w = _Waiter(sub, operator, system, _stream(sub))
        with self._mutex:
            self._queue.append(w)
        while not w.done:
            answer: Callable[[], None] | None = None
            with self._leader:
                self._owner = threading.get_ident()
                try:
                    if not w.done:
                        batch = self._take()
                        if batch:  # else taken by an earlier leader, which answers it
                            answer = self._run(batch)
                finally:
                    self._owner = None
            if answer is not None:
                answer()  # outside the leadership: the next batch commits meanwhile
            if not w.done and w.taken:  # its leader answers it; else lead again
                w.event.wait()
        if w.error is not None:
            raise w.error
        assert w.receipt is not None
        return w.receipt

    def _take(self) -> list[_Waiter]:
        """Up to ``max_batch`` queued events of one authority (operator/system flags), at
        most one per stream, in queue order; the rest stay queued in order. An event whose
        envelope does not parse goes alone (the ledger names its fault)."""
        with self._mutex:
            if not self._queue:
                return []
            flags = (self._queue[0].operator, self._queue[0].system)
            batch: list[_Waiter] = []
            rest: list[_Waiter] = []
            streams: set[tuple[str, str]] = set()
            for w in self._queue:
                if batch and batch[0].stream is None:
                    rest.append(w)
                elif w.stream is None:
                    (rest if batch else batch).append(w)
                elif (
                    len(batch) < self.max_batch
                    and (w.operator, w.system) == flags
                    and w.stream not in streams
                ):
                    batch.append(w)
                    streams.add(w.stream)
                else:
                    rest.append(w)
            self._queue = rest
            for w in batch:
                w.taken = True
            return batch

    def _finish(self, w: _Waiter, receipt: Receipt | None, error: BaseException | None) -> None:
        w.receipt, w.error, w.done = receipt, error, True
        w.event.set()

    def _run(self, batch: Sequence[_Waiter]) -> Callable[[], None] | None:
        """Append ``batch``; returns what answers its callers once the leadership is given
        up (the signer's record, then the receipts), or None when they are answered."""
        first = batch[0]
        later: dict[str, bool] = {} if self._record is None else {"record": False}  # recorded in answer()
        try:
            receipts = self._append(
                [w.sub for w in batch], operator=first.operator, system=first.system, **later
            )
        except EngramError as e:
            if len(batch) == 1:
                self._finish(first, None, e)
                return None
            for w in batch:  # each alone: exactly the result it would have had alone
                try:
                    (r,) = self._append([w.sub], operator=w.operator, system=w.system)
                except BaseException as one:  # handed to its own caller
                    self._finish(w, None, one)
                else:
                    self._finish(w, r, None)
            return None
        except BaseException as e:  # every waiter of the batch learns it
            for w in batch:
                self._finish(w, None, e)
            return None
        self.batches += 1
        self.events += len(batch)

        def answer() -> None:
            # The batch is committed: every caller, the leader too, is answered with its
            # receipt whatever the record does (an error here reached the
            # leader's caller as a refusal of an entry that is in the log). ``record`` reports
            # its own failure (Ledger.record_signed: logged, a health problem, and the next
            # append refused until the record is written).
            try:
                if self._record is not None:
                    last = receipts[-1].proof
                    self._record(last.size, last.root)
            except Exception:
                _log.exception("recording the signed checkpoint of a committed batch failed")
            finally:
                for w, r in zip(batch, receipts, strict=True):
                    self._finish(w, r, None)

        return answer
