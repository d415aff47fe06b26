"""Right-to-left text as word processors and PDF viewers paste it (issue 40, finding 7,
attacked from outside after the fix): Hebrew or Arabic wrapped in an RLE ... PDF pair (and an
LRE ... PDF around Latin text) was refused whole as a Trojan Source embedding
(``gate.invisible_unicode``), though such a pair only restates the direction of the letters
it holds. It is now removed; every embedding that could reorder what a reader takes for other
words (around digits only, around letters of both directions, unclosed, across a line, nested,
or beside an override) is still refused."""

from __future__ import annotations

import pytest

from engram.protocol.gate import GateRejection, WriteGate
from engram.protocol.invisible import HiddenText, normal_form

RLE, LRE, PDF, RLO = "\u202b", "\u202a", "\u202c", "\u202e"

PASTED = {
    "Hebrew from a PDF": (f"{RLE}שלום עולם{PDF}", "שלום עולם"),
    "Arabic from Word beside English": (
        f"{RLE}مرحبا بالعالم{PDF} means hello world",
        "مرحبا بالعالم means hello world",
    ),
    "two Hebrew runs": (f"{RLE}שלום{PDF} and {RLE}עולם{PDF}", "שלום and עולם"),
    "Latin in an LRE": (f"{LRE}Meeting at 10:00{PDF}", "Meeting at 10:00"),
}
DECEPTIVE = {
    "digits only": f"{RLE}1 - 2{PDF}",
    "both directions": f"{RLE}שלום admin{PDF}",
    "Latin in an RLE": f"{RLE}user{PDF}",
    "unclosed": f"{RLE}שלום",
    "across a line": f"{RLE}שלום\n{PDF}",
    "nested": f"{RLE}שלום {RLE}עולם{PDF}{PDF}",
    "beside an override": f"{RLE}{RLO}שלום{PDF}{PDF}",
    "a PDF alone": f"x{PDF}",
    "a PDF too many": f"{RLE}שלום{PDF}{PDF}",
}


@pytest.mark.parametrize(("text", "normal"), PASTED.values(), ids=PASTED.keys())
def test_an_embedding_that_restates_its_letters_direction_is_removed(text: str, normal: str) -> None:
    assert normal_form(text) == normal
    assert WriteGate().scan(text) == normal


@pytest.mark.parametrize("text", DECEPTIVE.values(), ids=DECEPTIVE.keys())
def test_an_embedding_that_can_reorder_is_still_refused(text: str) -> None:
    with pytest.raises(HiddenText):
        normal_form(text)
    with pytest.raises(GateRejection) as e:
        WriteGate().scan(text)
    assert e.value.pattern == "invisible_unicode"
