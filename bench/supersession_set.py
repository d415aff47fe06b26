"""A labelled set of memory pairs for supersession (issues 29 and 40): (older memory, newer
memory, whether the newer one replaces the older). Written for Engram, in the styles the
distillers and agents write: conversation facts, user settings, team decisions.

Positives state a new value of the same fact in the owner's own voice; negatives are the
near misses a careless detector gets wrong: a wish, someone else, a question, a negation,
the same value in other words, a different attribute, a memory that says more than the one
fact (:data:`PAIRS`), and the adversarial ones of issue 40 (:data:`ADVERSARIAL`): a new
value that is reported ("the email says ..."), quoted, retrieved (a tool's output, a web
page), hypothetical, another person's word about a HOT fact, or that would replace a COLD or
decay-exempt memory. An adversarial case carries what the policy sees of each memory: the
turns it cites (role, text), a retrieved provenance source, the older memory's tier and
exemption.

:func:`replaces` asks exactly what the policy asks (ledger.memory.policy.why_not_replaced
over ledger.memory.facts and ledger.memory.voice)."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.memory.facts import fact_of
from ledger.memory.policy import why_not_replaced
from ledger.memory.voice import Cited, Statement

Turns = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One labelled pair. ``said``/``old_said``: the turns each memory cites (role, text);
    ``source``: a retrieved provenance source type of the newer memory (tool, url,
    external); ``kind``: what the case tests."""

    old: str
    new: str
    replaces: bool
    said: Turns = ()
    old_said: Turns = ()
    source: str | None = None
    old_tier: str = "WARM"
    old_exempt: bool = False
    kind: str = "plain"


PAIRS: tuple[tuple[str, str, bool], ...] = (
    # -- a new value of the same fact: replace
    (
        "Caroline works as a nurse at the children's hospital.",
        "Caroline started working as a pilot at a regional airline.",
        True,
    ),
    (
        "Jonas works as a baker at a bakery in the old town.",
        "Big news: Jonas got a new job as an architect at a small design studio.",
        True,
    ),
    ("Melanie lives in Lisbon.", "Melanie moved to Kyoto last month (October 2023).", True),
    ("Melanie moved to Kyoto.", "Melanie relocated to Hobart.", True),
    ("The user's timezone is CET.", "The user's timezone is now PST.", True),
    ("The user's editor is vim.", "The user's editor is VS Code.", True),
    ("The team uses PostgreSQL for storage.", "We decided to use SQLite for storage.", True),
    ("We decided to use Redis for caching.", "The team switched to Memcached for caching.", True),
    ("Aiko is dating Samir.", "Aiko is engaged to Tomas.", True),
    ("Priya is 31 years old.", "Priya turned 32 years old.", True),
    ("Gina prefers tacos to ramen.", "Gina prefers ramen over tacos.", True),
    ("Rafael's favorite book is Dune.", "Rafael's favorite book is now Middlemarch.", True),
    ("Odile works as a teacher at the primary school.", "Odile now works as a nurse.", True),
    ("Samir is working as a barista.", "Samir was hired as a data analyst at a logistics firm.", True),
    ("The user's manager is Dana.", "The user's manager is Lee.", True),
    ("Tomas lives in Reykjavik.", "Tomas is living in Oaxaca since the spring.", True),
    ("The team uses Jenkins for CI.", "The team now uses GitHub Actions for CI.", True),
    ("Caroline's job is nurse.", "Caroline works as a paramedic.", True),
    ("The user's deadline is Friday.", "The user's deadline is next Wednesday.", True),
    ("Melanie's favourite food is paella.", "Melanie's favourite food is dumplings.", True),
    # -- not a change: keep both
    ("Caroline works as a nurse.", "Caroline wants to work as a pilot.", False),
    ("Caroline works as a nurse.", "Caroline's cousin works as a pilot.", False),
    ("Caroline works as a nurse.", "Does Caroline work as a pilot?", False),
    ("Caroline works as a nurse.", "Caroline no longer works as a baker.", False),
    ("Caroline works as a nurse.", "Caroline is working as a nurse again this year.", False),
    ("Caroline works as a nurse.", "Melanie works as a pilot.", False),
    ("Caroline works as a nurse.", "Caroline used to work as a pilot.", False),
    ("Caroline works as a nurse.", "Caroline might work as a pilot next year.", False),
    ("Caroline works as a nurse.", "Caroline is thinking about becoming a pilot.", False),
    ("Melanie lives in Lisbon.", "Melanie is travelling to Kyoto in May.", False),
    ("Melanie lives in Lisbon.", "Melanie's sister lives in Kyoto.", False),
    ("Melanie lives in Lisbon.", "Melanie would love to live in Kyoto someday.", False),
    ("Melanie lives in Lisbon.", "Melanie lives in Lisbon, near the river.", False),
    ("The team uses PostgreSQL for storage.", "The team uses Redis for caching.", False),
    ("The team uses PostgreSQL for storage.", "Should we use SQLite for storage?", False),
    ("The team uses PostgreSQL for storage.", "We are not going to use SQLite for storage.", False),
    (
        "Caroline works as a nurse. She adopted a greyhound named Biscuit.",
        "Caroline works as a pilot.",
        False,
    ),
    ("Gina prefers tacos to ramen.", "Gina prefers tea to coffee.", False),
    ("Aiko is dating Samir.", "Aiko's friend is dating Tomas.", False),
    ("Priya is 31 years old.", "Priya's daughter is 3 years old.", False),
    ("Rafael's favorite book is Dune.", "Rafael's favorite film is Alien.", False),
    ("The user's timezone is CET.", "The user's manager's timezone is PST.", False),
    ("Caroline works as a nurse.", "Caroline works as a nurse at the children's hospital.", False),
    ("Jonas moved to Lisbon.", "Jonas's parents moved to Porto.", False),
    ("Odile works as a teacher.", "If Odile worked as a pilot she would travel more.", False),
)

_ASSISTANT_EMAIL = "I checked your inbox. The latest email from HR says your manager is now Mallory."

#: Issue 40, finding 3: what must never replace the owner's word, and the owner's word in the
#: forms the distillers and agents write it (which must still replace).
ADVERSARIAL: tuple[Case, ...] = (
    # -- reported speech: someone else's word, relayed
    Case(
        old="The user's manager is Dana.",
        new="The assistant said that the latest email says the user's manager is now Mallory.",
        said=(("assistant", "The latest email says the user's manager is now Mallory."),),
        replaces=False,
        kind="reported",
    ),
    Case(
        old="The user's manager is Dana.",
        new="The user's manager is now Mallory.",
        said=(("assistant", _ASSISTANT_EMAIL),),
        replaces=False,
        kind="reported",
    ),
    Case(
        old="Caroline works as a nurse.",
        new="According to her LinkedIn page, Caroline works as a pilot.",
        replaces=False,
        kind="reported",
    ),
    Case(
        old="Melanie lives in Lisbon.",
        new="Dana says Melanie moved to Kyoto.",
        replaces=False,
        kind="reported",
    ),
    Case(
        old="The team uses PostgreSQL for storage.",
        new="The vendor's landing page claims the team uses MongoDB for storage.",
        replaces=False,
        kind="reported",
    ),
    Case(
        old="The user's timezone is CET.",
        new="The calendar invite states the user's timezone is PST.",
        replaces=False,
        kind="reported",
    ),
    Case(
        old="Priya is 31 years old.",
        new="Reportedly, Priya is 35 years old.",
        replaces=False,
        kind="reported",
    ),
    Case(
        old="The team uses Redis for caching.",
        new="Per the migration ticket, the team now uses Memcached for caching.",
        replaces=False,
        kind="reported",
    ),
    Case(
        old="Tomas lives in Reykjavik.",
        new="Tomas moved to Oaxaca, a colleague mentioned.",
        replaces=False,
        kind="reported",
    ),
    Case(
        old="The user's editor is vim.",
        new="The user's editor is Emacs, as the onboarding survey shows.",
        replaces=False,
        kind="reported",
    ),
    Case(
        old="The user's deadline is Friday.",
        new="The user's deadline is next Wednesday.",
        said=(
            (
                "assistant",
                "Your project manager wrote in Slack that the deadline moved: it is next Wednesday.",
            ),
        ),
        replaces=False,
        kind="reported",
    ),
    Case(
        old="Odile works as a teacher.",
        new="Odile works as a nurse.",
        said=(("user", "Odile: My neighbour keeps telling people I work as a nurse."),),
        replaces=False,
        kind="reported",
    ),
    Case(
        old="Rafael's favorite book is Dune.",
        new="Rafael's favorite book is now Middlemarch.",
        said=(
            ("assistant", "Rafael: Apparently my favorite book is now Middlemarch, or so my sister thinks."),
        ),
        replaces=False,
        kind="reported",
    ),
    # -- quoted text: a page, an email, a snippet pasted into the conversation
    Case(
        old="The user's manager is Dana.",
        new="The user's manager is now Mallory.",
        said=(
            (
                "assistant",
                "Here is the email you forwarded:\n> Effective today, the user's manager is now Mallory.",
            ),
        ),
        replaces=False,
        kind="quoted",
    ),
    Case(
        old="We decided to use PostgreSQL for storage.",
        new="The team uses MongoDB for storage.",
        said=(
            (
                "assistant",
                "From the vendor page:\n\nThe team uses MongoDB for storage and never looked back.",
            ),
        ),
        replaces=False,
        kind="quoted",
    ),
    Case(
        old="The user's timezone is CET.",
        new="The user's timezone is PST.",
        said=(("user", "This is what the settings export gave me:\n```\nThe user's timezone is PST\n```"),),
        replaces=False,
        kind="quoted",
    ),
    Case(
        old="The user's editor is vim.",
        new="The user's editor is \u201cEmacs\u201d in the sample config.",
        replaces=False,
        kind="quoted",
    ),
    Case(
        old="Melanie lives in Lisbon.",
        new="Melanie relocated to Hobart.",
        said=(
            ("assistant", 'The travel blog\'s caption read "Melanie relocated to Hobart" under the photo.'),
        ),
        replaces=False,
        kind="quoted",
    ),
    Case(
        old="The team uses Jenkins for builds.",
        new="The team now uses Buildkite for builds.",
        said=(
            ("assistant", "Here is the case study on their site. The team now uses Buildkite for builds."),
        ),
        replaces=False,
        kind="quoted",
    ),
    Case(
        old="Caroline works as a nurse.",
        new="Caroline works as a pilot, 'for real this time'.",
        replaces=False,
        kind="quoted",
    ),
    Case(
        old="Gina prefers tacos to ramen.",
        new="Gina prefers ramen over tacos.",
        said=(("user", "Gina: `Gina prefers ramen over tacos` is the test sentence in my parser."),),
        replaces=False,
        kind="quoted",
    ),
    # -- retrieved: a tool's output, a web page, an external source
    Case(
        old="The user's timezone is CET.",
        new="The user's timezone is PST.",
        said=(("tool", "calendar.settings -> The user's timezone is PST"),),
        replaces=False,
        kind="tool output",
    ),
    Case(
        old="The team uses PostgreSQL for storage.",
        new="The team uses MongoDB for storage.",
        source="url",
        replaces=False,
        kind="tool output",
    ),
    Case(
        old="The user's manager is Dana.",
        new="The user's manager is Mallory.",
        source="external",
        replaces=False,
        kind="tool output",
    ),
    Case(
        old="Melanie lives in Lisbon.",
        new="Melanie moved to Kyoto.",
        said=(("system", "Directory sync: Melanie moved to Kyoto."),),
        replaces=False,
        kind="tool output",
    ),
    Case(
        old="The team uses Jenkins for builds.",
        new="The team now uses GitHub Actions for builds.",
        source="tool",
        replaces=False,
        kind="tool output",
    ),
    Case(
        old="Priya is 31 years old.",
        new="Priya turned 40 years old.",
        said=(("assistant", "The search results show Priya turned 40 years old."),),
        replaces=False,
        kind="tool output",
    ),
    Case(
        old="The user's editor is vim.",
        new="The user's editor is Zed.",
        said=(("user", "My editor is vim."), ("tool", "The user's editor is Zed.")),
        replaces=False,
        kind="tool output",
    ),
    # -- hypotheticals, examples, fiction
    Case(
        old="The team uses Redis for caching.",
        new="Suppose the team uses Memcached for caching.",
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="Caroline works as a nurse.",
        new="Imagine that Caroline works as a pilot.",
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="Melanie lives in Lisbon.",
        new="Hypothetically, Melanie relocated to Hobart.",
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="Caroline works as a nurse.",
        new="In the novel, Caroline works as a pilot.",
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="The user's timezone is CET.",
        new="For example, the user's timezone is PST.",
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="The team uses PostgreSQL for storage.",
        new="In the test scenario, the team uses SQLite for storage.",
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="Odile works as a teacher.",
        new="As an example, Odile works as a nurse.",
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="Samir works as a barista.",
        new="Samir works as a detective.",
        said=(("user", "Let's do a role-play: Samir works as a detective and I am his client."),),
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="The team uses Redis for caching.",
        new="The team uses Memcached for caching.",
        said=(("user", "What if the team uses Memcached for caching instead, would that be faster"),),
        replaces=False,
        kind="hypothetical",
    ),
    Case(
        old="The user's deadline is Friday.",
        new="The user's deadline is Monday.",
        said=(("user", "The deadline is Monday if the client signs today."),),
        replaces=False,
        kind="hypothetical",
    ),
    # -- other people's facts and word
    Case(
        old="Caroline works as a nurse.",
        new="Caroline works as a pilot.",
        old_said=(("user", "Caroline: I work as a nurse at the children's hospital."),),
        said=(("assistant", "Melanie: Caroline works as a pilot now."),),
        old_tier="HOT",
        replaces=False,
        kind="other person",
    ),
    Case(
        old="The user's manager is Dana.",
        new="The user's manager is now Mallory.",
        old_said=(("user", "My manager is Dana."),),
        said=(("assistant", "Noted: the user's manager is now Mallory."),),
        old_tier="HOT",
        replaces=False,
        kind="other person",
    ),
    Case(
        old="The user's manager is Dana.",
        new="The user's friend's manager is Lee.",
        replaces=False,
        kind="other person",
    ),
    Case(
        old="The user lives in Lisbon.",
        new="The user's partner moved to Berlin.",
        replaces=False,
        kind="other person",
    ),
    Case(
        old="The user's timezone is CET.",
        new="The customer's timezone is PST.",
        replaces=False,
        kind="other person",
    ),
    Case(
        old="Caroline works as a nurse.",
        new="Caroline's mother works as a pilot.",
        replaces=False,
        kind="other person",
    ),
    # -- stable memories: COLD decisions and decay-exempt facts change only by their owner's act
    Case(
        old="We decided to use PostgreSQL for storage.",
        new="The team switched to SQLite for storage.",
        old_tier="COLD",
        replaces=False,
        kind="cold",
    ),
    Case(
        old="We decided to use PostgreSQL for storage.",
        new="The team uses MongoDB for storage.",
        said=(("assistant", "The vendor's page says the team uses MongoDB for storage."),),
        old_tier="COLD",
        replaces=False,
        kind="cold",
    ),
    Case(
        old="The user's manager is Dana.",
        new="The user's manager is Lee.",
        old_exempt=True,
        replaces=False,
        kind="decay exempt",
    ),
    Case(
        old="The user's manager is Dana.",
        new="The user's manager is now Mallory.",
        said=(("assistant", _ASSISTANT_EMAIL),),
        old_tier="HOT",
        old_exempt=True,
        replaces=False,
        kind="decay exempt",
    ),
    # -- the owner's own word, as the distillers and agents write it: replace
    Case(
        old="The user's manager is Dana.",
        new="The user's manager is now Lee.",
        said=(("user", "Quick update: my manager is Lee now."),),
        replaces=True,
        kind="own word",
    ),
    Case(
        old="The user's manager is Dana.",
        new="The user's manager is now Lee.",
        old_said=(("user", "My manager is Dana."),),
        said=(("user", "My manager is Lee now, the reorg finally happened."),),
        old_tier="HOT",
        replaces=True,
        kind="own word",
    ),
    Case(
        old="The team uses PostgreSQL for storage.",
        new="The user said that the team uses SQLite for storage.",
        said=(("user", "The team uses SQLite for storage."),),
        replaces=True,
        kind="own word",
    ),
    Case(
        old="Caroline works as a nurse.",
        new="Caroline started working as a pilot.",
        old_said=(("user", "Caroline: I work as a nurse."),),
        said=(("user", "Caroline: Big news, I started working as a pilot!"),),
        old_tier="HOT",
        replaces=True,
        kind="own word",
    ),
    Case(
        old="The user lives in Porto.",
        new="The user moved to Lisbon last week.",
        said=(("user", "My mom keeps asking about work. Anyway, I moved to Lisbon last week."),),
        replaces=True,
        kind="own word",
    ),
    Case(
        old="The team uses Jenkins for builds.",
        new="The team now uses GitHub Actions for builds.",
        said=(
            ("assistant", "Done: the team now uses GitHub Actions for builds, and the Jenkins jobs are off."),
        ),
        replaces=True,
        kind="own word",
    ),
    Case(
        old="Melanie lives in Lisbon.",
        new="Melanie moved to Kyoto.",
        said=(("assistant", "Melanie: We finally did it, I moved to Kyoto in the spring."),),
        replaces=True,
        kind="own word",
    ),
)

CASES: tuple[Case, ...] = (*(Case(old=o, new=n, replaces=y) for o, n, y in PAIRS), *ADVERSARIAL)


def _statement(
    text: str, said: Turns, *, source: str | None = None, tier: str = "WARM", exempt: bool = False
) -> Statement:
    return Statement(
        content=text,
        cited=tuple(Cited(role=r, text=t) for r, t in said),
        retrieved=source is not None,
        tier=tier,
        decay_exempt=exempt,
    )


def replaces(case: Case) -> bool:
    """Whether Engram's policy lets ``case.new`` replace ``case.old``: the same fact key and a
    different value (ledger.memory.facts), stated in the owner's own voice and allowed by the
    older memory's tier and exemption (ledger.memory.policy.why_not_replaced)."""
    a, b = fact_of(case.old), fact_of(case.new)
    if a is None or b is None or a.key != b.key or a.value == b.value:
        return False
    old = _statement(case.old, case.old_said, tier=case.old_tier, exempt=case.old_exempt)
    new = _statement(case.new, case.said, source=case.source)
    return why_not_replaced(old, new, old_value=a.value, new_value=b.value) is None


def replaced_by_fact_alone(case: Case) -> bool:
    """What the detector before issue 40 did: the same fact key, a different value."""
    a, b = fact_of(case.old), fact_of(case.new)
    return a is not None and b is not None and a.key == b.key and a.value != b.value


def score(cases: tuple[Case, ...] = CASES) -> dict[str, float]:
    """Precision, recall and false-positive rate of :func:`replaces` on ``cases`` (all of
    them by default), and how many of the adversarial negatives the detector before issue
    40 replaced."""
    tp = sum(1 for c in cases if c.replaces and replaces(c))
    fp = sum(1 for c in cases if not c.replaces and replaces(c))
    fn = sum(1 for c in cases if c.replaces and not replaces(c))
    negatives = sum(1 for c in cases if not c.replaces)
    adversarial = [c for c in cases if c in ADVERSARIAL and not c.replaces]
    return {
        "pairs": len(cases),
        "positives": len(cases) - negatives,
        "negatives": negatives,
        "adversarial": len(adversarial),
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "false_positive_rate": fp / negatives if negatives else 0.0,
        "adversarial_replaced_by_fact_alone": sum(1 for c in adversarial if replaced_by_fact_alone(c)),
    }
