"""The composition root: settings in, a ledger and its memory service out.

The only place that wires the service's parts together. The log receives what it runs on
every append (the write gate and the memory preconditions, :class:`~ledger.log.AppendRules`)
from here instead of importing the memory subsystem, and the memory service shares the
log's gate. The CLI, the HTTP service, the embedded demo and the benchmarks all build their
ledgers through these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from engram.protocol.gate import WriteGate
from engram.protocol.keyfiles import LogKey
from ledger.config import Settings
from ledger.log import AppendRules, Clock, Ledger, system_clock_us
from ledger.memory.distill import ChatCompletionsDistiller, Distiller, RuleBasedDistiller
from ledger.memory.embed import Embedder, OpenAIEmbedder, WordLlamaEmbedder
from ledger.memory.policy import PolicyConfig
from ledger.memory.preconditions import MemoryPreconditions
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory

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


def open_ledger(settings: Settings, *, clock: Clock = system_clock_us) -> Ledger:
    """Open the initialised ledger ``settings`` names, with the memory rules."""
    return Ledger.open(settings, clock=clock, rules=memory_rules())


def init_ledger(settings: Settings, origin: str | None, *, clock: Clock = system_clock_us) -> Ledger:
    """``engram init``: keys, database and log for ``settings``, with the memory rules."""
    return Ledger.init_home(settings, origin, clock=clock, rules=memory_rules())


def create_ledger(
    engine: Engine,
    log_key: LogKey,
    *,
    clock: Clock = system_clock_us,
    policy_key: Ed25519PrivateKey | None = None,
    **limits: Any,
) -> Ledger:
    """A new log in ``engine``'s database (tests and benchmarks), with the memory rules."""
    return Ledger.create(engine, log_key, clock=clock, policy_key=policy_key, rules=memory_rules(), **limits)


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
