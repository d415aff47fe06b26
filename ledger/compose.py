"""The composition root: settings in, a ledger and its memory service out.

The only place that wires the service's parts together, and the only place a log is
constructed from settings (migrate, initialise, open: :func:`create_ledger`,
:func:`init_ledger`, :func:`open_ledger`). The log receives what it runs on
every append (the write gate and the memory preconditions, :class:`~ledger.log.AppendRules`)
from here instead of importing the memory subsystem, and the memory service shares the
log's gate. The CLI, the HTTP service, the embedded demo and the benchmarks all build their
ledgers through these functions.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from engram.protocol.errors import ConfigError
from engram.protocol.gate import WriteGate
from engram.protocol.keyfiles import (
    LogKey,
    format_agent_key,
    format_log_signer_key,
    load_agent_key,
    load_log_key,
    write_private_file,
)
from engram.protocol.signer import AgentSigner
from ledger.config import Settings
from ledger.log import AppendRules, Clock, Ledger, system_clock_us
from ledger.memory.distill import ChatCompletionsDistiller, Distiller, RuleBasedDistiller
from ledger.memory.embed import Embedder, OpenAIEmbedder, WordLlamaEmbedder
from ledger.memory.policy import PolicyConfig
from ledger.memory.preconditions import MemoryPreconditions
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.sequencer import attach as attach_sequencer
from ledger.storage.db import current_revision, head_revision, make_engine, migrate
from ledger.storage.store import SqlStore, StoredCheckpoint
from ledger.witness import load_submitter
from verifier.event import POLICY_AGENT
from verifier.merkle import EMPTY_ROOT
from verifier.note import check_origin, checkpoint_text, sign_note

__all__ = [
    "Services",
    "create_ledger",
    "distiller",
    "embedder",
    "init_ledger",
    "memory_rules",
    "memory_service",
    "open_ledger",
    "open_services",
    "policy_config",
]


def memory_rules(gate: WriteGate | None = None) -> AppendRules:
    """The append rules of a memory ledger: one write gate, and the memory preconditions
    (sessions open before turns, supersessions name live items, ...) checked with it."""
    gate = gate or WriteGate()
    return AppendRules(gate=gate, validators=(MemoryPreconditions(gate),))


def create_ledger(
    engine: Engine,
    log_key: LogKey,
    *,
    clock: Clock = system_clock_us,
    policy_key: Ed25519PrivateKey | None = None,
    rules: AppendRules | None = None,
    signed_head: Path | None = None,
    **limits: Any,
) -> Ledger:
    """A new log in ``engine``'s database: migrate it, record the log identity, sign the
    empty checkpoint, and register the ledger's policy agent (index 0) when a policy key is
    given. ``rules``: the memory rules unless given (``AppendRules()``: a bare log);
    ``signed_head``: the signer's record file (ledger.signed_head), or None for none."""
    migrate(engine)
    store = SqlStore(engine)
    note = sign_note(checkpoint_text(log_key.name, 0, EMPTY_ROOT), log_key.name, log_key.private_key)
    store.initialise(
        origin=log_key.name,
        log_vkey=log_key.vkey,
        checkpoint=StoredCheckpoint(size=0, root=EMPTY_ROOT, note=note, signed_at_us=clock()),
    )
    ledger = Ledger(
        store,
        log_key,
        clock=clock,
        policy_key=policy_key,
        rules=memory_rules() if rules is None else rules,
        signed_head=signed_head,
        **limits,
    )
    if policy_key is not None:
        signer = AgentSigner(POLICY_AGENT, policy_key, origin=ledger.origin)
        ledger.append([signer.registration(client_time_us=clock())], operator=True, system=True)
    return ledger


def init_ledger(
    settings: Settings,
    origin: str | None,
    *,
    clock: Clock = system_clock_us,
    rules: AppendRules | None = None,
) -> Ledger:
    """``engram init``: keys (unless given), database and log for ``settings``, with the
    memory rules unless ``rules`` are given.

    With ``origin`` None, an existing key file's name is the origin, else a unique local
    origin is made up.
    """
    if settings.log_key_file.exists():
        log_key = load_log_key(settings.log_key_file)
        if origin is not None and log_key.name != origin:
            raise ConfigError(
                f"{settings.home} already holds the log {log_key.name!r} (key file {settings.log_key_file}), "
                f"not {origin!r}: to start a new log, point ENGRAM_HOME at an empty directory "
                "(e.g. export ENGRAM_HOME=$PWD/mylog); to keep this one, run engram init without --origin"
            )
    else:
        if origin is None:
            origin = f"localhost/engram-{secrets.token_hex(4)}"
        check_origin(origin)
        log_key = LogKey(origin, Ed25519PrivateKey.generate())
        write_private_file(settings.log_key_file, format_log_signer_key(log_key))
    if settings.policy_key_file.exists():
        _, policy_key = load_agent_key(settings.policy_key_file)
    else:
        policy_key = Ed25519PrivateKey.generate()
        write_private_file(settings.policy_key_file, format_agent_key(POLICY_AGENT, policy_key))
    ledger = create_ledger(
        make_engine(settings.database_url),
        log_key,
        clock=clock,
        policy_key=policy_key,
        rules=rules,
        signed_head=settings.signer_record_file,
        max_leaf_bytes=settings.max_leaf_bytes,
        max_body_bytes=settings.max_body_bytes,
    )
    if ledger.signed_head is not None:
        ledger.signed_head.before_commit = settings.signer_record_before_commit
    return ledger


def open_ledger(
    settings: Settings, *, clock: Clock = system_clock_us, rules: AppendRules | None = None
) -> Ledger:
    """Open the initialised ledger ``settings`` names, with the memory rules unless ``rules``
    are given; refuses a database whose schema is not current."""
    log_key = load_log_key(settings.log_key_file)
    engine = make_engine(settings.database_url)
    if current_revision(engine) != head_revision():
        raise ConfigError("the database schema is missing or outdated; run `engram init`")
    policy_key = None
    if settings.policy_key_file.exists():
        _, policy_key = load_agent_key(settings.policy_key_file)
    ledger = Ledger(
        SqlStore(engine),
        log_key,
        clock=clock,
        max_leaf_bytes=settings.max_leaf_bytes,
        max_body_bytes=settings.max_body_bytes,
        policy_key=policy_key,
        rules=memory_rules() if rules is None else rules,
        signed_head=settings.signer_record_file,
    )
    if ledger.signed_head is not None:
        ledger.signed_head.before_commit = settings.signer_record_before_commit
    if settings.witness_policy is not None:
        ledger.witnesses = load_submitter(settings.witness_policy, timeout_s=settings.witness_timeout_s)
    if settings.sequencer == "host":  # lazy: no lock, socket or thread until the first append
        attach_sequencer(ledger, settings.database_url, settings.home)
    return ledger


def policy_config(settings: Settings) -> PolicyConfig:
    """The memory policy the settings name (HOT caps, preference idling, compaction at close)."""
    return PolicyConfig(
        hot_max_tokens=settings.hot_max_tokens,
        hot_max_items=settings.hot_max_items,
        inactive_preference_days=settings.inactive_preference_days,
        compact_on_session_end=settings.compact_on_session_end,
    )


def distiller(settings: Settings) -> Distiller:
    """The OpenAI-compatible chat-completions distiller when ``ENGRAM_DISTILLER_URL`` is set,
    else the rule-based one."""
    if settings.distiller_url is None or settings.distiller_model is None:
        return RuleBasedDistiller()
    return ChatCompletionsDistiller(
        url=settings.distiller_url, model=settings.distiller_model, api_key=settings.distiller_api_key
    )


_WORDLLAMA = WordLlamaEmbedder()  # one loaded model per process, shared by every service


def embedder(settings: Settings) -> Embedder | None:
    """Recall's embedder: an OpenAI-compatible endpoint when ``ENGRAM_EMBEDDER_URL`` is set,
    none with ``ENGRAM_EMBEDDER=off``, else the offline wordllama model."""
    if settings.embedder_url is not None and settings.embedder_model and settings.embedder_dim:
        return OpenAIEmbedder(
            url=settings.embedder_url,
            model=settings.embedder_model,
            dimensions=settings.embedder_dim,
            api_key=settings.embedder_api_key,
        )
    if settings.embedder == "off":
        return None
    return _WORDLLAMA


def memory_service(ledger: Ledger, settings: Settings) -> MemoryService:
    """The memory service over ``ledger`` with the settings' policy, distiller and embedder."""
    return MemoryService(
        ledger, config=policy_config(settings), distiller=distiller(settings), embedder=embedder(settings)
    )


@dataclass(frozen=True, slots=True)
class Services:
    ledger: Ledger
    memory: MemoryService

    def transport(self) -> InProcessMemory:
        """The in-process transport for agents of this process: their events go in through
        the memory service's door, as the HTTP routes hand them in, and
        the client's ``AgentMemory`` reads through it what the routes serve."""
        return InProcessMemory(self.memory)


def open_services(settings: Settings, *, clock: Clock = system_clock_us) -> Services:
    """What every command needs: the ledger and its memory service, as the settings say."""
    ledger = open_ledger(settings, clock=clock)
    return Services(ledger=ledger, memory=memory_service(ledger, settings))
