"""Witnessing a ledger's checkpoints: submit the newest (or a given) checkpoint to the
witnesses of ``ENGRAM_WITNESS_POLICY``, store the cosignatures that verify, and make sure a
bundle is built at a cosigned checkpoint. The witness protocol itself (client and server)
is :mod:`ledger.witness`; this module joins it to a :class:`~ledger.log.Ledger`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from engram.protocol.errors import ConfigError
from ledger.log import Ledger
from ledger.witness import WitnessRound, WitnessSubmitter
from verifier.witness import verify_cosignatures

__all__ = ["ensure_witnessed", "witness_checkpoint"]


def _quorum(ledger: Ledger, submitter: WitnessSubmitter, note: bytes) -> bool:
    verified = verify_cosignatures(note, submitter.policy.keys)
    names = {w.name for w in submitter.policy.witnesses if w.key in verified}
    return submitter.policy.satisfied(names)


def witness_checkpoint(ledger: Ledger, size: int | None = None) -> WitnessRound:
    """Submit the latest checkpoint (or the one of ``size``) to the log's witnesses and
    store the cosignatures that verify. Needs ``ENGRAM_WITNESS_POLICY``."""
    submitter = ledger.witnesses
    if submitter is None:
        raise ConfigError("no witnesses configured: set ENGRAM_WITNESS_POLICY to a tlog-policy file")
    cp = ledger.latest_checkpoint() if size is None else ledger.store.checkpoint(size)
    if cp is None:
        raise ConfigError(f"no checkpoint was signed at size {size}")
    stored = ledger.store.witnessed_sizes()
    known = {w.name: stored.get(str(w.key), 0) for w in submitter.targets}

    def prove(old: int, new: int) -> Sequence[bytes]:
        return ledger.prove_consistency(old, new).hashes

    results = submitter.submit(cp.note, cp.size, known, prove)
    by_name = {w.name: w.key for w in submitter.targets}
    lines = {str(by_name[r.witness]): r.cosignature for r in results if r.cosignature is not None}
    ledger.store.add_cosignatures(cp.size, lines, now_us=int(time.time() * 1_000_000))
    note = ledger.cosigned_note(cp)
    return WitnessRound(
        size=cp.size, results=tuple(results), quorum=_quorum(ledger, submitter, note), note=note
    )


def ensure_witnessed(ledger: Ledger) -> None:
    """Before a bundle is built: if witnesses are configured and the latest checkpoint lacks
    the quorum, submit it now (a witness that cannot be reached only costs its cosignature;
    the buyer's policy decides whether what remains is enough)."""
    submitter = ledger.witnesses
    if submitter is None:
        return
    cp = ledger.latest_checkpoint()
    if not _quorum(ledger, submitter, ledger.cosigned_note(cp)):
        witness_checkpoint(ledger, cp.size)
