"""HTTP service settings (pydantic-settings), read from ``ENGRAM_*`` environment variables.

Outside dev mode the service refuses to start with a missing, short or well-known operator
token: a default secret is no secret.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ApiSettings"]

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


class ApiSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_", extra="ignore")

    home: Path = Path(".engram")
    database_url: str | None = None
    operator_token: SecretStr = SecretStr("")
    dev_mode: bool = False
    max_request_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1024 * 1024)
    #: request line plus headers, bytes (engram serve answers 431 beyond; api/server.py)
    max_header_bytes: int = Field(default=65_536, ge=4096, le=1_048_576)
    #: a request must arrive in full this many seconds after its first byte (or after the
    #: connection opened); otherwise 408 and the connection closes (engram serve)
    request_timeout_s: int = Field(default=15, ge=1, le=600)
    #: signed requests are valid this many seconds either side of the server's clock
    signature_window_s: int = Field(default=300, ge=5, le=3600)
    #: per verified key (agent, audience key, operator)
    rate_limit_per_minute: int = Field(default=1200, ge=1, le=1_000_000)
    rate_limit_burst: int = Field(default=200, ge=1, le=1_000_000)
    #: per client address, before authentication
    rate_limit_per_client_per_minute: int = Field(default=6000, ge=1, le=10_000_000)
    rate_limit_per_client_burst: int = Field(default=1000, ge=1, le=10_000_000)
    #: where the rate-limit buckets live: "host" = shared by every worker process of this
    #: host (a file in the home; engram serve), "process" = each process its own
    rate_limit_scope: Literal["host", "process"] = "host"
    #: requests one worker process serves at once; the others wait, admitted round-robin
    #: across the identities asking (api/fairness.py)
    max_active_requests: int = Field(default=32, ge=1, le=1024)
    #: of which at most this many of one identity (signer, path agent or event agent, with
    #: the client address)
    max_active_per_identity: int = Field(default=2, ge=1, le=1024)
    #: with ENGRAM_WITNESS_POLICY: submit the newest checkpoint to the witnesses this often
    #: (seconds; 0 = only when a bundle is built or `engram log witness` runs)
    witness_interval_s: int = Field(default=10, ge=0, le=86_400)

    @model_validator(mode="after")
    def _refuse_default_secrets(self) -> ApiSettings:
        token = self.operator_token.get_secret_value()
        if not self.dev_mode and (
            token.lower() in _KNOWN_BAD or len(token) < 24 or token_bits(token) < MIN_TOKEN_BITS
        ):
            raise ValueError(
                "ENGRAM_OPERATOR_TOKEN must be a random secret of at least 24 characters and about "
                f"{MIN_TOKEN_BITS} bits (e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(32))'), "
                "or set ENGRAM_DEV_MODE=1 for local development"
            )
        return self
