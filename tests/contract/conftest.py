"""Fixtures the contract tests share (each runs on SQLite and PostgreSQL: ``ledger`` and
``make_agent`` come from tests/conftest.py)."""

from __future__ import annotations

import pytest

from ledger.log import Ledger
from ledger.memory.service import MemoryService


@pytest.fixture
def memory(ledger: Ledger) -> MemoryService:
    """The memory service over the test's ledger, recording each recall's use before it
    returns (``access_log="sync"``: what a test reads next already counts it)."""
    return MemoryService(ledger, access_log="sync")
