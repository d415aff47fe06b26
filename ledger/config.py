"""Ledger settings, read from the environment by the outermost layer only.

=========================  ==========================================  =====================
variable                   meaning                                     default
=========================  ==========================================  =====================
``ENGRAM_HOME``            directory for the SQLite file and keys      ``./.engram``
``ENGRAM_DATABASE_URL``    SQLAlchemy URL (sqlite or postgresql)       SQLite under HOME
``ENGRAM_LOG_KEY_FILE``    the log's checkpoint signing key            ``HOME/log.key``
``ENGRAM_POLICY_KEY_FILE`` the ledger policy agent's key               ``HOME/policy.key``
``ENGRAM_MAX_LEAF_BYTES``  largest leaf accepted (<= 65535)            65535
``ENGRAM_MAX_BODY_BYTES``  largest event body accepted                 65536
``ENGRAM_HOT_MAX_TOKENS``  HOT budget (tokens)                         2000
``ENGRAM_HOT_MAX_ITEMS``   HOT cap (items)                             50
``ENGRAM_INACTIVE_PREFERENCE_DAYS``  HOT preference -> WARM after      7
``ENGRAM_COMPACT_ON_SESSION_END``  distill + compact at close (0/1)     1
``ENGRAM_DISTILLER_URL``   OpenAI-compatible base URL (else rules)     unset
``ENGRAM_DISTILLER_MODEL`` model name for that endpoint                unset
``ENGRAM_DISTILLER_API_KEY``  bearer token for that endpoint           unset
``ENGRAM_WITNESS_POLICY``  tlog-policy file: witnesses (with URLs) the  unset (no witnesses)
                           log submits checkpoints to
``ENGRAM_WITNESS_TIMEOUT_S``  per-witness request timeout (seconds)    5
=========================  ==========================================  =====================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engram.protocol.errors import ConfigError
from verifier.event import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_LEAF_BYTES

__all__ = ["Settings", "normalize_database_url"]


def normalize_database_url(url: str) -> str:
    """Route plain ``postgresql://`` URLs to psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _int_env(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as e:
        raise ConfigError(f"{name}={raw!r} is not an integer") from e
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={value} is outside [{lo}, {hi}]")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    home: Path
    database_url: str
    log_key_file: Path
    policy_key_file: Path
    max_leaf_bytes: int = DEFAULT_MAX_LEAF_BYTES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    hot_max_tokens: int = 2000
    hot_max_items: int = 50
    inactive_preference_days: int = 7
    compact_on_session_end: bool = True
    distiller_url: str | None = None
    distiller_model: str | None = None
    distiller_api_key: str | None = None
    witness_policy: Path | None = None
    witness_timeout_s: int = 5

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        home = Path(env.get("ENGRAM_HOME") or ".engram").expanduser()
        url = env.get("ENGRAM_DATABASE_URL") or f"sqlite:///{(home / 'engram.db').resolve()}"
        return cls(
            home=home,
            database_url=normalize_database_url(url),
            log_key_file=Path(env.get("ENGRAM_LOG_KEY_FILE") or home / "log.key").expanduser(),
            policy_key_file=Path(env.get("ENGRAM_POLICY_KEY_FILE") or home / "policy.key").expanduser(),
            max_leaf_bytes=_int_env(env, "ENGRAM_MAX_LEAF_BYTES", DEFAULT_MAX_LEAF_BYTES, 1024, 65_535),
            max_body_bytes=_int_env(
                env, "ENGRAM_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES, 1, 16 * 1024 * 1024
            ),
            witness_policy=Path(env["ENGRAM_WITNESS_POLICY"]).expanduser()
            if env.get("ENGRAM_WITNESS_POLICY")
            else None,
            witness_timeout_s=_int_env(env, "ENGRAM_WITNESS_TIMEOUT_S", 5, 1, 120),
        )
