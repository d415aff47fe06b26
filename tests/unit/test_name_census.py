"""Names say what they guard, not when they were written: no file, function, class or
module-level name under tests/, and none in the service and client packages (ledger/, engram/,
api/, verifier/), carries an issue number (issue 41, Deliver 5). A name like
``test_issue28_group_commit`` files a test by the week it was written; the issue a test
answers belongs in its docstring, where a reader of the history still finds it.

A topic's tests share a file-name prefix in every layer (tests/README.md lists them), so
``ls tests/*/test_recall_*`` finds every recall test.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_PACKAGES = ("ledger", "engram", "api", "verifier")
#: "issue28", "Issue31", "issue_40", "issues25": an issue number in a name, in any spelling
#: (but not a word that merely ends in "issue", such as "tissue2").
NUMBERED = re.compile(r"(?<![a-z])issues?_?\d", re.IGNORECASE)
_SKIP_DIRS = {"__pycache__", "node_modules", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


def _files(top: Path) -> Iterator[Path]:
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(top).parts
        if any(part in _SKIP_DIRS or part.startswith(".") for part in rel):
            continue
        yield path


def _defined_names(source: str) -> Iterator[tuple[int, str]]:
    """Every function and class (nested ones too) and every module-level name ``source``
    defines, with its line."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.lineno, node.name
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for target in targets:
            if isinstance(target, ast.Name):
                yield node.lineno, target.id


def census(top: Path) -> tuple[list[str], int]:
    """The names under ``top`` that carry an issue number (as ``path`` or ``path:line name``),
    and how many names were read (so an empty answer is known not to come from reading
    nothing)."""
    numbered: list[str] = []
    read = 0
    for path in _files(top):
        rel = path.relative_to(top.parent).as_posix()
        read += 1
        if NUMBERED.search(path.name):
            numbered.append(rel)
        if path.suffix == ".py" and path.is_file():
            for line, name in _defined_names(path.read_text(encoding="utf-8")):
                read += 1
                if NUMBERED.search(name):
                    numbered.append(f"{rel}:{line} {name}")
    return numbered, read


@pytest.mark.parametrize(
    "name",
    [
        "test_issue28_group_commit.py",
        "test_issue25_f8_split_brain",
        "Issue31Page",
        "issue_40_rows",
        "ISSUES25",
    ],
)
def test_the_census_sees_every_spelling_of_an_issue_number(name: str) -> None:
    assert NUMBERED.search(name)


@pytest.mark.parametrize("name", ["test_recall_budget.py", "test_issues_are_listed", "tissue2", "reissued"])
def test_the_census_leaves_names_without_an_issue_number(name: str) -> None:
    assert not NUMBERED.search(name)


def test_the_census_finds_a_numbered_file_function_class_and_constant(tmp_path: Path) -> None:
    top = tmp_path / "pkg"
    (top / "sub").mkdir(parents=True)
    (top / "sub" / "test_issue12_erasure.py").write_text("x = 1\n", encoding="utf-8")
    (top / "mod.py").write_text(
        "ISSUE7_LIMIT = 3\n\nclass Issue9Page:\n    def issue_10_rows(self) -> None:\n        pass\n\n"
        "def test_recall_budget() -> None:\n    pass\n",
        encoding="utf-8",
    )
    numbered, read = census(top)
    assert sorted(numbered) == [
        "pkg/mod.py:1 ISSUE7_LIMIT",
        "pkg/mod.py:3 Issue9Page",
        "pkg/mod.py:4 issue_10_rows",
        "pkg/sub/test_issue12_erasure.py",
    ]
    assert read == 3 + 5  # three paths; five names (x, ISSUE7_LIMIT, the class, two functions)


def test_no_test_file_or_test_name_carries_an_issue_number() -> None:
    numbered, read = census(ROOT / "tests")
    assert read > 2000, read  # the tests were read: files, test functions, helpers, fixtures
    assert numbered == [], "name it for what it guards; put the issue in the docstring"


@pytest.mark.parametrize("package", SOURCE_PACKAGES)
def test_no_source_file_function_or_class_carries_an_issue_number(package: str) -> None:
    numbered, read = census(ROOT / package)
    assert read > 50, read
    assert numbered == [], "name it for what it does; the commit history keeps the issue"
