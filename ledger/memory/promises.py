"""Whether a sentence is a promise: the agent committing itself to a future act.

A ``COMMITMENT`` memory is filed COLD, a permanent record the trust oracle counts, so a
sentence becomes one only when it is a real promise, read without a model from the sentence
and the role of the turn it came from. A sentence is a promise when all of these hold:

1. **the agent says it**: the turn is the assistant's (a user's "I will" is the user's plan,
   and a user's request is not a promise by anyone);
2. **in its own voice**: "I will", "I'll", "I promise to", "I commit to", "I'm going to",
   outside quotation marks (a quoted line, an example sentence, a role-played character; double,
   single or back quotes, a "> " block quote, a quotation that closes in a later sentence) and
   not inside reported speech ("he says he'll ...", "you said: I'll ...", "your note reads ...");
3. **an act for the listener or the work**: the verb after it (or after "make sure to", "be
   sure to") is one that does something later: send, remind, follow up, get back, update,
   pass on, schedule, fix, deliver, keep someone posted ...; or it binds the agent's conduct
   "from now on", "going forward", "next time";
4. **not an acknowledgement or a narration of the reply itself**: "I will note that",
   "I'll keep that in mind", "I'll remember", "I'll check", "I'll provide some tips",
   "I'll outline a plan", "I'll do my best" are not promises;
5. **unconditional**: no condition on the listener ("if you want, I could ...", "let me know
   and I'll ...", "please share the list, and I'll ...", "once you decide, I'll ..."), no
   hypothetical ("would", "could", "might") and no question.

Measured on a labelled set of statements from real conversations (bench/commitment_set.py).
"""

from __future__ import annotations

import re

__all__ = ["is_promise"]

#: The agent's own future: "I will", "I'll", "I promise to" ... with adverbs between.
_FUTURE = re.compile(
    r"\b(?:i\s+will|i(?:'|\u2019)ll|i\s+shall|i\s+promise\s+to|i\s+commit\s+to|i(?:'|\u2019)m\s+going\s+to|"
    r"i\s+am\s+going\s+to)\s+"
    r"(?P<rest>(?:(?:also|definitely|certainly|personally|then|now|immediately|promptly|still|"
    r"right\s+away|first|gladly|always|be\s+sure\s+to|make\s+sure\s+(?:to|that\s+i)|make\s+a\s+point\s+(?:of|to)|"
    r"try\s+to)\s+)*[\w'\u2019-]+(?:\s+[\w'\u2019-]+){0,6})",
    re.I,
)
#: Acts done later, for the listener or the work.
_ACTS = re.compile(
    r"^(?:send|email|e-mail|forward|mail|text|call|ring|contact|reach\s+out\s+to\s+(?:you|the|them|him|her)|"
    r"follow\s+up|get\s+back\s+to\s+(?:you|them|him|her|the\s+team)\b|circle\s+back|check\s+in\s+with|save|remind|notify|alert|ping|update\s+(?:you|the|your|it|this|that)|"
    r"keep\s+(?:you|everyone|everybody|them|him|her|the\s+team)\s+(?:posted|updated|informed|in\s+the\s+loop)|let\s+you\s+know|pass\s+(?:it|this|that|your|the|on|along)|"
    r"share\s+(?:it|the|my)\s+\w+\s+with|schedule|book|reserve|set\s+up|set\s+(?:a|an)\s+reminder|add\s+(?:a|an|it|this|that|the)\b.*\bto\s+(?:your|the)|"
    r"fix|repair|patch|deliver|ship|deploy|refund|submit|file|finish|complete|prepare|draft|handle|"
    r"take\s+care\s+of|look\s+into|investigate|escalate|report|order|cancel|renew|revert|"
    r"track|monitor|review\s+(?:it|this|that|the|your)\s+(?:later|tomorrow|again)|"
    r"refer\s+to|call\s+(?:it|him|her|them|you)|use|answer|respond|reply|write|format|keep\s+(?:my|the|all|each|every|it)\s+\w+|"
    r"be\s+(?:speaking|using|writing|answering|replying|responding|calling|referring))\b",
    re.I,
)
#: Binds the agent's conduct beyond this reply.
_FROM_NOW = re.compile(
    r"\b(?:from\s+now\s+on|going\s+forward|in\s+future|in\s+the\s+future|next\s+time|from\s+here\s+on)\b",
    re.I,
)
#: Acts that need a later moment: without "from now on", "use", "answer", "write" ... are
#: what the reply itself does ("I'll use a table below").
_CONDUCT_ONLY = re.compile(
    r"^(?:refer\s+to|call\s+(?:it|him|her|them|you)|use|answer|respond|reply|write|format|"
    r"keep\s+(?:my|the|all|each|every|it)\s+\w+|be\s+\w+ing)\b",
    re.I,
)
#: Acknowledgements and narrations of the reply itself: never a promise.
_NOT_ACTS = re.compile(
    r"^(?:note|take\s+note|add\s+(?:that|this|it)\s+to\s+(?:the|my)\s+notes|make\s+a\s+note(?!\s+to\s+remind)|keep\s+(?:that|this|it|these|those|your|the|in)\b.*\bin\s+mind|keep\s+in\s+mind|"
    r"bear\s+(?:that\s+)?in\s+mind|remember|check(?!\s+in\s+with)|double-check|see|look|think|try|do\s+my\s+best|"
    r"be\s+(?:happy|glad|here|more\s+than)|help|assist|provide|give|outline|break|guide|walk|show|explain|suggest|"
    r"recommend|highlight|list|offer|assume|need|start|begin|focus|summari[sz]e|cover|go\s+over|"
    r"create|put\s+together|compile|share\s+some|include|incorporate|consider)\b",
    re.I,
)
#: A condition on the listener or a hypothetical anywhere before or around the promise.
_CONDITION = re.compile(
    r"\b(?:if|unless|once\s+you|when\s+you|whenever\s+you|as\s+soon\s+as\s+you|after\s+you|should\s+you|"
    r"in\s+case|let\s+me\s+know|feel\s+free|just\s+(?:ask|tell|say|let)|please\s+(?:share|send|provide|tell|give|let|"
    r"report|fill|paste|confirm|choose|pick|reply|respond|go\s+ahead|do)|would|could|might|"
    r"share\s+(?:them|it|the|your)\b[^,.]*,\s*and|report\s+your\b[^,.]*,\s*and|send\s+me\b[^,.]*,\s*and|"
    r"tell\s+me\b[^,.]*,\s*and|give\s+me\b[^,.]*,\s*and|how\s+about|why\s+don(?:'|\u2019)t)\b",
    re.I,
)
#: Reported speech: someone else's "I will" ("he says", "she told me").
_REPORTED = re.compile(
    r"\b(?:he|she|they|it|who|you)\s+(?:says?|said|tells?|told|replie[sd]|answer(?:s|ed)|adds?|added|promise[sd]?|"
    r"wr[io]tes?|written|mention(?:s|ed)?|asked|typed|quoted|put\s+it)\b|"
    r"\byour\s+(?:message|note|email|e-mail|text|words|line|draft|post|comment|reply|answer)\s+"
    r"(?:says?|said|reads?|was|is|went)\b",
    re.I,
)
_QUOTES = re.compile(r"[\"\u201c\u201d\u00ab\u00bb]")
#: A single quote or a backtick opening a quotation (an apostrophe sits between letters).
_OPENS = re.compile(r"[\u2018`]|(?:^|[\s:(\[])'")
#: A quotation closing after the promise: one that opened in an earlier sentence.
_CLOSES = re.compile(r"[\"\u201c\u201d\u00ab\u00bb`]|[.!?,;:][\u2019']|[\u2019']\s*$")


def is_promise(role: str, sentence: str) -> bool:
    """Whether ``sentence``, said in a turn of ``role``, is the agent promising a future act
    (the module's rules 1-5)."""
    if role != "assistant":
        return False
    s = " ".join(sentence.split())[:600]
    if not s or s.rstrip(" )*_").endswith("?"):
        return False
    m = _FUTURE.search(s)
    if m is None:
        return False
    before = s[: m.start()]
    if (
        _QUOTES.search(before)
        or _OPENS.search(before)
        or _CLOSES.search(s[m.end() :])
        or s.lstrip("*-\u2022 ").startswith(("'", '"', ">", "`", "\u2018"))
    ):
        return False  # a quoted line, an example sentence, a character's speech
    # A condition before the promise, or in its own clause ("I'll send it if you like"); a
    # later clause's condition ("... and let you know if I need more") binds only that clause.
    clause = re.split(r",|;|\band\b|\bbut\b", m.group(0) + s[m.end() :], maxsplit=1)[0]
    if _REPORTED.search(s) or _CONDITION.search(before) or _CONDITION.search(clause):
        return False
    rest = re.sub(
        r"^(?:(?:also|definitely|certainly|personally|then|now|immediately|promptly|still|right\s+away|first|"
        r"gladly|always|be\s+sure\s+to|make\s+sure\s+(?:to|that\s+i)|make\s+a\s+point\s+(?:of|to)|try\s+to)\s+)+",
        "",
        m.group("rest"),
        flags=re.I,
    )
    rest = re.sub(r"^(?:make\s+a\s+note\s+to\s+)", "", rest, flags=re.I)
    if _NOT_ACTS.match(rest) or _ACTS.match(rest) is None:
        return False
    # "use", "answer", "write" ... promise only with a later moment ("from now on")
    return _CONDUCT_ONLY.match(rest) is None or _FROM_NOW.search(s) is not None
