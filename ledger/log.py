"""One log, composed: its append side and its read side behind one face.

:class:`Ledger` is what the service, the HTTP layer and the tests hold. It is built from two
rooms that do not know each other: the append side (:class:`ledger.append.Appender`, with its
prepare edge :class:`ledger.edge.PrepareEdge`) and the read side
(:class:`ledger.reader.LogReader`). The face itself only checks that the store, the key and
the limits belong together, and carries the one operation that needs both sides (a forced
revocation reads a stream head and appends). Constructing a log from settings (migrate,
initialise, open) is the composition root's (:mod:`ledger.compose`).

The values the log is handed and answers (:class:`AppendRules`, :class:`PolicyEvent`,
:class:`Receipt`, ...) are re-exported here, where they have always been imported from.
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.errors import ConfigError, RejectedEventError
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import ConsistencyProof, InclusionProof, Receipt, Submission
from ledger.append import Appender
from ledger.edge import Admit, AppendRules, BatchValidator, Clock, PolicyEvent, system_clock_us
from ledger.envelopes import Prepared
from ledger.reader import LogReader
from ledger.storage.store import SqlStore
from verifier.event import DEFAULT_MAX_LEAF_BYTES, POLICY_AGENT, agent_key_id
from verifier.note import VerifierKey

__all__ = [
    "Admit",
    "AppendRules",
    "BatchValidator",
    "Clock",
    "ConsistencyProof",
    "InclusionProof",
    "Ledger",
    "PolicyEvent",
    "Prepared",
    "Receipt",
    "Submission",
    "system_clock_us",
]


class Ledger(Appender, LogReader):
    """One log: its store, its signing key, its limits and its clock; appends through the
    append side, reads and proves through the read side."""

    def __init__(
        self,
        store: SqlStore,
        log_key: LogKey,
        *,
        clock: Clock = system_clock_us,
        max_leaf_bytes: int = 65_535,
        max_body_bytes: int = 64 * 1024,
        policy_key: Ed25519PrivateKey | None = None,
        rules: AppendRules | None = None,
        signed_head: Path | None = None,
    ) -> None:
        state = store.state()
        if state is None:
            raise ConfigError("the database holds no log; run `engram init`")
        if state.origin != log_key.name or state.log_vkey != log_key.vkey:
            raise ConfigError(
                f"the log key ({log_key.vkey}) is not the key of this database's log ({state.log_vkey})"
            )
        if not 1 <= max_leaf_bytes <= DEFAULT_MAX_LEAF_BYTES:
            raise ConfigError(f"max_leaf_bytes {max_leaf_bytes} is outside [1, 65535] (the tlog-tiles limit)")
        if max_body_bytes < 1:
            raise ConfigError("max_body_bytes must be positive")
        # Checkpoint rows count only if this log's key signed them.
        store.trust(VerifierKey.parse(log_key.vkey))
        if policy_key is not None:
            registered = store.active_key_id(POLICY_AGENT)
            own = agent_key_id(policy_key.public_key().public_bytes_raw())
            if registered is not None and registered != own:
                raise ConfigError("the policy key file is not the policy agent's registered key")
        LogReader.__init__(self, store)
        Appender.__init__(
            self,
            store,
            log_key,
            clock=clock,
            max_leaf_bytes=max_leaf_bytes,
            max_body_bytes=max_body_bytes,
            policy_key=policy_key,
            rules=rules or AppendRules(),
            signed_head=signed_head,
        )

    @property
    def vkey(self) -> str:
        return self.log_key.vkey

    # -- policy authority ---------------------------------------------------------------

    def force_revoke(self, agent: str, reason: str) -> Receipt:
        """Revoke ``agent``'s active key with the ledger policy key (lost or compromised key)."""
        if self.policy_key is None:
            raise ConfigError("this ledger has no policy key; forced revocation is unavailable")
        if agent == POLICY_AGENT:
            raise RejectedEventError(
                "the policy agent cannot be force-revoked (it would end forced revocation)",
                check="ledger.policy_agent",
            )

        head = self.stream_head(agent, "key.revoked")
        signer = AgentSigner(agent, self.policy_key, origin=self.origin)
        sub = signer.event(
            "key.revoked",
            {"reason": reason, "by": POLICY_AGENT},
            version=0 if head is None else head.version + 1,
            prev=None if head is None else head.leaf_hash.hex(),
            client_time_us=self.clock(),
        )
        return self.append([sub], system=True)[0]
