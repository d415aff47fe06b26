"""A labelled set of memory pairs for supersession (issue 29, Deliver 1): (older memory,
newer memory, whether the newer one replaces the older). Written for Engram, in the styles
the distillers and agents write: conversation facts, user settings, team decisions.

Positives state a new value of the same fact; negatives are the near misses a careless
detector gets wrong (a wish, someone else, a question, a negation, the same value in other
words, a different attribute, a memory that says more than the one fact)."""

from __future__ import annotations

from ledger.memory.facts import fact_of

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


def replaces(old: str, new: str) -> bool:
    """Whether Engram's detector (ledger.memory.facts, as the policy applies it) lets ``new``
    replace ``old``: the same fact key, a different value."""
    a, b = fact_of(old), fact_of(new)
    return a is not None and b is not None and a.key == b.key and a.value != b.value


def score() -> dict[str, float]:
    """Precision, recall and false-positive rate of :func:`replaces` on :data:`PAIRS`."""
    tp = sum(1 for o, n, y in PAIRS if y and replaces(o, n))
    fp = sum(1 for o, n, y in PAIRS if not y and replaces(o, n))
    fn = sum(1 for o, n, y in PAIRS if y and not replaces(o, n))
    negatives = sum(1 for *_, y in PAIRS if not y)
    return {
        "pairs": len(PAIRS),
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "false_positive_rate": fp / negatives if negatives else 0.0,
    }
