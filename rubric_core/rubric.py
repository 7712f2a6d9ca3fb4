"""Parsing a rubric (a newline-separated checklist) into criteria, and validating it.

One criterion per line; blank lines and Markdown headings (`# Section`) are skipped, and
bullets (`-`, `*`, `+`, `1.`, `1)`, `a)`) and checkboxes (`- [ ]`, `[x]`) are removed.
A line may carry, after its bullet or checkbox, a weight in brackets, and at its end a
code check in braces:

| syntax | meaning | example |
|---|---|---|
| `- text` | a criterion of weight 1 | `- Cites the release date` |
| `- [N] text` | weight N, a whole number from 1 to `MAX_WEIGHT` | `- [3] Cites the release date` |
| `- [-N] text` | a penalty: something the work must not do; passes when it is absent | `- [-5] Invents a price` |
| `- text {check arg}` | decided every pass by a code check, not the judge | `- [2] Exactly three lines {lines == 3}` |
| `- \\[text`, `text \\{...}` | a literal leading bracket or trailing brace | `- \\[Draft] is marked as a draft` |

A checkbox is `[ ]`, `[]`, `[x]` or `[X]`; any other bracket right after the bullet is a
weight, so `[0]`, `[abc]` and `[99999]` are errors naming the line (a Markdown link,
`[text](url)`, is text). The check syntax and the built-in checks are described in
`rubric_core.tools.checks`.

`parse_criteria` returns `CriterionSpec`s and raises `RubricError` on a malformed line,
and on a line that is only a bullet (`-`, `*`, `1.`, `- [ ]`: a criterion was forgotten);
`parse_rubric` returns just the names and never raises (a malformed line is kept whole,
as it always was; a bare bullet is skipped); `validate_rubric` and `validate_criteria`
also enforce the limits.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rubric_core.check_registry import check_problem, registry_version
from rubric_core.errors import InputError

MAX_RUBRIC_CHARS = 20_000
"""Longest rubric accepted. A checklist is read by a model on every pass; past this
size it is almost certainly a pasted document, not a checklist."""

MAX_CRITERIA = 100
"""Most criteria one rubric may hold."""

MAX_CRITERION_CHARS = 1_000
"""Longest single criterion accepted."""

MAX_WEIGHT = 100
"""Largest weight, and largest penalty, one criterion may carry. HealthBench's physician
rubrics stay within 10; a hundred leaves room for finer scales without letting one line
drown the rest by accident."""

MAX_CHECK_CHARS = 2_000
"""Longest code check (the text between the braces) accepted; an inline JSON Schema fits."""


def criterion_key(name: object) -> str:
    """How two spellings of one criterion are told to be the same: whitespace folded
    (as `criteria_from_healthbench` folds it) and case ignored. Scores match verdicts on it.

    Examples:
        >>> criterion_key("  Advises  seeing\\na Doctor ") == criterion_key("advises seeing a doctor")
        True
    """
    return " ".join(str(name).split()).casefold()


_BULLET_RE = re.compile(
    r"""^\s*(?:
        [-*+\u2022\u2013]\s+(?:\[[ xX]?\]\s*)?   # - item, * item, - [ ] item
      | \[[ xX]?\]\s*                          # [ ] item
      | \(?\d{1,3}[.)]\s+                      # 1. item, 1) item, (1) item
      | [a-zA-Z][.)]\s+(?=\S)                  # a) item
    )""",
    re.VERBOSE,
)

_BARE_BULLET_RE = re.compile(
    r"""^\s*(?:
        [-*+\u2022\u2013](?:\s*\[[ xX]?\])?   # -, *, - [ ]
      | \[[ xX]?\]                          # [ ]
      | \(?\d{1,3}[.)]                       # 1. 1) (1)
      | [a-zA-Z][.)]                         # a) a.
    )\s*$""",
    re.VERBOSE,
)
"""A line that is a bullet and nothing else: no criterion, whatever the bullet says."""

_TOOL_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"\b(tests?|pytest|unit[- ]tests?|test suite|passes|compiles?|runs?)\b", re.I),
        "run_test_suite",
    ),
    (re.compile(r"\bsyllables?\b|\bhaiku\b|\b5[-/ ]7[-/ ]5\b", re.I), "count_syllables"),
    (
        re.compile(
            r"\b(\d+|exactly|at most|at least|no more than|fewer than|under)\s+\w*\s*"
            r"(words?|characters?|chars|lines?|sentences?)\b",
            re.I,
        ),
        "text_stats",
    ),
    (re.compile(r"\b(matches|regex|regular expression|pattern)\b", re.I), "regex_check"),
)


_CHECKBOX_RE = re.compile(r"^\[[ xX]?\]")
_WEIGHT_RE = re.compile(r"^\[([^\]\n]*)\](?!\()\s*")
_INTEGER_RE = re.compile(r"^[+-]?\d+$")
_CHECK_RE = re.compile(r"^([A-Za-z_][\w-]*)\s*:?\s*(.*)$", re.DOTALL)


class RubricError(InputError):
    """A rubric that cannot be used, with a message that says why.

    Attributes:
        line: The 1-based line of the rubric at fault, when one line is.
        text: That line as written.
    """

    def __init__(self, message: str, *, line: int | None = None, text: str | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.text = text


@dataclass(frozen=True)
class CheckSpec:
    """The code check a criterion is bound to: `{lines == 3}` is `CheckSpec("lines", "== 3")`."""

    name: str
    """The registered check's name (`lines`, `regex`, `json`, a custom one...)."""

    arg: str = ""
    """What follows the name (and its optional colon), stripped."""

    source: str = field(default="", compare=False)
    """The text between the braces as written, for display."""

    def __str__(self) -> str:
        return "{" + (self.source or f"{self.name}: {self.arg}".rstrip(": ")) + "}"


@dataclass(frozen=True)
class CriterionSpec:
    """One criterion of a rubric, as `parse_criteria` reads it.

    Examples:
        >>> CriterionSpec("Invents a price", -5).penalty
        True
    """

    name: str
    """What the criterion checks, without its bullet, weight or check; verdicts match on it."""

    weight: int = 1
    """How much it counts: 1 to `MAX_WEIGHT`, or negative for a penalty."""

    check: CheckSpec | None = None
    """The code check that decides it every pass, or `None` when the judge does."""

    line: int = field(default=0, compare=False)
    """The 1-based line of the rubric it was read from (0 when built by hand)."""

    @property
    def penalty(self) -> bool:
        """Whether this is something the work must not do (a negative weight)."""
        return self.weight < 0


def _strip_bullet(line: str) -> str:
    return _BULLET_RE.sub("", line, count=1).strip()


def _escaped(text: str, index: int) -> bool:
    """Whether `text[index]` follows an odd number of backslashes."""
    count = 0
    while index - count - 1 >= 0 and text[index - count - 1] == "\\":
        count += 1
    return count % 2 == 1


def _split_check(body: str) -> tuple[str, str | None]:
    """(the text before the check, the text between its braces), or (body, None)."""
    if not body.endswith("}") or _escaped(body, len(body) - 1):
        return body, None
    depth = 0
    for index in range(len(body) - 1, -1, -1):
        char = body[index]
        if char not in "{}" or _escaped(body, index):
            continue
        depth += 1 if char == "}" else -1
        if depth == 0:
            break
    else:
        return body, None  # unbalanced: the braces are text
    if index > 0 and not body[index - 1].isspace():
        return body, None  # `f{name}`: braces inside a word are text
    return body[:index].rstrip(), body[index + 1 : -1].strip()


def _weight(token: str) -> int:
    token = token.strip()
    if not _INTEGER_RE.match(token):
        msg = (
            f"weight [{token}] is not a whole number; write e.g. [3], or [-5] for a penalty "
            "(to start a criterion with a bracket, write \\[)"
        )
        raise ValueError(msg)
    weight = int(token)
    if weight == 0:
        msg = f"weight [{token}] counts for nothing; use 1 to {MAX_WEIGHT}, or -1 to -{MAX_WEIGHT} for a penalty"
        raise ValueError(msg)
    if abs(weight) > MAX_WEIGHT:
        msg = f"weight [{token}] is out of range; use 1 to {MAX_WEIGHT}, or -1 to -{MAX_WEIGHT} for a penalty"
        raise ValueError(msg)
    return weight


def _read_body(body: str, number: int) -> CriterionSpec:
    """The criterion a bullet-stripped line states; `ValueError` says what is wrong."""
    weight = 1
    if body.startswith("\\["):
        body = body[1:]
    elif not _CHECKBOX_RE.match(body) and (match := _WEIGHT_RE.match(body)):
        weight = _weight(match.group(1))
        body = body[match.end() :]
    text, check_text = _split_check(body)
    check = None
    if check_text is not None:
        if len(check_text) > MAX_CHECK_CHARS:
            msg = f"the check is {len(check_text):,} characters; the limit is {MAX_CHECK_CHARS:,}"
            raise ValueError(msg)
        match = _CHECK_RE.match(check_text)
        if match is None:
            msg = (
                f"{{{check_text}}} at the end of the line must name a check, e.g. {{lines == 3}} "
                "(to end a criterion with braces, write \\{)"
            )
            raise ValueError(msg)
        name, arg = match.group(1).lower(), match.group(2).strip()
        problem = check_problem(name, arg)
        if problem:
            raise ValueError(problem)
        check = CheckSpec(name, arg, check_text)
    name = text.replace("\\{", "{").strip()
    if not name:
        msg = "the line has a weight or a check but no criterion; say what it checks"
        raise ValueError(msg)
    return CriterionSpec(name=name, weight=weight, check=check, line=number)


def _lines(text: str, *, bare: bool = False) -> Iterator[tuple[int, str, str]]:
    """(line number, line, bullet-stripped body) for every line that states a criterion;
    with `bare`, also each line that is only a bullet (`-`, `1.`, `- [ ]`), body empty."""
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if _BARE_BULLET_RE.match(raw):
            if bare:
                yield number, raw, ""
            continue
        body = _strip_bullet(raw)
        if body:
            yield number, raw, body


def _line_error(number: int, raw: str, problem: str) -> RubricError:
    shown = raw.strip()
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return RubricError(f"line {number} ({shown!r}): {problem}", line=number, text=raw)


def parse_criteria(text: str) -> list[CriterionSpec]:
    """Read a rubric's criteria with their weights and checks, one per non-empty line.

    A criterion repeated (compared case-insensitively) is kept once.

    Raises:
        RubricError: Naming the first malformed line: a bad weight, an unknown or
            malformed check, a line with only a weight or only a bullet, or a repeat
            with another weight or check.

    Examples:
        >>> for c in parse_criteria("- [3] Cites the date\\n- [ ] Is short {words <= 50}\\n- [-5] Invents a price"):
        ...     print(c.weight, c.name, c.check)
        3 Cites the date None
        1 Is short {words <= 50}
        -5 Invents a price None
        >>> parse_criteria("- [0] Cites the date")
        Traceback (most recent call last):
        ...
        rubric_core.rubric.RubricError: line 1 ('- [0] Cites the date'): weight [0] counts for nothing; use 1 to 100, or -1 to -100 for a penalty
    """
    if not isinstance(text, str):
        return _parse_criteria(text)
    return list(_parsed(text, registry_version()))


@functools.lru_cache(maxsize=256)
def _parsed(text: str, registry: int) -> tuple[CriterionSpec, ...]:
    """`parse_criteria`, kept per rubric text and state of the check registry.

    A run parses its rubric several times (checking it, each pass, the store's weights):
    the criteria are frozen, so the same text gives the same criteria until a custom
    check is registered or unregistered. An error is not kept: it is raised each time.
    """
    return tuple(_parse_criteria(text))


def _parse_criteria(text: str) -> list[CriterionSpec]:
    criteria: list[CriterionSpec] = []
    seen: dict[str, CriterionSpec] = {}
    for number, raw, body in _lines(text, bare=True):
        if _BARE_BULLET_RE.match(raw):
            problem = (
                "a bullet with no criterion after it; write what it checks, or delete the line"
            )
            raise _line_error(number, raw, problem)
        try:
            criterion = _read_body(body, number)
        except ValueError as exc:
            raise _line_error(number, raw, str(exc)) from None
        key = criterion.name.casefold()
        first = seen.get(key)
        if first is None:
            seen[key] = criterion
            criteria.append(criterion)
        elif (first.weight, first.check) != (criterion.weight, criterion.check):
            problem = (
                f"repeats the criterion of line {first.line} with another weight or check; "
                "keep one of them"
            )
            raise _line_error(number, raw, problem)
    return criteria


def parse_rubric(text: str) -> list[str]:
    """Split a rubric into its criteria's names, one per non-empty line.

    Bullets (`-`, `*`, `1.`, `[ ]`), weights (`[3]`) and checks (`{lines == 3}`) are
    removed; blank lines and Markdown headings (`# Section`) are skipped; duplicates are
    kept once. Never raises: a malformed line (`[0] ...`) is kept whole, as it reads.

    Examples:
        >>> parse_rubric("- has a title\\n\\n2. [3] cites a source\\n# notes\\n- [0] odd")
        ['has a title', 'cites a source', '[0] odd']
    """
    names: list[str] = []
    seen: set[str] = set()
    for number, _raw, body in _lines(text):
        try:
            name = _read_body(body, number).name
        except ValueError:
            name = body
        key = name.casefold()
        if key not in seen:
            seen.add(key)
            names.append(name)
    return names


def penalty_names(text: str) -> frozenset[str]:
    """The names of a rubric's penalties (`- [-N] text`), for showing their verdicts as
    `absent ✓` / `present ✗` (`schema.criterion_mark`); empty when the text does not parse.

    Examples:
        >>> sorted(penalty_names("- Gives the date\\n- [-5] Invents a price"))
        ['Invents a price']
    """
    try:
        return frozenset(c.name for c in parse_criteria(text) if c.penalty)
    except RubricError:
        return frozenset()


def validate_criteria(text: object) -> list[CriterionSpec]:
    """Parse a rubric and reject one that cannot be graded; returns its criteria.

    Raises:
        RubricError: The rubric is not a string, is empty or too large, or a line is
            malformed (the error names it).
    """
    if not isinstance(text, str):
        msg = f"rubric must be a string, got {type(text).__name__}"
        raise RubricError(msg)
    if "\x00" in text:
        msg = "rubric contains a NUL byte; paste it as plain text"
        raise RubricError(msg)
    if len(text) > MAX_RUBRIC_CHARS:
        msg = (
            f"rubric is {len(text):,} characters; the limit is {MAX_RUBRIC_CHARS:,}. "
            "A rubric is a checklist, one short criterion per line."
        )
        raise RubricError(msg)
    criteria = parse_criteria(text)
    if not criteria:
        msg = "rubric is empty: write at least one criterion, one per line"
        raise RubricError(msg)
    if len(criteria) > MAX_CRITERIA:
        msg = f"rubric has {len(criteria)} criteria; the limit is {MAX_CRITERIA}"
        raise RubricError(msg)
    for index, criterion in enumerate(criteria, start=1):
        if len(criterion.name) > MAX_CRITERION_CHARS:
            msg = (
                f"criterion {index} is {len(criterion.name):,} characters; "
                f"the limit is {MAX_CRITERION_CHARS:,}"
            )
            raise RubricError(msg, line=criterion.line)
    return criteria


def validate_rubric(text: object) -> list[str]:
    """Parse a rubric and reject one that cannot be graded; returns the criteria's names.

    Raises:
        RubricError: As `validate_criteria` does.

    Examples:
        >>> validate_rubric("- [2] Exactly three lines {lines == 3}\\n- Mentions rain")
        ['Exactly three lines', 'Mentions rain']
    """
    return [criterion.name for criterion in validate_criteria(text)]


def _item_error(index: int, problem: str) -> RubricError:
    return RubricError(f"rubric item at index {index}: {problem}")


def criteria_from_healthbench(data: str | list[Any] | dict[str, Any]) -> str:
    """Rubric text from a HealthBench-style rubric: a JSON list of `{criterion, points}`.

    `data` is the JSON text, the parsed list, or an example holding it under
    `"rubrics"` (as HealthBench's records do). Points become weights, negative points
    penalties; other keys (`tags`) are ignored; whitespace in a criterion is folded.

    Raises:
        RubricError: The JSON is malformed, or an item is (the error names its index):
            not an object, no criterion text, points not a non-zero whole number within
            `MAX_WEIGHT`, a criterion repeated.

    Examples:
        >>> print(criteria_from_healthbench('[{"criterion": "Advises seeing a doctor", "points": 5},'
        ...                                 ' {"criterion": "Recommends {dosage}", "points": -8}]'))
        - [5] Advises seeing a doctor
        - [-8] Recommends \\{dosage}
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            msg = f"the HealthBench rubric is not valid JSON: {exc}"
            raise RubricError(msg) from None
    if isinstance(data, dict) and isinstance(data.get("rubrics"), list):
        data = data["rubrics"]
    if not isinstance(data, list):
        msg = f"a HealthBench rubric is a JSON list of {{criterion, points}} objects, got {type(data).__name__}"
        raise RubricError(msg)
    if not data:
        msg = "the HealthBench rubric is empty: it lists no criteria"
        raise RubricError(msg)
    if len(data) > MAX_CRITERIA:
        msg = f"the HealthBench rubric has {len(data)} criteria; the limit is {MAX_CRITERIA}"
        raise RubricError(msg)
    lines: list[str] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            raise _item_error(
                index, f"must be an object with criterion and points, got {type(item).__name__}"
            )
        criterion, points = item.get("criterion"), item.get("points")
        if not isinstance(criterion, str) or not criterion.strip():
            raise _item_error(index, "criterion must be a non-empty string")
        text = " ".join(criterion.split())
        if len(text) > MAX_CRITERION_CHARS:
            raise _item_error(
                index,
                f"criterion is {len(text):,} characters; the limit is {MAX_CRITERION_CHARS:,}",
            )
        if isinstance(points, float) and points.is_integer():
            points = int(points)
        if isinstance(points, bool) or not isinstance(points, int):
            raise _item_error(index, f"points must be a whole number, got {points!r}")
        try:
            _weight(str(points))
        except ValueError:
            problem = f"points must be 1 to {MAX_WEIGHT}, or -1 to -{MAX_WEIGHT} for a penalty, got {points}"
            raise _item_error(index, problem) from None
        key = criterion_key(text)
        if key in seen:
            raise _item_error(index, f"repeats the criterion at index {seen[key]}")
        seen[key] = index
        lines.append(f"- [{points}] {text.replace('{', chr(92) + '{')}")
    rubric = "\n".join(lines)
    validate_criteria(rubric)
    return rubric


def suggested_tool(criterion: str) -> str | None:
    """Name the shipped grader tool a criterion likely needs, or `None`.

    A criterion such as "all tests pass" or "lines have 5/7/5 syllables" cannot be
    confirmed from a transcript alone; a grader without the tool has to guess.
    """
    for pattern, tool in _TOOL_HINTS:
        if pattern.search(criterion):
            return tool
    return None


def tool_warnings(text: str, available_tools: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Warnings for criteria a transcript alone cannot establish, given the grader's tools.

    Criteria bound to a code check need no tool and get no warning.
    """
    warnings: list[str] = []
    try:
        criteria = [c.name for c in parse_criteria(text) if c.check is None]
    except RubricError:
        criteria = parse_rubric(text)
    for criterion in criteria:
        tool = suggested_tool(criterion)
        if tool and tool not in available_tools:
            warnings.append(
                f"{criterion!r} is hard to judge from the transcript alone; "
                f"give the grader the {tool} tool."
            )
    return warnings
