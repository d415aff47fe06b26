"""Whose word a memory is: supersession only by the owner's own word.

The policy lets a newer memory replace an older one (``memory.replaced``,
ledger.memory.policy) only when the newer one states the fact in its owner's own voice: the
user's, or the agent's own. An assistant reply that reports what an email says, a vendor
page the assistant quotes, a tool's output or a hypothetical states a fact in someone
else's voice (or in none), and never replaces what the owner said. This module reads the
voice of a memory, without a model, from what the policy can see of it: its text, its
provenance, and the role and text of each session turn it cites (specs/memory-events.md,
"Facts that change").

A memory is **not** in its owner's own voice when:

1. it is **retrieved**: its provenance names a tool, a URL or an external source, or it cites
   a ``tool`` or ``system`` turn, or a turn that is no longer there;
2. it is **reported**: an attribution ("according to", "per the docs", "reportedly"), a
   reporting verb whose speaker is not the statement's own ("the email says", "Dana told
   me", "the vendor claims"), or a source the fact is read from ("on the vendor page");
3. it is **quoted**: quotation marks around words, a block quote (``>``), code;
4. it is **hypothetical**: a condition, a supposition, an example, a wish ("if", "unless",
   "suppose", "imagine", "what if", "for example", "would", ...);
5. it is **unattested**: it cites turns that do not say it (none names its value), as when a
   distiller cites the wrong turn.

Markers are read in a folded form (:func:`fold`: no format or invisible characters, NFKC,
look-alike letters mapped to Latin, case-folded), so a zero-width space or a Cyrillic letter
inside "says" does not hide it; a sentence runs across single line breaks.

The distillers' own frame, "<speaker> said that ..." where the speaker is the one who said
the cited turn (or, for a memory the agent wrote itself, the user or the agent), is the
speaker's own word and is read past; any other speaker makes the sentence reported.

Each check runs on the memory's sentence and on every sentence of the cited turns that
names the value the memory states (all of a turn's sentences when none names it: a paraphrase
is judged by its whole source). A sentence of a turn is quoted, too, when it follows a
sentence of the same paragraph that presents a source ("Here is the vendor page.", "From
the email:").

The **speaker** of a memory is whoever said the turns it cites ("Name: ..." at the start of a
turn names a person, qualified by the turn's role; else its role: the user, or the agent for
an assistant turn), and the agent for a memory that cites no turn (the agent wrote it). A
memory whose cited turns were said by several speakers has no single speaker.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from engram.protocol import _confusables
from ledger.memory.distill import ROLE_SUBJECTS, speaker_of
from ledger.memory.facts import fact_of
from ledger.memory.terms import content_terms

__all__ = [
    "RETRIEVED_SOURCES",
    "Cited",
    "Statement",
    "Voice",
    "voice_of",
]

#: Provenance source types whose text the agent retrieved rather than said.
RETRIEVED_SOURCES = frozenset({"tool", "url", "external"})
#: The turn roles whose text is someone's own word (tool and system turns are retrieved).
SPEAKING_ROLES = frozenset({"user", "assistant"})
#: What a memory's text or a turn may hold before it is read (a turn is at most 32,000
#: characters; a memory 4,000): the checks are linear, this only bounds their work.
MAX_READ_CHARS = 32_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Cited:
    """A session turn a memory cites: its role and its text as logged."""

    role: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    """What the policy sees of a memory: its text, the turns it cites (none for a memory the
    agent wrote itself), whether its provenance names a retrieved source (or a cited turn is
    missing), its tier and its decay exemption."""

    content: str
    cited: tuple[Cited, ...] = ()
    retrieved: bool = False
    tier: str = "WARM"
    decay_exempt: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Voice:
    """``speaker``: ``user``, ``agent`` or ``name:<name>`` (None: several, or none);
    ``own``: the memory states its fact in its speaker's own voice; ``why``: ``own``, or
    which rule it broke (``retrieved``, ``reported``, ``quoted``, ``hypothetical``)."""

    speaker: str | None
    own: bool
    why: str


# -- markers ---------------------------------------------------------------------------------

#: Attribution: the sentence says where the fact comes from, not that it is so.
_ATTRIBUTION = re.compile(
    r"\b(?:according to|as per|per (?:the|a|an|his|her|their|its|my|our|your|this|that)|"
    r"reportedly|allegedly|supposedly|apparently|purportedly|ostensibly|rumou?r(?:s|ed)?|"
    r"word (?:is|has it)|hearsay|it(?: is|'s) said|(?:is|are|was|were) said to|quoting|quoted|"
    r"citing|cited|forwarded|fwd|fw)\b",
    re.I,
)
#: Reporting verbs (the forms that are seldom anything else).
_REPORTING = (
    r"say|says|said|saying|claim|claims|claimed|claiming|reports|reported|reporting|writes|wrote|"
    r"written|writing|stated|stating|mentions|mentioned|mentioning|announces|announced|announcing|"
    r"tell|tells|told|telling|insists|insisted|asserts|asserted|alleges|alleged|suggests|"
    r"suggested|indicates|indicated|confirms|confirmed|informs|informed|notifies|notified|"
    r"declares|declared|explains|explained|warns|warned|argues|argued|believes|believed|"
    r"think|thinks|thought|reckons|reckoned|guesses|guessed|assumes|assumed|hears|heard|hearing|"
    r"(?<![Uu]nited )states|"
    r"learned from|learnt from|read that|reads that|shows that|showed that|lists|listed|noted|"
    r"added|adds|shared|shares|posted|tweeted|emailed|texted|messaged|replied|answered|responded"
)
_REPORTED = re.compile(rf"\b(?:{_REPORTING})\b", re.I)
#: Things text is read from; "on the vendor page", "from the email", "in the docs".
_SOURCE_NOUNS = (
    r"email|e-mail|mail|inbox|message|dm|text|letter|memo|note|notes|page|webpage|site|website|"
    r"article|post|blog|doc|docs|documentation|readme|wiki|thread|ticket|forum|newsletter|"
    r"report|slack|chat|channel|tweet|search|results?|tool|output|logs?|pdf|file|attachment|"
    r"transcript|screenshot|announcement|press release|changelog|faq|manual|brochure|advert|"
    r"advertisement|news|newspaper|headline|podcast|video|story|script|movie|film|game|quote|"
    r"excerpt|snippet|source|vendor|listing|review|comment|reply|response|answer|survey|"
    r"questionnaire|form|profile|portal|dashboard|records?|database|directory|calendar|invite|"
    r"invitation|spreadsheet|sheet|crm|linkedin|horoscope|novel|book|play|series|episode|dream|"
    r"gossip|flyer|poster|caption|bio|resume|cv|case study|press|paper|study|statement|"
    r"chart|org chart|subject line|subject|bot|chatbot"
)
_FROM_SOURCE = re.compile(
    r"\b(?:from|in|on|per|via) (?:the|a|an|this|that|these|those|their|his|her|its|our|your|my|some) "
    rf"(?:[\w'-]+ ){{0,2}}(?:{_SOURCE_NOUNS})\b",
    re.I,
)
_SOURCE = re.compile(rf"\b(?:{_SOURCE_NOUNS})\b", re.I)
#: A source that says something: "the search results show", "as the survey lists".
_SOURCE_SAYS = re.compile(
    rf"\b(?:{_SOURCE_NOUNS})(?:'s)? (?:[\w'-]+ )?(?:show|shows|showed|shown|read|reads|list|lists|"
    r"listed|say|says|said|note|notes|noted|state|states|stated|indicate|indicates|suggest|"
    r"suggests|mention|mentions|put|puts|give|gives|gave|has it|had it)\b",
    re.I,
)
#: A sentence that presents a source whose words may follow ("here is the page", "i checked
#: your inbox").
_PRESENTS = re.compile(
    r"\b(?:here is|here's|here are|below|following|pasted|pasting|copied|copy of|attached|"
    r"forwarding|excerpt|snippet|reads|read|returned|output|checked|opened|looked at|looked up|"
    r"went through|scanned|fetched|pulled up|searched|found|got|received|reviewed|according)\b",
    re.I,
)
#: Quotation: quotation marks, a multi-word span in single quotes, a backtick (code).
_QUOTED = re.compile(
    r"[\"\u201c\u201d\u201e\u201f\u00ab\u00bb\u2039\u203a\u300c\u300d\u300e\u300f`]|"
    r"(?:^|[\s(\[])['\u2018][^'\u2018\u2019\n]*\s[^'\u2018\u2019\n]*['\u2019](?=$|[\s.,;:!?)\]])"
)
#: Conditions, suppositions, examples, wishes: no fact is asserted.
_HYPOTHETICAL = re.compile(
    r"\b(?:if|unless|suppose|supposing|imagine|imagining|hypothetical(?:ly)?|assuming|assume|"
    r"pretend(?:ing)?|let's say|let us say|what if|in case|in the event|in theory|theoretically|"
    r"scenario|for example|for instance|e\.g|would|could|might|should|were to|as if|wish(?:es|ed)?|"
    r"hopes?|hoping|someday|fictional|fictitious|fiction|example|sample|template|placeholder|"
    r"dummy|mock|fake|role-?play(?:ing)?|"
    # hedges and jokes: the speaker does not assert it either
    r"maybe|perhaps|possibly|probably|presumably|seems?|seemingly|i guess|i suppose|"
    r"unconfirmed|unverified|tbc|jk|just kidding|kidding|joking|as a joke)\b",
    re.I,
)

#: A source named without a determiner where only a source can stand (the fix: "Per HR, ...", "(per Dana)", "..., via Slack", "From Slack: ...", a source tag
#: "source: the HR portal", "as HR put it"): a clause that opens with "per" or "via", a "from
#: <words>:" lead, a tag. ("per" inside a clause, "20 euros per month", is a rate.)
_TAGGED = re.compile(
    r"(?:^|[(\[,;:\u2014\u2013]\s*|\s-{1,2}\s*)(?:per|via)\s+[\w@#]"
    r"|(?:^|[(\[,;\u2014\u2013]\s*)from\s+[\w'@#-]+(?:\s+[\w'-]+){0,2}\s*:"
    r"|\b(?:source|sources|src|cf|credit|h/t|hat tip)\s*:"
    r"|\bas\s+(?:[\w'-]+\s+){1,3}(?:put|puts|phrased|phrases|has|had)\s+it\b"
    # evidence the fact was read off rather than known: "based on the org chart", "judging by
    # the invite", "last I checked", "I found out that", "translated from" ("I found a new
    # job" is the speaker's own news: only "found out" or "found that" reads something off)
    r"|\b(?:based on|going by|judging (?:by|from)|turned up|looks like|sounds like|"
    r"last i (?:saw|checked|heard|looked)|translated|"
    r"i (?:found|saw|noticed|learned|learnt|discovered|gathered|spotted)(?: out(?: that)?| that))\b"
    r"|;\s*[^;]{0,40}\b(?:" + _SOURCE_NOUNS + r")\W*$",
    re.I,
)
#: A sentence of a turn that only names the source of the others ("Source: the HR portal.").
_SOURCE_LINE = re.compile(r"(?:source|sources|src|cf|credit|h/t|via|per)\b", re.I)
#: A bracketed note naming a source ("[HR email]", "(from the portal)").
_BRACKETED_SOURCE = re.compile(rf"[(\[][^)\]]*\b(?:{_SOURCE_NOUNS})\b[^)\]]*[)\]]", re.I)
#: What opens a label that names a source, not a person ("From Slack:", "Via email:").
_NOT_A_NAME = re.compile(r"(?:from|via|per|source|sources|src|fwd?|cf)\b")
#: Source nouns that head a note in a label rather than name where it came from ("Note:",
#: "Big news:").
_PLAIN_LABELS = frozenset({"note", "notes", "news"})

#: A sentence that introduces what follows as someone else's words ("HR sent this:").
_INTRODUCES = re.compile(r"\b(?:this|these|that|the following|as follows|below|here|it)\s*:", re.I)

#: "<who> said (to <whom>) (that|:) <rest>": a frame naming who said the rest.
_FRAME = re.compile(
    r"^\s*(?P<who>[a-z][\w'\u2019 -]{0,40}?) (?:(?:also|then|later|just|now|again) )?"
    r"(?:said|says|mentioned|mentions|noted|notes|stated|states|explained|explains|confirmed|"
    r"confirms|shared|shares|added|adds|wrote|writes|reported|reports|announced|announces|"
    r"told(?: [\w'-]+){0,2}|tells(?: [\w'-]+){0,2})"
    r"(?: to (?:me|us|him|her|them|[a-z][\w'-]*|the (?:user|assistant|agent|team)))?,?"
    r"(?: that\b|:)?\s+(?P<rest>\S.*)$",
    re.S | re.I,
)
#: A line label before the text ("Decision: ...", "Caroline: ..."): at most four words.
_LABEL = re.compile(r"^\s*(?P<label>[a-z][\w'\u2019-]*(?: [\w'\u2019-]+){0,3}):\s+(?=\S)", re.I)
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+|$)")
_FENCE = re.compile(r"^\s*(?:```|~~~)")

#: Who may frame a statement as their own: the role subjects the distiller writes.
_OWN_FRAMES = {
    "user": frozenset({"the user", "user", "i"}),
    "agent": frozenset({"the assistant", "assistant", "the agent", "agent", "i"}),
}
#: A memory the agent wrote itself may relay its owner's word.
_AGENT_WRITTEN_FRAMES = _OWN_FRAMES["user"] | _OWN_FRAMES["agent"]
#: Invisible characters outside Unicode's format category (fillers, the Mongolian separator)
#: and the variation selectors: removed before any marker is read, as format characters are.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0\u180e") | frozenset(
    chr(c) for c in [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
)
_CONFUSABLE = str.maketrans(_confusables.SOURCES, _confusables.TARGETS)


def fold(text: str) -> str:
    """The form markers are read in: no format or invisible characters (a zero-width space
    inside "says" does not hide it), NFKC (fullwidth letters), no combining marks, look-alike
    letters mapped to Latin, case-folded, runs of spaces and tabs one space; line breaks kept
    (a block quote or code block is a matter of lines)."""
    text = "".join(
        ch for ch in text[:MAX_READ_CHARS] if ch not in _INVISIBLE and unicodedata.category(ch) != "Cf"
    )
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = text.translate(_CONFUSABLE).casefold().translate(_CONFUSABLE)
    return re.sub(r"[^\S\n]+", " ", re.sub(r"\r\n?|[\u2028\u2029\x85\x0b\x0c]", "\n", text))


def _speaker_id(role: str, text: str) -> tuple[str | None, str]:
    """(speaker id, text without a "Name:" prefix) of a cited turn; None for a role that
    does not speak (tool, system). A named speaker is qualified by the role that said it: an
    assistant turn opening with a user's name is not that user's word."""
    if role not in SPEAKING_ROLES:
        return None, text
    subject, rest = speaker_of(role, text)
    by = "user" if role == "user" else "agent"
    if subject == ROLE_SUBJECTS[role]:
        return by, rest
    if _SOURCE.search(fold(subject)) or _NOT_A_NAME.match(fold(subject)):
        return by, text  # "From Slack: ...", "HR Email: ...": a source's label, read with the text
    return f"{by}:{subject.casefold()}", rest


def _frames_for(speaker: str | None, *, agent_written: bool) -> frozenset[str]:
    if agent_written:
        return _AGENT_WRITTEN_FRAMES
    if speaker is None:
        return frozenset()
    if ":" in speaker:
        return frozenset({fold(speaker.split(":", 1)[1]), "i"})
    return _OWN_FRAMES.get(speaker, frozenset())


def _unframed(sentence: str, own: frozenset[str]) -> str | None:
    """The sentence without a frame naming one of ``own`` ("the user said that x": x);
    None when a frame names someone else (the sentence is reported)."""
    m = _FRAME.match(sentence)
    if m is None:
        return sentence
    who = " ".join(m.group("who").split())
    return m.group("rest") if who in own else None


def sentence_flaw(sentence: str, own: frozenset[str]) -> str | None:
    """Why ``sentence`` (folded, :func:`fold`) does not state a fact in its speaker's own
    voice (``reported``, ``quoted``, ``hypothetical``), or None. ``own``: who may frame it
    as theirs ("the user said that ...": the frame is read past; one naming anyone else
    makes it reported). A line label ("decision: ...", "caroline: ...") is read past too,
    but its words count."""
    if _QUOTED.search(sentence):
        return "quoted"
    rest = _unframed(sentence, own)
    if rest is None:
        return "reported"
    m = _LABEL.match(rest)
    label, body = ("", rest) if m is None else (m.group("label"), rest[m.end() :])
    body_rest = _unframed(body, own) if label else body
    if body_rest is None:
        return "reported"
    text = f"{label}: {body_rest}" if label else body_rest
    if any(
        rx.search(text)
        for rx in (
            _ATTRIBUTION,
            _REPORTED,
            _FROM_SOURCE,
            _SOURCE_SAYS,
            _INTRODUCES,
            _TAGGED,
            _BRACKETED_SOURCE,
        )
    ):
        return "reported"
    if label and any(m.group(0) not in _PLAIN_LABELS for m in _SOURCE.finditer(label)):
        return "reported"  # "The email: ...", "HR's email: ...": the label names the source
    if _HYPOTHETICAL.search(text):
        return "hypothetical"
    return None


def _presents(sentence: str) -> bool:
    """The sentence presents a source whose words may follow ("here is the vendor page",
    "i checked your inbox", "from the email:")."""
    return bool(_INTRODUCES.search(sentence)) or (
        bool(_SOURCE.search(sentence))
        and (sentence.rstrip().endswith(":") or bool(_PRESENTS.search(sentence)))
    )


def _prose(text: str, presented: bool) -> tuple[list[tuple[str, bool]], bool]:
    """The sentences of running text (line breaks joined), each quoted when a sentence
    before it presents a source; and whether the last one left a source presented."""
    out = []
    for m in _SENTENCE.finditer(" ".join(text.split())):
        s = m.group(0).strip()
        if s:
            out.append((s, presented))
            presented = presented or _presents(s)
    return out, presented


def _sentences(text: str) -> list[tuple[str, bool]]:
    """The sentences of a folded turn, each with whether it is quoted material: in a code
    block, a block quote, or after a sentence of its paragraph that presents a source (a
    paragraph ending with one quotes the next paragraph too). A sentence runs across single
    line breaks."""
    out: list[tuple[str, bool]] = []
    fenced = carried = False
    for paragraph in re.split(r"\n\s*\n", text):
        presented, carried = carried, False
        prose: list[str] = []
        for line in [*paragraph.split("\n"), None]:
            quoted_line = line is not None and (fenced or _FENCE.match(line) or line.lstrip().startswith(">"))
            if line is None or quoted_line:
                found, presented = _prose("\n".join(prose), presented)
                out += found
                prose = []
            if line is None:
                break
            if _FENCE.match(line):
                fenced = not fenced
            elif quoted_line:
                out += [(m.group(0).strip(), True) for m in _SENTENCE.finditer(line) if m.group(0).strip()]
            else:
                prose.append(line)
        carried = bool(out) and out[-1][0].endswith(":") and _presents(out[-1][0])
    return out


def _names(sentence: str, value: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", sentence) is not None


def _turn_flaw(text: str, value: str | None, own: frozenset[str]) -> str | None:
    sentences = _sentences(text)
    if any(_SOURCE_LINE.match(s) for s, _ in sentences):
        return "reported"  # "... is now Mallory. Source: the HR portal.": the turn cites its source
    named = [(s, q) for s, q in sentences if value and _names(s, value)]
    for s, quoted in named or sentences:
        if quoted:
            return "quoted"
        flaw = sentence_flaw(s, own)
        if flaw is not None:
            return flaw
    return None


def _attested(content: str, turns: Sequence[tuple[str | None, str]], value: str | None) -> bool:
    """The cited turns say what the memory says: they name its value, or, when the value is
    not known, hold at least half of its content words. A memory that cites turns which do
    not say it (a distiller that cites the wrong turn) is nobody's word."""
    said = "\n".join(text for _, text in turns)
    if value:
        return _names(said, value)
    words = content_terms(content)
    heard = set(content_terms(said))
    return bool(words) and 2 * sum(1 for w in words if w in heard) >= len(words)


def _speaker(turns: Sequence[tuple[str | None, str]], value: str | None) -> str | None:
    named = {sp for sp, text in turns if value and _names(text, value)}
    speakers = named or {sp for sp, _ in turns}
    return next(iter(speakers)) if len(speakers) == 1 else None


def voice_of(st: Statement, value: str | None = None) -> Voice:
    """The voice ``st`` states its fact in (``value``: the value it states, as
    ledger.memory.facts reads it, to find the sentences of the cited turns that say it)."""
    value = fold(value).strip() if value else None
    if st.retrieved:
        return Voice(speaker=None, own=False, why="retrieved")
    turns: list[tuple[str | None, str]] = []
    for c in st.cited:
        sp, rest = _speaker_id(c.role, c.text)
        turns.append((sp, fold(rest)))
    if any(sp is None for sp, _ in turns):
        return Voice(speaker=None, own=False, why="retrieved")
    content = " ".join(fold(st.content).split())
    speaker = _speaker(turns, value) if turns else "agent"
    if turns and not _attested(content, turns, value):
        return Voice(speaker=speaker, own=False, why="unattested")
    flaw = sentence_flaw(content, _frames_for(speaker, agent_written=not turns))
    for sp, text in turns:
        if flaw is None:
            flaw = _turn_flaw(text, value, _frames_for(sp, agent_written=False))
    if flaw is not None:
        return Voice(speaker=speaker, own=False, why=flaw)
    if speaker is not None and ":" in speaker and not _about_self(st.content, speaker.split(":", 1)[1]):
        # "Dana: Caroline moved to Kyoto.", "HR: your manager is now Mallory.": a named
        # speaker's word about someone else's fact is that person's fact by hearsay
        return Voice(speaker=speaker, own=False, why="reported")
    return Voice(speaker=speaker, own=True, why="own")


def _about_self(content: str, name: str) -> bool:
    """Whether the fact ``content`` states is the named speaker ``name``'s (folded) own: its
    subject is not another person (the user, or someone named) than the speaker. A group's
    fact ("the team now uses ...") may be stated by any of its members; a memory stating no
    fact the policy reads is not judged here."""
    fact = fact_of(content)
    if fact is None:
        return True
    subject, who = fold(fact.subject).split(), name.split()
    person = fold(fact.subject) in ("the user", "user") or fact.subject[:1].isupper()
    return not person or (bool(subject) and bool(who) and subject[0] == who[0])
