"""Code checks: criteria a deterministic function decides every pass, without the judge.

A rubric line binds a criterion to a check with a `{...}` at its very end, after a
space: `- [2] Exactly three lines {lines == 3}`. Inside the braces comes the check's
name, then its argument, optionally after a colon (`{regex: ^## Summary$}`,
`{json}`). The braces in an argument must balance or be escaped (`\\{`); a line
that should end in literal braces escapes the opening one: `Prints \\{name}`.

Built-in checks (the draft is the agent's last reply, the text a pass judges):

| check | holds when |
|---|---|
| `{words <= 150}`, `{lines == 3}`, `{chars < 280}`, `{sentences >= 2}`, `{paragraphs == 1}` | the count compares so: `==` (or `=`), `!=`, `<=`, `>=`, `<`, `>` and a whole number |
| `{words 100..150}` | the count lies in the range, both ends included |
| `{regex: PATTERN}` | the Python regular expression matches somewhere (`re.search`; flags inline, e.g. `(?im)`) |
| `{no-regex: PATTERN}` | it matches nowhere |
| `{syllables: 5-7-5}` | there are as many non-empty lines as numbers, with those syllable counts (`/` or spaces separate too) |
| `{json}` | the draft is valid JSON |
| `{json: {"type": "object", ...}}`, `{json: schemas/person.json}` | ... and valid against that JSON Schema, inline or in a file |
| `{pytest: tests/test_add.py}` | that pytest module passes against the draft's code in the sandbox |
| `{pytest: assert add(1, 2) == 3; assert add(0, 0) == 0}` | these statements, as the body of one test, pass |

Lines and paragraphs count only non-empty ones; words, sentences and characters are
counted as `text_stats` counts them. JSON and pytest checks read the draft's last
fenced block tagged `json` (resp. `python`/`py`), else its last untagged fenced block,
else the whole draft; the code is saved as `solution.py` and a test module that never
names `solution` gets `from solution import *`. File paths are resolved against the
`base_dir` given to `run_checks` (the middleware's `check_dir`; the working directory by
default) and must stay inside it: `..`, an absolute path or a symbolic link that leads
out is refused as a check error, and an error names the file, never what it holds.

On a penalty (a negative weight) the check detects the thing the work must not do,
so the criterion passes when the check does *not* hold:
`- [-5] Invents a price {regex: \\$\\d}` fails when a dollar amount appears.

Every check is bounded: regular expressions run in a child interpreter with a 2 s
timeout (as `regex_check` does), JSON is read up to 200,000 characters and validated
against a schema in a child interpreter with a timeout, and pytest runs in the sandbox
with its CPU, memory, process and wall-clock limits. A custom check registered with
`register_check` runs in-process; it must bound itself. Counting checks and the
fenced-block lookup are linear in the draft's length.

Examples:
    >>> run_check("lines", "== 3", "one\\ntwo\\nthree")
    CheckResult(passed=True, output='3 lines; needs exactly 3', error=False)
    >>> run_check("words", "100..150", "far too short").output
    '3 words; needs between 100 and 150'
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from langgraph.errors import GraphBubbleUp

from rubric_core.check_registry import (
    BUILTIN_CHECKS,
    COUNT_CHECKS,
    CheckFn,
    CheckResult,
    check_names,
    check_problem,
    comparison,
    custom_check,
    inline_tests,
    is_test_path,
    parse_json,
    register_check,
    syllable_pattern,
    unregister_check,
)
from rubric_core.tools._child import run_json_job
from rubric_core.tools.check_files import read_check_file
from rubric_core.tools.fences import fenced_block
from rubric_core.tools.test_runner import MODULE_NAME, run_pytest
from rubric_core.tools.text import regex_search, syllable_count, text_counts

if TYPE_CHECKING:
    from rubric_core.rubric import CriterionSpec
    from rubric_core.schema import CriterionVerdict

_SCHEMA_TIMEOUT_S = 10.0
"""Wall-clock budget for one JSON Schema validation (a schema's `pattern` is a regex)."""

_MAX_OUTPUT_CHARS = 4_000
"""Longest check output kept as evidence or gap."""

_COUNT_KEYS: dict[str, tuple[str, str]] = {
    "words": ("words", "word"),
    "lines": ("lines", "line"),
    "chars": ("characters", "character"),
    "sentences": ("sentences", "sentence"),
    "paragraphs": ("paragraphs", "paragraph"),
}
"""Count check name -> (`text_counts` key, singular noun)."""

_OP_WORDS = {
    "==": "exactly",
    "=": "exactly",
    "!=": "anything but",
    "<=": "at most",
    ">=": "at least",
    "<": "fewer than",
    ">": "more than",
}

_SCHEMA_SCRIPT = """
import json, sys
from jsonschema import validators
job = json.load(sys.stdin)
cls = validators.validator_for(job["schema"])
try:
    cls.check_schema(job["schema"])
except Exception as exc:
    # Where and which rule, never the offending value: the schema may be a file's content.
    where = getattr(exc, "json_path", "$")
    rule = getattr(exc, "validator", None)
    print(json.dumps({"schema_error": f"at {where}" + (f", the {rule!r} rule" if rule else "")}))
    raise SystemExit
errors = sorted(cls(job["schema"]).iter_errors(job["instance"]), key=lambda e: list(e.path))
print(json.dumps({"errors": [[e.json_path, e.message[:300]] for e in errors[:5]],
                  "count": len(errors)}))
"""


# --------------------------------------------------------------------------- helpers


def _clip(text: str, limit: int = _MAX_OUTPUT_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 5] + "[...]"


# --------------------------------------------------------------------------- counts


def _holds(op: str, value: int, low: int, high: int) -> bool:
    return {
        "==": value == low,
        "=": value == low,
        "!=": value != low,
        "<=": value <= low,
        ">=": value >= low,
        "<": value < low,
        ">": value > low,
        "..": low <= value <= high,
    }[op]


def _count_check(name: str) -> Callable[[str, str, Path], CheckResult]:
    key, singular = _COUNT_KEYS[name]

    def run(draft: str, arg: str, _base_dir: Path) -> CheckResult:
        op, low, high = comparison(arg)
        value = text_counts(draft)[key]
        wanted = f"between {low} and {high}" if op == ".." else f"{_OP_WORDS[op]} {low}"
        noun = singular if value == 1 else key
        return CheckResult(_holds(op, value, low, high), f"{value} {noun}; needs {wanted}")

    return run


# --------------------------------------------------------------------------- regex


def _regex_check(*, present: bool) -> Callable[[str, str, Path], CheckResult]:
    def run(draft: str, arg: str, _base_dir: Path) -> CheckResult:
        output = regex_search(arg, draft)
        if output.startswith(("ERROR", "TIMEOUT")):
            return CheckResult(False, output, error=True)
        found = output.startswith("MATCH")
        return CheckResult(found == present, output)

    return run


# --------------------------------------------------------------------------- syllables


def _syllables(draft: str, arg: str, _base_dir: Path) -> CheckResult:
    wanted = syllable_pattern(arg)
    lines = [line.strip() for line in draft.splitlines() if line.strip()]
    counts = [syllable_count(line) for line in lines]
    got, need = "/".join(map(str, counts)) or "no lines", "/".join(map(str, wanted))
    if len(counts) != len(wanted):
        return CheckResult(
            False,
            f"{len(lines)} non-empty lines with syllables {got}; needs {len(wanted)} lines, {need}",
        )
    off = [
        f"line {n} has {count}, needs {want}: {line}"
        for n, (line, count, want) in enumerate(zip(lines, counts, wanted, strict=True), 1)
        if count != want
    ]
    head = f"syllables {got}; needs {need}"
    return CheckResult(not off, "\n".join([head, *off]))


# --------------------------------------------------------------------------- JSON


def _json(draft: str, arg: str, base_dir: Path) -> CheckResult:
    instance, problem = parse_json(fenced_block(draft, ("json",)).strip(), "the draft")
    if problem:
        return CheckResult(False, problem)
    arg = arg.strip()
    if not arg:
        return CheckResult(True, "the draft is valid JSON")
    source, label = arg, "the schema"
    if not arg.startswith("{"):
        read, problem = read_check_file(arg, base_dir, "schema file")
        if read is None:
            return CheckResult(False, problem, error=True)
        source, label = read, f"the schema file {arg}"
    schema, problem = parse_json(source, label)
    if problem:
        return CheckResult(False, f"ERROR: {problem}", error=True)
    # Validation runs in a child interpreter: a schema's `pattern` is a regular
    # expression, and Python's re cannot be interrupted if it backtracks forever.
    try:
        outcome, failure = run_json_job(
            _SCHEMA_SCRIPT,
            {"schema": schema, "instance": instance},
            timeout_s=_SCHEMA_TIMEOUT_S,
            site_packages=True,
        )
    except subprocess.TimeoutExpired:
        return CheckResult(
            False,
            f"TIMEOUT: schema validation ran for more than {_SCHEMA_TIMEOUT_S:g}s",
            error=True,
        )
    if outcome is None:
        return CheckResult(False, f"ERROR: schema validation failed: {failure}", error=True)
    if "schema_error" in outcome:
        return CheckResult(
            False,
            f"ERROR: {label} is not a valid JSON Schema: {outcome['schema_error']}",
            error=True,
        )
    if not outcome["errors"]:
        return CheckResult(True, "the draft is valid JSON and matches the schema")
    lines = [f"the draft does not match the schema ({outcome['count']} error(s)):"]
    lines.extend(f"at {where}: {message}" for where, message in outcome["errors"])
    return CheckResult(False, "\n".join(lines))


# --------------------------------------------------------------------------- pytest


def _pytest(draft: str, arg: str, base_dir: Path) -> CheckResult:
    arg = arg.strip()
    if is_test_path(arg):
        tests, problem = read_check_file(arg, base_dir, "test file")
        if tests is None:
            return CheckResult(False, problem, error=True)
    else:
        tests = f"from {MODULE_NAME} import *\n\n\n{inline_tests(arg)}"
    result = run_pytest(fenced_block(draft, ("python", "py")), tests)
    sandbox = result.sandbox
    # A sandbox that would not start, or a suite with no tests, is the check's fault,
    # not the draft's; a timeout or a crash of the draft's code is the draft's.
    broken = result.status == "ERROR" and (
        (sandbox is None and not result.text.startswith("ERROR: no code given"))
        or (sandbox is not None and sandbox.error is not None and sandbox.returncode in (None, 97))
        or "no tests were collected" in result.text
    )
    return CheckResult(result.status == "PASSED", result.text, error=broken)


# --------------------------------------------------------------------------- registry


_RUNNERS: dict[str, Callable[[str, str, Path], CheckResult]] = {
    **{name: _count_check(name) for name in COUNT_CHECKS},
    "regex": _regex_check(present=True),
    "no-regex": _regex_check(present=False),
    "syllables": _syllables,
    "json": _json,
    "pytest": _pytest,
}
"""How each built-in check runs; its name and argument rules live in `check_registry`."""


def _runner(name: str) -> Callable[[str, str, Path], CheckResult] | None:
    if name in _RUNNERS:
        return _RUNNERS[name]
    fn = custom_check(name)
    if fn is None:
        return None
    return lambda draft, arg, _base_dir: fn(draft, arg)


def run_check(
    name: str, arg: str, draft: str, *, base_dir: str | Path | None = None
) -> CheckResult:
    """Run one check against a draft; never raises for a problem of the check or the draft.

    Whatever a check raises, `SystemExit` and `KeyboardInterrupt` included, becomes an
    `error` result; only LangGraph's `GraphBubbleUp` (the loop's own interrupt) passes.

    Examples:
        >>> run_check("no-regex", r"\\$\\d", "It costs $5.").passed
        False
    """
    run = _runner(name)
    if run is None:
        return CheckResult(False, f"ERROR: unknown check {name!r}", error=True)
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    try:
        result = run(draft if isinstance(draft, str) else str(draft), arg, base)
    except GraphBubbleUp:
        raise  # the agent loop's own stop (an interrupt, a command to a parent graph)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt from a check too
        return CheckResult(
            False, _clip(f"ERROR: check {name!r} raised {type(exc).__name__}: {exc}"), error=True
        )
    if not isinstance(result, CheckResult):
        return CheckResult(
            False,
            f"ERROR: check {name!r} returned {type(result).__name__}, not a CheckResult",
            error=True,
        )
    if result.error and result.passed:
        result = CheckResult(False, result.output, error=True)
    return CheckResult(result.passed, _clip(str(result.output)), result.error)


def verdict_from_check(criterion: CriterionSpec, result: CheckResult) -> CriterionVerdict:
    """The stored verdict for a checked criterion; a penalty passes when its check does not hold.

    Examples:
        >>> from rubric_core.rubric import parse_criteria
        >>> [penalty] = parse_criteria("- [-5] Invents a price {regex: \\\\$\\\\d}")
        >>> verdict_from_check(penalty, CheckResult(True, "MATCH: at 9: '$5'"))
        {'name': 'Invents a price', 'passed': False, 'checked_by': 'code', 'evidence': "MATCH: at 9: '$5'", 'gap': "MATCH: at 9: '$5'"}
    """
    passed = False if result.error else result.passed != (criterion.weight < 0)
    verdict: CriterionVerdict = {
        "name": criterion.name,
        "passed": passed,
        "checked_by": "code",
        "evidence": result.output,
    }
    if not passed:
        verdict["gap"] = result.output or f"the check {criterion.check} did not hold"
    if result.error:
        verdict["check_error"] = True
    return verdict


def run_checks(
    criteria: Iterable[CriterionSpec], draft: str, *, base_dir: str | Path | None = None
) -> dict[str, CriterionVerdict]:
    """Verdicts for every criterion that has a check, keyed by name, in rubric order.

    Criteria without a check are left to the judge and are not in the result.

    Args:
        criteria: From `parse_criteria`.
        draft: The agent's answer the pass judges.
        base_dir: What relative test and schema paths are resolved against
            (the working directory by default).

    Examples:
        >>> from rubric_core.rubric import parse_criteria
        >>> criteria = parse_criteria("- [2] Exactly two lines {lines == 2}\\n- Mentions rain")
        >>> run_checks(criteria, "rain falls\\non the roof")
        {'Exactly two lines': {'name': 'Exactly two lines', 'passed': True, 'checked_by': 'code', 'evidence': '2 lines; needs exactly 2'}}
    """
    verdicts: dict[str, CriterionVerdict] = {}
    for criterion in criteria:
        if criterion.check is None:
            continue
        result = run_check(criterion.check.name, criterion.check.arg, draft, base_dir=base_dir)
        verdicts[criterion.name] = verdict_from_check(criterion, result)
    return verdicts


async def arun_checks(
    criteria: Iterable[CriterionSpec], draft: str, *, base_dir: str | Path | None = None
) -> dict[str, CriterionVerdict]:
    """`run_checks` off the event loop (checks start subprocesses and may wait on them)."""
    return await asyncio.to_thread(run_checks, list(criteria), draft, base_dir=base_dir)


__all__ = [
    "BUILTIN_CHECKS",
    "CheckFn",
    "CheckResult",
    "arun_checks",
    "check_names",
    "check_problem",
    "register_check",
    "run_check",
    "run_checks",
    "unregister_check",
    "verdict_from_check",
]
