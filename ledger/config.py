"""Service settings, read from the environment in one place (the HTTP layer's own settings,
operator token, limits and the witness interval, are :class:`api.settings.ApiSettings`, parsed
with these parsers and carrying these settings); the
composition root (:mod:`ledger.compose`) turns them into a ledger and a memory service.
tests/unit/test_settings.py pins this table, docs/configuration.md's and the variables read to each other.

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
``ENGRAM_COMPACT_ON_SESSION_END``  distill + compact at close (1/0)     1
``ENGRAM_DISTILLER_URL``   OpenAI-compatible base URL (else rules)     unset
``ENGRAM_DISTILLER_MODEL`` model name for that endpoint                unset
``ENGRAM_DISTILLER_API_KEY``  bearer token for that endpoint           unset
``ENGRAM_EMBEDDER``        recall's embedder: wordllama or off         ``wordllama``
``ENGRAM_EMBEDDER_URL``    OpenAI-compatible base URL (embeddings)     unset
``ENGRAM_EMBEDDER_MODEL``  model name for that endpoint                unset
``ENGRAM_EMBEDDER_API_KEY``  bearer token for that endpoint            unset
``ENGRAM_EMBEDDER_DIM``    that model's vector dimension               unset
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

__all__ = ["Settings", "bool_env", "int_env", "normalize_database_url"]


def normalize_database_url(url: str) -> str:
    """Route plain ``postgresql://`` URLs to psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def int_env(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    """Variable ``name`` as an integer in [lo, hi] (unset or empty: ``default``)."""
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


def path_env(env: Mapping[str, str], name: str, default: Path) -> Path:
    """Variable ``name`` as a path, ``~`` expanded (unset or empty: ``default``, expanded
    too). A ``~user`` naming no user is a ConfigError naming the variable (Path.expanduser
    raises RuntimeError there)."""
    path = Path(env.get(name) or default)
    try:
        return path.expanduser()
    except RuntimeError as e:
        raise ConfigError(f"{name}={str(path)!r}: {e}") from e


def optional_path_env(env: Mapping[str, str], name: str) -> Path | None:
    """:func:`path_env` for a variable with no default (unset or empty: None)."""
    return path_env(env, name, Path()) if env.get(name) else None


def bool_env(env: Mapping[str, str], name: str, default: bool) -> bool:
    """Variable ``name`` as a boolean (1/true/yes/on, 0/false/no/off; unset: ``default``)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean (use 1 or 0)")


def _distiller_env(env: Mapping[str, str]) -> tuple[str | None, str | None, str | None]:
    url = env.get("ENGRAM_DISTILLER_URL") or None
    model = env.get("ENGRAM_DISTILLER_MODEL") or None
    api_key = env.get("ENGRAM_DISTILLER_API_KEY") or None
    if url is None:
        if model is not None or api_key is not None:
            raise ConfigError("ENGRAM_DISTILLER_MODEL and ENGRAM_DISTILLER_API_KEY need ENGRAM_DISTILLER_URL")
        return None, None, None
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"ENGRAM_DISTILLER_URL={url!r} is not an http(s) URL")
    if model is None:
        raise ConfigError("ENGRAM_DISTILLER_URL needs ENGRAM_DISTILLER_MODEL (the model name to ask for)")
    return url, model, api_key


def _embedder_env(env: Mapping[str, str]) -> tuple[str, str | None, str | None, str | None, int | None]:
    kind = (env.get("ENGRAM_EMBEDDER") or "wordllama").strip().lower()
    if kind not in ("wordllama", "off"):
        raise ConfigError(f"ENGRAM_EMBEDDER={kind!r} is not wordllama or off")
    url = env.get("ENGRAM_EMBEDDER_URL") or None
    model = env.get("ENGRAM_EMBEDDER_MODEL") or None
    api_key = env.get("ENGRAM_EMBEDDER_API_KEY") or None
    dim = int_env(env, "ENGRAM_EMBEDDER_DIM", 0, 1, 8192) if env.get("ENGRAM_EMBEDDER_DIM") else None
    if url is None:
        if model is not None or api_key is not None or dim is not None:
            raise ConfigError(
                "ENGRAM_EMBEDDER_MODEL, ENGRAM_EMBEDDER_API_KEY and ENGRAM_EMBEDDER_DIM need ENGRAM_EMBEDDER_URL"
            )
        return kind, None, None, None, None
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"ENGRAM_EMBEDDER_URL={url!r} is not an http(s) URL")
    if model is None or dim is None:
        raise ConfigError("ENGRAM_EMBEDDER_URL needs ENGRAM_EMBEDDER_MODEL and ENGRAM_EMBEDDER_DIM")
    return kind, url, model, api_key, dim


def _signer_record_mode(env: Mapping[str, str]) -> bool:
    mode = env.get("ENGRAM_SIGNER_RECORD_WRITE") or "after-commit"
    if mode not in ("after-commit", "before-commit"):
        raise ConfigError(f"ENGRAM_SIGNER_RECORD_WRITE={mode!r} is not after-commit or before-commit")
    return mode == "before-commit"


def _sequencer_mode(env: Mapping[str, str]) -> str:
    mode = (env.get("ENGRAM_SEQUENCER") or "process").strip()
    if mode not in ("host", "process"):
        raise ConfigError(f"ENGRAM_SEQUENCER={mode!r} is not host or process")
    return mode


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
    embedder: str = "wordllama"
    embedder_url: str | None = None
    embedder_model: str | None = None
    embedder_api_key: str | None = None
    embedder_dim: int | None = None
    witness_policy: Path | None = None
    witness_timeout_s: int = 5
    #: the signer's record of the last checkpoint it signed (ledger.signed_head); several
    #: hosts of one log share one record on shared storage
    signer_record: Path | None = None
    #: record each checkpoint before its commit (several hosts: no fork even if the database
    #: loses its last commit) rather than after it (one host: a crash never stops the log)
    signer_record_before_commit: bool = False
    #: "host": single appends of every process of this host on this database meet in one
    #: sequencer's group commit (ledger.sequencer; engram serve's default with more than one
    #: worker); "process": each process its own group commit
    sequencer: str = "process"

    @property
    def signer_record_file(self) -> Path:
        """The record's path: ``signer_record``, or beside the log key."""
        if self.signer_record is not None:
            return self.signer_record
        return self.log_key_file.with_name(self.log_key_file.name + ".signed-head")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        home = path_env(env, "ENGRAM_HOME", Path(".engram"))
        distiller_url, distiller_model, distiller_api_key = _distiller_env(env)
        embedder, embedder_url, embedder_model, embedder_api_key, embedder_dim = _embedder_env(env)
        url = env.get("ENGRAM_DATABASE_URL") or f"sqlite:///{(home / 'engram.db').resolve()}"
        return cls(
            home=home,
            database_url=normalize_database_url(url),
            log_key_file=path_env(env, "ENGRAM_LOG_KEY_FILE", home / "log.key"),
            policy_key_file=path_env(env, "ENGRAM_POLICY_KEY_FILE", home / "policy.key"),
            max_leaf_bytes=int_env(env, "ENGRAM_MAX_LEAF_BYTES", DEFAULT_MAX_LEAF_BYTES, 1024, 65_535),
            max_body_bytes=int_env(env, "ENGRAM_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES, 1, 16 * 1024 * 1024),
            hot_max_tokens=int_env(env, "ENGRAM_HOT_MAX_TOKENS", 2000, 1, 1_000_000),
            hot_max_items=int_env(env, "ENGRAM_HOT_MAX_ITEMS", 50, 1, 100_000),
            inactive_preference_days=int_env(env, "ENGRAM_INACTIVE_PREFERENCE_DAYS", 7, 1, 36_500),
            compact_on_session_end=bool_env(env, "ENGRAM_COMPACT_ON_SESSION_END", True),
            distiller_url=distiller_url,
            distiller_model=distiller_model,
            distiller_api_key=distiller_api_key,
            embedder=embedder,
            embedder_url=embedder_url,
            embedder_model=embedder_model,
            embedder_api_key=embedder_api_key,
            embedder_dim=embedder_dim,
            witness_policy=optional_path_env(env, "ENGRAM_WITNESS_POLICY"),
            witness_timeout_s=int_env(env, "ENGRAM_WITNESS_TIMEOUT_S", 5, 1, 120),
            signer_record=optional_path_env(env, "ENGRAM_SIGNER_RECORD"),
            signer_record_before_commit=_signer_record_mode(env),
            sequencer=_sequencer_mode(env),
        )
