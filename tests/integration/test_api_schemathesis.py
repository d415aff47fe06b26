"""Schemathesis against the app's own OpenAPI document: every operation, generated valid and
invalid requests; no 5xx, every response conforms to the documented status codes, media
types, headers and schemas, invalid requests are refused, undocumented methods get 405 (run in CI; ``ENGRAM_SCHEMATHESIS_EXAMPLES`` sets the examples per
operation, default 40)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import schemathesis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, settings
from schemathesis import checks

from api.app import create_app
from api.settings import ApiSettings
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.storage.db import make_engine

EXAMPLES = int(os.environ.get("ENGRAM_SCHEMATHESIS_EXAMPLES", "40"))


def _app():  # type: ignore[no-untyped-def]
    """A ledger with one agent and a few records, so generated requests reach real data.
    Built at import: schemathesis's lazy fixture loader does not support this pytest."""
    db = Path(tempfile.mkdtemp(prefix="engram-st-")) / "engram.db"
    engine = make_engine(f"sqlite:///{db}")
    ledger = create_ledger(
        engine,
        LogKey("schemathesis.example/log", Ed25519PrivateKey.generate()),
        policy_key=Ed25519PrivateKey.generate(),
    )
    ada = Agent.generate("ada", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
    ada.register()
    ada.append("pact.outcome", {"pact": "p1", "result": "fulfilled", "quality": 90})
    ada.append("commitment", {"promise": "ship on time", "due": "2026-12-01"})
    ada.append("session.opened", {"session": "s1"})
    app = create_app(
        ApiSettings(
            operator_token="BUcbdWwrOaceicLDmosGLXOkOht2pV_SThw4g1L2",
            rate_limit_per_minute=10**6,
            rate_limit_burst=10**6,
            rate_limit_per_client_per_minute=10**7,
            rate_limit_per_client_burst=10**7,
        ),
        ledger=ledger,
    )
    return app


schema = schemathesis.openapi.from_asgi("/openapi.json", _app())


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    # CI replays one fixed sequence (a landing never depends on luck); local runs explore.
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_api_conforms_to_its_openapi(case) -> None:  # type: ignore[no-untyped-def]
    # positive_data_acceptance expects every schema-valid request to succeed; a base64 string
    # that is not a signed envelope is schema-valid and must still be refused (400/422).
    case.call_and_validate(excluded_checks=[checks.positive_data_acceptance])
