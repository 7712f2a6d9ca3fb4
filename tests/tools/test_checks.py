"""Code checks: each built-in, custom checks, verdicts for penalties, and their bounds."""

from __future__ import annotations

import json

import pytest

from rubric_core.rubric import RubricError, parse_criteria
from rubric_core.tools import checks
from rubric_core.tools.checks import (
    BUILTIN_CHECKS,
    CheckResult,
    arun_checks,
    check_names,
    register_check,
    run_check,
    run_checks,
    unregister_check,
)

_TEXT = "One. Two words here!\n\nSecond para line.\nAnother line"
# By hand: 9 words, 52 characters (20 + 2 + 17 + 1 + 12), 3 non-empty lines,
# 4 sentences (the last has no full stop), 2 paragraphs.

_HAIKU = "an old silent pond\na frog jumps into the pond\nsplash! silence again"


@pytest.mark.parametrize(
    ("name", "arg", "passed", "output"),
    [
        ("words", "== 9", True, "9 words; needs exactly 9"),
        ("words", "= 9", True, "9 words; needs exactly 9"),
        ("words", "<= 8", False, "9 words; needs at most 8"),
        ("words", "> 9", False, "9 words; needs more than 9"),
        ("words", "9..12", True, "9 words; needs between 9 and 12"),
        ("words", "10..12", False, "9 words; needs between 10 and 12"),
        ("chars", "< 53", True, "52 characters; needs fewer than 53"),
        ("chars", "< 52", False, "52 characters; needs fewer than 52"),
        ("lines", "== 3", True, "3 lines; needs exactly 3"),
        ("lines", "!= 3", False, "3 lines; needs anything but 3"),
        ("sentences", ">= 4", True, "4 sentences; needs at least 4"),
        ("paragraphs", "== 1", False, "2 paragraphs; needs exactly 1"),
    ],
)
def test_count_checks_compare_hand_counted_text(name, arg, passed, output):
    assert run_check(name, arg, _TEXT) == CheckResult(passed, output)


def test_count_check_uses_the_singular_for_one():
    assert run_check("lines", "== 3", "just one").output == "1 line; needs exactly 3"


def test_regex_checks_present_and_absent():
    found = run_check("regex", r"(?m)^## Summary$", "# Report\n## Summary\ntext")
    assert found.passed and not found.error
    assert found.output.startswith("MATCH: '(?m)^## Summary$' matches 1 time(s)")
    missing = run_check("regex", r"(?m)^## Summary$", "# Report")
    assert not missing.passed and missing.output.startswith("NO MATCH")
    assert run_check("no-regex", r"\$\d", "It is free.").passed
    priced = run_check("no-regex", r"\$\d", "It costs $5.")
    assert not priced.passed and "at 9: '$5'" in priced.output


def test_regex_check_that_runs_away_is_an_error_not_a_verdict():
    result = run_check("regex", r"(a+)+$", "a" * 40 + "b")
    assert result.error and not result.passed
    assert result.output.startswith("TIMEOUT")


def test_syllable_check_reads_each_line():
    assert run_check("syllables", "5-7-5", _HAIKU) == CheckResult(
        True, "syllables 5/7/5; needs 5/7/5"
    )
    assert run_check("syllables", "5/7/5", _HAIKU).passed
    assert run_check("syllables", "5 7 5", _HAIKU).passed
    wrong = run_check("syllables", "5-7-5", _HAIKU.replace("the pond", "the water pond"))
    assert wrong == CheckResult(
        False,
        "syllables 5/9/5; needs 5/7/5\nline 2 has 9, needs 7: a frog jumps into the water pond",
    )
    short = run_check("syllables", "5-7-5", "an old silent pond")
    assert short == CheckResult(False, "1 non-empty lines with syllables 5; needs 3 lines, 5/7/5")


def test_json_check_valid_and_invalid():
    assert run_check("json", "", '{"name": "Ada"}') == CheckResult(True, "the draft is valid JSON")
    fenced = 'Here it is:\n\n```json\n{"name": "Ada"}\n```\nDone.'
    assert run_check("json", "", fenced).passed
    bad = run_check("json", "", "{'name': 'Ada'}")
    assert not bad.passed and not bad.error
    assert bad.output.startswith("the draft is not valid JSON: Expecting property name")


def test_json_check_against_an_inline_schema():
    schema = json.dumps(
        {"type": "object", "required": ["name", "age"], "properties": {"age": {"type": "integer"}}}
    )
    good = run_check("json", schema, '{"name": "Ada", "age": 36}')
    assert good == CheckResult(True, "the draft is valid JSON and matches the schema")
    bad = run_check("json", schema, '{"age": "old"}')
    assert bad == CheckResult(
        False,
        "the draft does not match the schema (2 error(s)):\n"
        "at $: 'name' is a required property\n"
        "at $.age: 'old' is not of type 'integer'",
    )


def test_json_check_against_a_schema_file(tmp_path):
    (tmp_path / "person.json").write_text(json.dumps({"type": "array", "maxItems": 2}))
    assert run_check("json", "person.json", "[1, 2]", base_dir=tmp_path).passed
    three = run_check("json", "person.json", "[1, 2, 3]", base_dir=tmp_path)
    assert not three.passed and "at $: [1, 2, 3] is too long" in three.output
    missing = run_check("json", "absent.json", "[1]", base_dir=tmp_path)
    assert missing.error and not missing.passed
    assert missing.output.startswith("ERROR: cannot read the schema file absent.json")
    (tmp_path / "broken.json").write_text('{"type": 7}')
    broken = run_check("json", "broken.json", "[1]", base_dir=tmp_path)
    assert broken.error
    assert broken.output.startswith("ERROR: the schema file broken.json is not a valid JSON Schema")


def test_json_check_is_bounded():
    # 1 + 2 * 150,000 + 2 characters
    huge = run_check("json", "", "[" + "1," * 150_000 + "1]")
    assert (
        not huge.passed and huge.output == "the draft is 300,003 characters; the limit is 200,000"
    )
    deep = run_check("json", "", "[" * 50_000 + "]" * 50_000)
    assert not deep.passed and deep.output == "the draft nests too deeply to read"


def test_json_schema_pattern_that_runs_away_is_cut_off(monkeypatch):
    monkeypatch.setattr(checks, "_SCHEMA_TIMEOUT_S", 3.0)
    schema = json.dumps({"type": "string", "pattern": "^(a+)+$"})
    result = run_check("json", schema, json.dumps("a" * 40 + "b"))
    assert result == CheckResult(
        False, "TIMEOUT: schema validation ran for more than 3s", error=True
    )


_CODE = "Here:\n\n```python\ndef add(a, b):\n    return a + b\n```\n"


def test_pytest_check_with_inline_statements():
    passed = run_check("pytest", "assert add(1, 2) == 3; assert add(0, 0) == 0", _CODE)
    assert passed.passed and passed.output == "PASSED: 1 passed"
    failed = run_check("pytest", "assert add(1, 2) == 4", _CODE)
    assert not failed.passed and not failed.error
    assert failed.output.startswith("FAILED: 1 failed\nFAILED test_rubric_check - assert 3 == 4")


def test_pytest_check_with_a_test_file(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_add.py").write_text(
        "from solution import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_negative():\n    assert add(-1, -1) == -2\n"
    )
    assert run_check("pytest", "tests/test_add.py", _CODE, base_dir=tmp_path) == CheckResult(
        True, "PASSED: 2 passed"
    )
    missing = run_check("pytest", "tests/test_sub.py", _CODE, base_dir=tmp_path)
    assert missing.error and missing.output.startswith("ERROR: cannot read the test file")
    (tmp_path / "tests" / "test_empty.py").write_text("x = 1\n")
    empty = run_check("pytest", "tests/test_empty.py", _CODE, base_dir=tmp_path)
    assert empty.error and "no tests were collected" in empty.output


def test_pytest_check_on_a_draft_without_code_fails_the_draft():
    result = run_check("pytest", "assert add(1, 2) == 3", "   ")
    assert not result.passed and not result.error
    assert result.output.startswith("ERROR: no code given")


def test_run_checks_gives_code_verdicts_and_inverts_penalties():
    criteria = parse_criteria(
        "- [2] Exactly three lines {lines == 3}\n"
        "- Mentions rain\n"
        "- [-5] Invents a price {regex: \\$\\d}\n"
        "- [-1] Shouts {regex: !}\n"
        "- Short {words <= 3}"
    )
    # "rain\n" + "on the roof\n" + "costs " puts "$5" at offset 5 + 12 + 6 = 23; 6 words.
    verdicts = run_checks(criteria, "rain\non the roof\ncosts $5")
    assert verdicts == {
        "Exactly three lines": {
            "name": "Exactly three lines",
            "passed": True,
            "checked_by": "code",
            "evidence": "3 lines; needs exactly 3",
        },
        "Invents a price": {
            "name": "Invents a price",
            "passed": False,
            "checked_by": "code",
            "evidence": "MATCH: '\\\\$\\\\d' matches 1 time(s)\nat 23: '$5'",
            "gap": "MATCH: '\\\\$\\\\d' matches 1 time(s)\nat 23: '$5'",
        },
        "Shouts": {
            "name": "Shouts",
            "passed": True,
            "checked_by": "code",
            "evidence": "NO MATCH: '!' does not match the text",
        },
        "Short": {
            "name": "Short",
            "passed": False,
            "checked_by": "code",
            "evidence": "6 words; needs at most 3",
            "gap": "6 words; needs at most 3",
        },
    }
    assert list(verdicts) == ["Exactly three lines", "Invents a price", "Shouts", "Short"]


def test_check_errors_fail_the_criterion_and_say_so(tmp_path):
    criteria = parse_criteria("- Valid {json: missing.json}\n- [-3] Bad thing {json: missing.json}")
    verdicts = run_checks(criteria, "[1]", base_dir=tmp_path)
    for verdict in verdicts.values():
        assert verdict["passed"] is False
        assert verdict["check_error"] is True
        assert verdict["gap"].startswith("ERROR: cannot read the schema file missing.json")


async def test_arun_checks_matches_run_checks():
    criteria = parse_criteria("- Two lines {lines == 2}\n- Judge me")
    assert await arun_checks(criteria, "a\nb") == run_checks(criteria, "a\nb")


def test_custom_check_is_usable_in_rubrics(custom_check):
    def title_case(draft: str, arg: str) -> CheckResult:
        return CheckResult(draft.istitle(), f"title case: {draft.istitle()}")

    custom_check("title-case", title_case)
    assert check_names()[-1] == "title-case"
    [criterion] = parse_criteria("- [4] In title case {title-case}")
    assert run_checks([criterion], "An Old Pond")["In title case"]["passed"] is True
    assert run_checks([criterion], "an old pond")["In title case"]["gap"] == "title case: False"


def test_custom_check_validates_its_argument(custom_check):
    def validate(arg: str) -> None:
        if not arg.isdigit():
            msg = f"needs a number, got {arg!r}"
            raise ValueError(msg)

    custom_check(
        "digits", lambda draft, arg: CheckResult(len(draft) == int(arg), draft), validate=validate
    )
    assert parse_criteria("- Four long {digits: 4}")[0].check.arg == "4"
    with pytest.raises(
        RubricError,
        match=r"^line 2 \('- Four long \{digits: four\}'\): check 'digits': needs a number",
    ):
        parse_criteria("- ok\n- Four long {digits: four}")


def test_custom_check_faults_become_error_verdicts(custom_check):
    def boom(draft: str, arg: str) -> CheckResult:
        raise KeyError("missing")

    custom_check("boom", boom)
    custom_check("yes", lambda draft, arg: True)
    assert run_check("boom", "", "x") == CheckResult(
        False, "ERROR: check 'boom' raised KeyError: 'missing'", error=True
    )
    assert run_check("yes", "", "x") == CheckResult(
        False, "ERROR: check 'yes' returned bool, not a CheckResult", error=True
    )
    assert run_check("gone", "", "x").error


def test_register_check_rejects_bad_names_and_builtins():
    fn = lambda draft, arg: CheckResult(True, "")  # noqa: E731
    for name in ("", "Upper", "1st", "has space", "x" * 41):
        with pytest.raises(ValueError, match="check name must be lower-case"):
            register_check(name, fn)
    for name in BUILTIN_CHECKS:
        with pytest.raises(ValueError, match=f"check name '{name}' is a built-in check"):
            register_check(name, fn)
    with pytest.raises(ValueError, match="fn must be callable"):
        register_check("fine", "not a function")
    unregister_check("regex")
    assert "regex" in check_names()


def test_unknown_check_names_the_line_and_lists_the_checks():
    with pytest.raises(RubricError) as caught:
        parse_criteria("- a\n- b\n- Three lines {linez == 3}")
    message = str(caught.value)
    assert message.startswith("line 3 ('- Three lines {linez == 3}'): unknown check 'linez'")
    assert message.endswith(", ".join(check_names()))
