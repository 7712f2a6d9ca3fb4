"""Which code checks a rubric may name, and whether an argument is acceptable to one.

The parser (`rubric_core.rubric`) asks this module whether `{lines == 3}` is usable;
the checks themselves run in `rubric_core.tools.checks`, a layer above, which reads the
same registry. Keeping the names and the argument rules here lets imports point down:
the rubric layer never needs the tools that run drafts in subprocesses and sandboxes.

Examples:
    >>> check_problem("lines", "== 3") is None
    True
    >>> check_problem("words", "lots")
    "check 'words': cannot read 'lots' as a count; write e.g. `<= 150`, `== 3` or `100..150`"
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rubric_core.errors import InputError

_CHECK_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
_COMPARISON_RE = re.compile(r"^(==|=|!=|<=|>=|<|>)\s*(\d{1,9})$")
_RANGE_RE = re.compile(r"^(\d{1,9})\s*\.\.\s*(\d{1,9})$")
_SYLLABLE_PATTERN_RE = re.compile(r"^\d{1,2}(?:\s*[-/ ]\s*\d{1,2}){0,49}$")

MAX_JSON_CHARS = 200_000
"""Longest JSON document (draft or schema file) a JSON check reads."""

COUNT_CHECKS: tuple[str, ...] = ("words", "lines", "chars", "sentences", "paragraphs")
"""The counting checks, by the name a rubric uses."""


@dataclass(frozen=True)
class CheckResult:
    """What a check found: whether it holds, and its own output (evidence, or the gap)."""

    passed: bool
    """Whether the check holds for the draft (for a penalty: whether the thing is there)."""

    output: str
    """What the check saw, in a sentence or a few lines; the gap when the criterion fails."""

    error: bool = False
    """The check could not decide (a missing file, a broken schema, a sandbox that would
    not start, a pattern that ran too long); `passed` is then False."""


CheckFn = Callable[[str, str], CheckResult]
"""A custom check: `fn(draft, arg) -> CheckResult`."""


@dataclass(frozen=True)
class _Custom:
    fn: CheckFn
    validate: Callable[[str], object] | None


_CUSTOM: dict[str, _Custom] = {}


# --------------------------------------------------------------------------- argument rules


def comparison(arg: str) -> tuple[str, int, int]:
    """`("<=", 150, 150)` for `<= 150`, `("..", 100, 150)` for `100..150`.

    Raises:
        ValueError: Saying how to write a count.
    """
    arg = arg.strip()
    if match := _COMPARISON_RE.match(arg):
        number = int(match.group(2))
        return match.group(1), number, number
    if match := _RANGE_RE.match(arg):
        low, high = int(match.group(1)), int(match.group(2))
        if low > high:
            msg = f"the range {arg} is empty; write the smaller number first"
            raise ValueError(msg)
        return "..", low, high
    msg = f"cannot read {arg!r} as a count; write e.g. `<= 150`, `== 3` or `100..150`"
    raise ValueError(msg)


def validate_pattern(arg: str) -> None:
    """Raise `ValueError` unless `arg` is a usable regular expression (at most 500 chars)."""
    if not arg:
        msg = "the regular expression is empty"
        raise ValueError(msg)
    if len(arg) > 500:
        msg = f"the regular expression is {len(arg)} characters; the limit is 500"
        raise ValueError(msg)
    try:
        re.compile(arg)
    except re.error as exc:
        msg = f"invalid regular expression {arg!r}: {exc}"
        raise ValueError(msg) from None


def syllable_pattern(arg: str) -> list[int]:
    """`[5, 7, 5]` for `5-7-5` (`/` or spaces separate too).

    Examples:
        >>> syllable_pattern("5/7/5")
        [5, 7, 5]
    """
    if not _SYLLABLE_PATTERN_RE.match(arg.strip()):
        msg = f"cannot read {arg!r} as a syllable pattern; write e.g. `5-7-5`"
        raise ValueError(msg)
    return [int(n) for n in re.findall(r"\d+", arg)]


def parse_json(text: str, what: str) -> tuple[Any, str]:
    """(value, "") or (None, what went wrong), for at most `MAX_JSON_CHARS` characters."""
    if len(text) > MAX_JSON_CHARS:
        return None, f"{what} is {len(text):,} characters; the limit is {MAX_JSON_CHARS:,}"
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as exc:
        return None, f"{what} is not valid JSON: {exc}"
    except RecursionError:
        return None, f"{what} nests too deeply to read"


def validate_json_arg(arg: str) -> None:
    """Nothing, a path ending in `.json`, or an inline JSON Schema that is valid."""
    arg = arg.strip()
    if not arg.startswith("{"):
        if arg and not arg.endswith(".json"):
            msg = f"{arg!r} is neither an inline JSON Schema ({{...}}) nor a path ending in .json"
            raise ValueError(msg)
        return
    schema, problem = parse_json(arg, "the inline schema")
    if problem:
        raise ValueError(problem)
    from jsonschema import SchemaError, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        msg = f"the inline schema is not a valid JSON Schema: {exc.message}"
        raise ValueError(msg) from None


def is_test_path(arg: str) -> bool:
    """Whether a pytest check's argument names a test file rather than inline statements."""
    return arg.endswith(".py") and not re.search(r"\s", arg)


def inline_tests(body: str) -> str:
    """The test module an inline pytest check's statements become."""
    return f"def test_rubric_check():\n    {body}\n"


def validate_pytest_arg(arg: str) -> None:
    """A test file path, or statements that compile as the body of one test."""
    arg = arg.strip()
    if not arg:
        msg = "name a test file (tests/test_x.py) or give the statements of one test"
        raise ValueError(msg)
    if not is_test_path(arg):
        try:
            compile(inline_tests(arg), "<rubric check>", "exec")
        except SyntaxError as exc:
            msg = f"the inline test is not valid Python: {exc.msg}"
            raise ValueError(msg) from None


_BUILTIN_RULES: dict[str, Callable[[str], object] | None] = {
    **dict.fromkeys(COUNT_CHECKS, comparison),
    "regex": validate_pattern,
    "no-regex": validate_pattern,
    "syllables": syllable_pattern,
    "json": validate_json_arg,
    "pytest": validate_pytest_arg,
}

BUILTIN_CHECKS: tuple[str, ...] = tuple(_BUILTIN_RULES)
"""The checks that ship with Rubric Studio, by the name a rubric uses."""


# --------------------------------------------------------------------------- registry


def register_check(
    name: str, fn: CheckFn, *, validate: Callable[[str], object] | None = None
) -> None:
    """Make `{name: arg}` usable in rubrics, decided by `fn(draft, arg)`.

    Registering a custom name again replaces it. The registry is per process: a
    worker process or a Ray task must register its checks too.

    Args:
        name: Lower-case letters, digits, `_` and `-`, starting with a letter; not a
            built-in's name.
        fn: Returns a `CheckResult`; an exception it raises (`SystemExit` and
            `KeyboardInterrupt` too) becomes an `error` result.
            It runs in-process, so it must bound its own time.
        validate: Called with the argument when a rubric is parsed; a `ValueError` it
            raises becomes a `RubricError` naming the line.

    Raises:
        InputError: If the name is malformed or a built-in's, or `fn` is not callable.

    Examples:
        >>> register_check("title-case", lambda draft, arg: CheckResult(draft.istitle(), draft))
        >>> "title-case" in check_names()
        True
        >>> unregister_check("title-case")
    """
    if not isinstance(name, str) or not _CHECK_NAME_RE.match(name):
        msg = (
            f"check name must be lower-case letters, digits, '_' or '-', starting with a "
            f"letter (at most 40), got {name!r}"
        )
        raise InputError(msg)
    if name in _BUILTIN_RULES:
        msg = f"check name {name!r} is a built-in check; pick another name"
        raise InputError(msg)
    if not callable(fn):
        msg = f"fn must be callable as fn(draft, arg), got {type(fn).__name__}"
        raise InputError(msg)
    if validate is not None and not callable(validate):
        msg = f"validate must be callable as validate(arg), got {type(validate).__name__}"
        raise InputError(msg)
    _CUSTOM[name] = _Custom(fn=fn, validate=validate)
    _CHANGES[0] += 1


def unregister_check(name: str) -> None:
    """Forget a custom check; a built-in one, or an unknown name, is left alone."""
    _CUSTOM.pop(name, None)
    _CHANGES[0] += 1


_CHANGES = [0]
"""How many times the custom checks changed in this process (`registry_version`)."""


def registry_version() -> int:
    """A number that changes whenever a custom check is registered or unregistered, so
    that what was parsed against the registry before (`rubric.parse_criteria`'s cache)
    is parsed again."""
    return _CHANGES[0]


def custom_check(name: str) -> CheckFn | None:
    """The function of a registered custom check, or `None`."""
    custom = _CUSTOM.get(name)
    return custom.fn if custom is not None else None


def check_names() -> list[str]:
    """Every check a rubric may use now: the built-ins, then the custom ones by name."""
    return [*BUILTIN_CHECKS, *sorted(_CUSTOM)]


def check_problem(name: str, arg: str) -> str | None:
    """Why `{name arg}` cannot be used, or `None` if it can (no draft needed).

    Examples:
        >>> check_problem("line", "== 3")
        "unknown check 'line'; the checks are: words, lines, chars, sentences, paragraphs, regex, no-regex, syllables, json, pytest"
    """
    if name in _BUILTIN_RULES:
        validate = _BUILTIN_RULES[name]
    elif name in _CUSTOM:
        validate = _CUSTOM[name].validate
    else:
        return f"unknown check {name!r}; the checks are: {', '.join(check_names())}"
    if validate is not None:
        try:
            validate(arg)
        except ValueError as exc:
            return f"check {name!r}: {exc}"
    return None


__all__ = [
    "BUILTIN_CHECKS",
    "COUNT_CHECKS",
    "CheckFn",
    "CheckResult",
    "check_names",
    "check_problem",
    "custom_check",
    "register_check",
    "unregister_check",
]
