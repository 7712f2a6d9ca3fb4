"""Text-measuring grader tools: syllables per line, word/character counts, regex checks."""

from __future__ import annotations

import re
import subprocess

from langchain_core.tools import tool

from rubric_core.tools._child import run_json_job

_MAX_TEXT_CHARS = 200_000
"""Longest text the text tools accept; past this the result says so instead of stalling."""

_MAX_PATTERN_CHARS = 500
"""Longest regular expression `regex_check` compiles."""

_REGEX_TIMEOUT_S = 2.0
"""Wall-clock budget for one regex search; catastrophic backtracking is cut off here."""

_WORD_RE = re.compile(r"[A-Za-z\u00C0-\u024F]+(?:['’][A-Za-z]+)*")
_COUNT_WORD_RE = re.compile(r"\b[\w'’-]+\b", re.UNICODE)
_SENTENCE_END_RE = re.compile(r"[.!?\n]")
_ALNUM_RE = re.compile(r"[A-Za-z0-9]")
_VOWEL_GROUP_RE = re.compile(r"[aeiouy]+")

# Words the rules below get wrong, with their usual syllable count.
_EXCEPTIONS: dict[str, int] = {
    "the": 1, "every": 3, "everything": 4, "everyone": 4, "evening": 3, "different": 3,
    "family": 3, "poem": 2, "poet": 2, "quiet": 2, "science": 2, "being": 2, "doing": 2,
    "going": 2, "seeing": 2, "fire": 1, "hour": 1, "our": 1, "flower": 2, "power": 2,
    "people": 2, "beautiful": 3, "business": 2, "chocolate": 3, "interesting": 3,
    "area": 3, "idea": 3, "real": 1, "really": 2, "create": 2, "created": 3, "lion": 2,
    "diet": 2, "violet": 3, "piano": 3, "radio": 3, "video": 3, "cruel": 2, "ocean": 2,
    "naive": 2, "recipe": 3, "simile": 3, "apostrophe": 4, "sometimes": 2, "someone": 2,
    "somewhere": 2, "anyone": 3, "whereas": 2, "moreover": 3, "toward": 2, "towards": 2,
    "eyes": 1, "eye": 1, "one": 1, "once": 1, "queue": 1, "haiku": 2, "maybe": 2,
}  # fmt: skip


def _syllables_in_word(word: str) -> int:
    """English syllables by rule: vowel groups, minus silent endings, plus known exceptions."""
    word = re.sub(r"[^a-z]", "", word.lower())
    if not word:
        return 0
    if word in _EXCEPTIONS:
        return _EXCEPTIONS[word]
    if len(word) <= 3:
        return 1
    count = len(_VOWEL_GROUP_RE.findall(word))
    # Silent final e ("stone", "make"), but not "-le" after a consonant ("maple", "little").
    if (word.endswith("e") and not word.endswith(("le", "ee", "ye"))) or (
        word.endswith("le") and len(word) > 2 and word[-3] in "aeiouy"
    ):
        count -= 1
    # "-es"/"-ed" are silent except after sibilants ("boxes") or t/d ("wanted").
    if word.endswith("es") and not word.endswith(
        ("ses", "xes", "zes", "ches", "shes", "ges", "ces", "les")
    ):
        count -= 1
    if word.endswith("ed") and not word.endswith(("ted", "ded")) and len(word) > 3:
        count -= 1
    # Vowel pairs that are usually two syllables ("ia" in "trial", "io" in "lion").
    count += len(re.findall(r"[aeiou]?(?:ia|io|iu|eo|ua|uo)", word)) - len(
        re.findall(r"(?:tia|tio|sia|sio|cia|cio|gia|gio|qua|quo|gua|guo)", word)
    )
    if word.endswith("ism"):
        count += 1
    return max(1, count)


def syllable_count(text: str) -> int:
    """Syllables in `text` by the heuristic `count_syllables` uses.

    Examples:
        >>> syllable_count("an old silent pond")
        5
    """
    return sum(_syllables_in_word(word) for word in _WORD_RE.findall(text))


@tool
def count_syllables(text: str) -> str:
    """Count the syllables of each line of a poem (an English heuristic, +-1 on rare words).

    Returns one line per non-empty line of `text`, then the pattern (e.g. `5/7/5`).
    """
    if len(text) > _MAX_TEXT_CHARS:
        return f"ERROR: text is {len(text):,} characters; the limit is {_MAX_TEXT_CHARS:,}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "ERROR: the text is empty; pass the poem itself"
    counts = [syllable_count(line) for line in lines]
    report = [
        f"line {n}: {count} syllables: {line}"
        for n, (line, count) in enumerate(zip(lines, counts, strict=True), 1)
    ]
    report.append(f"lines: {len(lines)}")
    report.append(f"pattern: {'/'.join(str(c) for c in counts)}")
    return "\n".join(report)


def text_counts(text: str) -> dict[str, int]:
    """The counts `text_stats` reports (lines and paragraphs count only non-empty ones).

    Linear in the text's length: a sentence is a stretch between `.`, `!`, `?` or a line
    break that holds a letter or digit (a regular expression that found the same ones
    took 177 s on 120,000 spaces, trying every start).

    Examples:
        >>> text_counts("Two words.\\n\\nThen three more.")["words"]
        5
    """
    return {
        "words": len(_COUNT_WORD_RE.findall(text)),
        "characters": len(text),
        "characters_without_spaces": sum(1 for ch in text if not ch.isspace()),
        "lines": len([line for line in text.splitlines() if line.strip()]),
        "sentences": sum(1 for piece in _SENTENCE_END_RE.split(text) if _ALNUM_RE.search(piece)),
        "paragraphs": len([p for p in re.split(r"\n\s*\n", text) if p.strip()]),
    }


@tool
def text_stats(text: str) -> str:
    """Count words, characters, non-empty lines, sentences and paragraphs of a text."""
    if len(text) > _MAX_TEXT_CHARS:
        return f"ERROR: text is {len(text):,} characters; the limit is {_MAX_TEXT_CHARS:,}"
    return "\n".join(f"{key}: {value}" for key, value in text_counts(text).items())


_SEARCH_SCRIPT = """
import json, re, sys
job = json.load(sys.stdin)
try:
    found = []
    for match in re.compile(job["pattern"]).finditer(job["text"]):
        found.append([match.start(), match.group(0)[:200]])
        if len(found) >= 20:
            break
    print(json.dumps({"matches": found}))
except re.error as exc:
    print(json.dumps({"error": str(exc)}))
"""


def regex_search(pattern: str, text: str, *, timeout_s: float = _REGEX_TIMEOUT_S) -> str:
    """The `regex_check` result: matches, a bad-pattern message, or a timeout notice."""
    if not pattern:
        return "ERROR: the pattern is empty"
    if len(pattern) > _MAX_PATTERN_CHARS:
        return f"ERROR: the pattern is {len(pattern)} characters; the limit is {_MAX_PATTERN_CHARS}"
    if len(text) > _MAX_TEXT_CHARS:
        return f"ERROR: text is {len(text):,} characters; the limit is {_MAX_TEXT_CHARS:,}"
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"ERROR: invalid regular expression {pattern!r}: {exc}"
    # The search runs in a child interpreter: Python's re cannot be interrupted, and a
    # catastrophic pattern such as (a+)+$ would otherwise hang the grader's thread.
    try:
        outcome, failure = run_json_job(
            _SEARCH_SCRIPT, {"pattern": pattern, "text": text}, timeout_s=timeout_s
        )
    except subprocess.TimeoutExpired:
        return (
            f"TIMEOUT: the pattern {pattern!r} ran for more than {timeout_s:g}s "
            "(catastrophic backtracking?); simplify it"
        )
    if outcome is None:
        return f"ERROR: the regex search failed: {failure}"
    if "error" in outcome:
        return f"ERROR: invalid regular expression {pattern!r}: {outcome['error']}"
    found = outcome["matches"]
    if not found:
        return f"NO MATCH: {pattern!r} does not match the text"
    more = "+" if len(found) >= 20 else ""
    lines = [f"MATCH: {pattern!r} matches {len(found)}{more} time(s)"]
    lines.extend(f"at {start}: {text!r}" for start, text in found)
    return "\n".join(lines)


@tool
def regex_check(pattern: str, text: str) -> str:
    """Check whether a Python regular expression matches a text; lists the first matches.

    Use inline flags for options, e.g. `(?im)^## summary$`. A bad pattern or one that
    runs too long is reported in the result, not raised.
    """
    return regex_search(pattern, text)
