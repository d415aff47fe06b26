"""Token counts (issue 12): a real tokenizer that loads offline, known answers, the rendered
HOT line and the block overhead the caps count, against the block recall renders."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.memory.recall import RecallResult, block_overhead, render_hot, to_recalled
from ledger.memory.state import Item
from ledger.memory.tokens import HOT_BLOCK_OVERHEAD, count_tokens, hot_tokens, tokenizer_name

CODE = """Traceback (most recent call last):
  File "/srv/app/billing/retry.py", line 212, in submit_invoice
    resp = client.post(f"{BASE}/v2/invoices/{inv_id}", json=payload, timeout=3.5)
httpx.ReadTimeout: timed out after 3.5s (req_id=7f3a9c1e-42b0-4c1d-9e5f-0b8d2e6a1f44)"""
CJK = "ユーザーは短い回答を好み、金曜日のデプロイは禁止されています。請求書は毎月送信されます。"


def test_the_tokenizer_is_cl100k_and_needs_no_download() -> None:
    assert tokenizer_name() == "cl100k_base (bpe-openai)"
    # Known answers from OpenAI's tiktoken documentation (cl100k_base).
    assert count_tokens("hello world") == 2
    assert count_tokens("tiktoken is great!") == 6
    assert count_tokens("") == 0


@pytest.mark.parametrize("text", [CODE, CJK, "2026-11-24T08:26:44Z 0x7f3a9c1e 42b0-4c1d"])
def test_the_old_four_characters_estimate_undercounted_what_the_caps_now_count(text: str) -> None:
    """Regression: len // 4 + 1 counted code, ids, timestamps and non-Latin text short."""
    assert count_tokens(text) > (len(text) // 4 + 1) * 1.1


def _item(content: str, tags: list[str] | None = None) -> Item:
    return Item(
        agent="agent-0001",
        ref="42.0",
        index=42,
        source_kind="memory.written",
        tier="HOT",
        status="active",
        category="PREFERENCE",
        content=content,
        tags=tags or [],
    )


def test_hot_costs_are_the_rendered_lines_and_the_block() -> None:
    """The caps count what recall renders: each memory's line and the block's own lines,
    within 10% of the rendered HOT block, on English, code and non-Latin text."""
    items = [_item("Prefers short answers in English.", ["style"]), _item(CODE), _item(CJK)]
    recalled = [
        to_recalled(i.index, i.ref, "HOT", i.category, i.content, i.tags, 0, 0, 0, 0.0) for i in items
    ]
    block = (
        render_hot(
            RecallResult(
                agent="agent-0001",
                origin="example.com/engram-production",
                query="",
                as_of_size=1000,
                session=None,
                hot=tuple(recalled),
                ranked=(),
                hot_tokens=0,
                total_tokens=0,
            )
        )
        + "(as of log size 1000)\n</memory-context>\n"
    )
    counted = HOT_BLOCK_OVERHEAD + sum(hot_tokens(i) for i in items)
    assert abs(counted - count_tokens(block)) <= 0.1 * count_tokens(block)
    overhead = block_overhead("agent-0001", "example.com/engram-production") + count_tokens(
        "## HOT (standing context)\n"
    )
    assert overhead == HOT_BLOCK_OVERHEAD


def test_counting_does_not_import_the_tokenizer_package() -> None:
    """Regression (issue 26, finding 8): importing ``bpe_openai`` decodes all three of its
    merge tables in Python (0.44 s) before a fresh ``engram mcp`` answered its first recall;
    the count now comes from its Rust extension, loaded alone."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ledger.memory.tokens import count_tokens, tokenizer_name\n"
        "assert count_tokens('hello world') == 2\n"
        "assert tokenizer_name() == 'cl100k_base (bpe-openai)'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'bpe_openai'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # the extension alone: neither the package nor its table-decoding modules
    assert out.stdout.strip() == "['bpe_openai._bindings']"


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_the_rust_count_equals_the_packages_encoding(text: str) -> None:
    """The direct count and ``bpe_openai``'s public ``encode_ordinary`` agree on any text,
    lone surrogates included (both replace them)."""
    import bpe_openai

    from ledger.memory.tokens import _Counter, _load_bindings

    bindings = _load_bindings()
    assert bindings is not None
    rust = _Counter(rust=bindings.tokenizer_for_encoding("cl100k_base"))
    package = _Counter(encoding=bpe_openai.get_encoding("cl100k_base"))
    assert rust.count(text) == package.count(text)


def test_an_attenuation_block_biscuit_cannot_convert_fails_token_template_not_a_crash() -> None:
    """Regression (issue 31, found by the TypeScript port's fixtures): any holder can append a
    block biscuit-auth parses but cannot convert to Datalog (datalog version 4 in a
    third-party block, say); reading its source raised ``biscuit_auth.BiscuitBlockError``
    out of ``verify_token`` (a 500 behind the API, ``verifier.error`` from engram-verify)."""
    import base64 as b64
    import json as js
    from pathlib import Path

    from verifier.errors import VerificationError
    from verifier.token import verify_token

    fx = js.loads(
        (Path(__file__).resolve().parents[2] / "clients/ts/test/fixtures/token-cases.json").read_text()
    )
    d = fx["defaults"]
    case = next(c for c in fx["cases"] if c["name"] == "third-party attenuation, datalog v4")
    with pytest.raises(VerificationError) as e:
        verify_token(
            case["token"]["text"],
            agent_keys=[b64.b64decode(fx["keys"][k]) for k in d["agent_keys"]],
            origin=d["origin"],
            agent=d["agent"],
            audience=d["audience"],
            kinds=d["kinds"],
            now=d["at"],
        )
    assert e.value.check == "token.template"
