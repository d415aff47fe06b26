"""The HTTP service's settings, parsed once at the top with the service's own.

One settings system (a pydantic-settings class and the ledger's
dataclass were round-tripped through an environment dict): :meth:`ApiSettings.from_env`
reads the HTTP layer's variables with the same parsers as :class:`ledger.config.Settings`
(typed :class:`ConfigError` naming the variable) and carries the service's settings parsed
from the same environment (``service``); ``engram serve`` and the ASGI factory parse it once
and hand it down (``create_app``), which opens the ledger from ``service``.

Outside dev mode the service refuses to start with a missing, short or well-known operator
token: a default secret is no secret.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from engram.protocol.errors import ConfigError
from ledger.config import Settings, bool_env, int_env

__all__ = ["HTTP_PARSERS", "ApiSettings"]

_KNOWN_BAD = {"", "changeme", "change-me", "secret", "operator", "admin", "password", "dev"}
#: the least estimated entropy of an operator token (a random 24-character URL-safe token has about 100)
MIN_TOKEN_BITS = 72


def token_bits(token: str) -> float:
    """A token's entropy as its characters' Shannon entropy times its length, and 0 for a
    token that repeats a shorter piece (``aaaa...``, ``abcabc...``)."""
    import math
    from collections import Counter

    n = len(token)
    if n == 0 or (token + token).find(token, 1) < n:  # periodic: a repetition of a shorter string
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(token).values()) * n


#: field -> (variable, least, most): the HTTP layer's numeric settings and their bounds
_BOUNDS: dict[str, tuple[str, int, int]] = {
    "max_request_bytes": ("ENGRAM_MAX_REQUEST_BYTES", 1024, 64 * 1024 * 1024),
    "max_header_bytes": ("ENGRAM_MAX_HEADER_BYTES", 4096, 1_048_576),
    "max_headers": ("ENGRAM_MAX_HEADERS", 16, 1000),
    "request_timeout_s": ("ENGRAM_REQUEST_TIMEOUT_S", 1, 600),
    "signature_window_s": ("ENGRAM_SIGNATURE_WINDOW_S", 5, 3600),
    "rate_limit_per_minute": ("ENGRAM_RATE_LIMIT_PER_MINUTE", 1, 1_000_000),
    "rate_limit_burst": ("ENGRAM_RATE_LIMIT_BURST", 1, 1_000_000),
    "rate_limit_per_client_per_minute": ("ENGRAM_RATE_LIMIT_PER_CLIENT_PER_MINUTE", 1, 10_000_000),
    "rate_limit_per_client_burst": ("ENGRAM_RATE_LIMIT_PER_CLIENT_BURST", 1, 10_000_000),
    "max_active_requests": ("ENGRAM_MAX_ACTIVE_REQUESTS", 1, 1024),
    "max_active_per_identity": ("ENGRAM_MAX_ACTIVE_PER_IDENTITY", 1, 1024),
    "witness_interval_s": ("ENGRAM_WITNESS_INTERVAL_S", 0, 86_400),
}
_SCOPES = ("host", "process")
#: ENGRAM_HTTP_PARSER: the C parser (llhttp through httptools) or the pure-Python h11
HTTP_PARSERS = ("httptools", "h11")


def _service_from_env() -> Settings:
    return Settings.from_env()


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiSettings:
    """What ``create_app`` runs with. Built by keyword (tests, embedding: ``service`` is then
    read from the process environment) or by :meth:`from_env`; every value is checked on
    construction either way."""

    #: the operator's bearer token (kept as a SecretStr: never in a repr or a log line)
    operator_token: SecretStr | str = field(default="", repr=False)
    dev_mode: bool = False
    max_request_bytes: int = 1_048_576
    #: request line plus headers, bytes (engram serve answers 431 beyond; api/server.py)
    max_header_bytes: int = 65_536
    #: header lines in one request head (431 beyond; api/server.py)
    max_headers: int = 100
    #: the HTTP/1.1 parser engram serve runs behind those bounds: "httptools" or "h11"
    http_parser: str = "httptools"
    #: uvicorn's access log, one line per request on stderr (engram serve): on by default,
    #: as uvicorn has it, since an operator reads who called what there; off spares each
    #: request the log record's formatting (docs/performance.md)
    access_log: bool = True
    #: a request must arrive in full this many seconds after its first byte (or after the
    #: connection opened); otherwise 408 and the connection closes (engram serve)
    request_timeout_s: int = 15
    #: signed requests are valid this many seconds either side of the server's clock
    signature_window_s: int = 300
    #: per verified key (agent, audience key, operator)
    rate_limit_per_minute: int = 1200
    rate_limit_burst: int = 200
    #: per client address, before authentication
    rate_limit_per_client_per_minute: int = 6000
    rate_limit_per_client_burst: int = 1000
    #: where the rate-limit buckets live: "host" = shared by every worker process of this
    #: host (a file in the home; engram serve), "process" = each process its own
    rate_limit_scope: str = "host"
    #: requests one worker process serves at once; the others wait, admitted round-robin
    #: across the identities asking (api/fairness.py)
    max_active_requests: int = 32
    #: of which at most this many of one identity (signer, path agent or event agent, with
    #: the client address)
    max_active_per_identity: int = 2
    #: with ENGRAM_WITNESS_POLICY: submit the newest checkpoint to the witnesses this often
    #: (seconds; 0 = only when a bundle is built or `engram log witness` runs)
    witness_interval_s: int = 10
    #: the service's settings (home, database, keys, memory policy ...), parsed with these
    service: Settings = field(default_factory=_service_from_env, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.operator_token, str):
            object.__setattr__(self, "operator_token", SecretStr(self.operator_token))
        for name, (var, lo, hi) in _BOUNDS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ConfigError(f"{var}={value!r} is outside [{lo}, {hi}]")
        if self.http_parser not in HTTP_PARSERS:
            raise ConfigError(f"ENGRAM_HTTP_PARSER={self.http_parser!r} is not httptools or h11")
        if self.rate_limit_scope not in _SCOPES:
            raise ConfigError(f"ENGRAM_RATE_LIMIT_SCOPE={self.rate_limit_scope!r} is not host or process")
        token = self.operator_secret
        if not self.dev_mode and (
            token.lower() in _KNOWN_BAD or len(token) < 24 or token_bits(token) < MIN_TOKEN_BITS
        ):
            raise ConfigError(
                "ENGRAM_OPERATOR_TOKEN must be a random secret of at least 24 characters and about "
                f"{MIN_TOKEN_BITS} bits (e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))'), "
                "or set ENGRAM_DEV_MODE=1 for local development"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiSettings:
        """Every setting of the HTTP layer and of the service, from one environment."""
        env = os.environ if env is None else env
        defaults: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(cls)}
        numbers = {
            name: int_env(env, var, int(defaults[name]), lo, hi) for name, (var, lo, hi) in _BOUNDS.items()
        }
        return cls(
            operator_token=SecretStr(env.get("ENGRAM_OPERATOR_TOKEN", "")),
            dev_mode=bool_env(env, "ENGRAM_DEV_MODE", False),
            rate_limit_scope=(env.get("ENGRAM_RATE_LIMIT_SCOPE") or "host").strip(),
            http_parser=(env.get("ENGRAM_HTTP_PARSER") or "httptools").strip(),
            access_log=bool_env(env, "ENGRAM_ACCESS_LOG", True),
            service=Settings.from_env(env),
            **numbers,
        )

    @property
    def operator_secret(self) -> str:
        t = self.operator_token
        return t.get_secret_value() if isinstance(t, SecretStr) else t

    @property
    def home(self) -> Path:
        return self.service.home
