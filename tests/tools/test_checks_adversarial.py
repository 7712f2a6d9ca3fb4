"""Code checks attacked: huge drafts, checks that exit, files outside the check directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.errors import GraphInterrupt

from rubric_core.rubric import parse_criteria
from rubric_core.tools.checks import (
    CheckResult,
    run_check,
    run_checks,
)
from rubric_core.tools.fences import fenced_block, fenced_blocks
from rubric_core.workbench.datasets import MAX_OUTPUT_CHARS, DatasetError, load_graded_upload

_OUTER_BOUND_S = 120
"""Not a timing assertion: a bound so that a quadratic check fails the test instead of
holding the run for minutes (the quadratic ones took 94 s and 177 s; linear ones take
milliseconds). The work runs in a child process: a regular expression holds the GIL, so
a thread's join could not even time out."""

_ROOT = Path(__file__).resolve().parents[2]


def _finishes(code: str) -> object:
    """What `code` (Python, ending in an expression) evaluates to, run in a child
    process; the test fails if it is still running after `_OUTER_BOUND_S`."""
    *body, last = code.strip().splitlines()
    script = "\n".join([*body, f"import json; print(json.dumps({last}))"])
    env = {**os.environ, "PYTHONPATH": str(_ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-"],
            input=script,
            capture_output=True,
            text=True,
            timeout=_OUTER_BOUND_S,
            env=env,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {_OUTER_BOUND_S} s")
    return json.loads(done.stdout.splitlines()[-1])


# --------------------------------------------------------------------------- item 9


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
def test_a_check_that_exits_or_interrupts_becomes_an_error_result(custom_check, raised):
    def leave(draft: str, arg: str) -> CheckResult:
        raise raised

    custom_check("leave", leave)
    criteria = parse_criteria("- Leaves {leave}\n- Two lines {lines == 2}")
    verdicts = run_checks(criteria, "a\nb")
    assert verdicts["Leaves"]["passed"] is False
    assert verdicts["Leaves"]["check_error"] is True
    assert verdicts["Leaves"]["gap"].startswith(
        f"ERROR: check 'leave' raised {type(raised).__name__}"
    )
    assert verdicts["Two lines"]["passed"] is True  # the other checks still ran


def test_the_loops_own_interrupt_still_passes_through_a_check(custom_check):
    def pause(draft: str, arg: str) -> CheckResult:
        raise GraphInterrupt(())

    custom_check("pause", pause)
    with pytest.raises(GraphInterrupt):
        run_check("pause", "", "x")


# --------------------------------------------------------------------------- item 10


def test_a_check_file_outside_the_check_directory_is_refused_unread(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"type": "hunter2-very-secret"}), encoding="utf-8")
    check_dir = tmp_path / "project" / "checks"
    check_dir.mkdir(parents=True)
    (check_dir / "link.json").symlink_to(secret)
    for reference in ("../../secret.json", str(secret), "link.json", "sub/../../../secret.json"):
        result = run_check("json", reference, "{}", base_dir=check_dir)
        assert result.error, reference
        assert "outside the check directory" in result.output, reference
        assert "hunter2" not in result.output
    for reference in ("../secret.py", "/etc/hostname.py"):
        result = run_check("pytest", reference, "x = 1", base_dir=check_dir)
        assert result.error and "outside the check directory" in result.output


def test_a_check_files_content_never_appears_in_its_error(tmp_path):
    (tmp_path / "bad_schema.json").write_text(
        json.dumps({"type": "hunter2-very-secret"}), encoding="utf-8"
    )
    (tmp_path / "broken.json").write_text('{"key": "hunter2-very-secret",', encoding="utf-8")
    (tmp_path / "latin1.json").write_bytes('{"k": "hunter2 caf\xe9"}'.encode("latin-1"))
    for name in ("bad_schema.json", "broken.json", "latin1.json"):
        result = run_check("json", name, "{}", base_dir=tmp_path)
        assert result.error, name
        assert result.output.startswith("ERROR:"), name
        assert name in result.output
        assert "hunter2" not in result.output, result.output
    # Inside the directory, a good schema file still works.
    (tmp_path / "ok.json").write_text('{"type": "object"}', encoding="utf-8")
    assert run_check("json", "ok.json", "{}", base_dir=tmp_path).passed


# --------------------------------------------------------------------------- item 7


@pytest.mark.parametrize(
    ("check", "draft", "output"),
    [
        ("words <= 150", " " * 120_000, "0 words; needs at most 150"),
        ("sentences <= 150", " " * 120_000, "0 sentences; needs at most 150"),
        ("sentences <= 150", ", " * 100_000 + "end", "1 sentence; needs at most 150"),
        ("paragraphs <= 150", "\n " * 100_000, "0 paragraphs; needs at most 150"),
        ("words <= 150", "a" + "-" * 200_000, "1 word; needs at most 150"),
        ("lines <= 150", " \n" * 100_000, "0 lines; needs at most 150"),
    ],
)
def test_count_checks_finish_on_huge_adversarial_drafts(check, draft, output):
    [criterion] = parse_criteria(f"- Short {{{check}}}")
    name, arg = criterion.check.name, criterion.check.arg
    code = f"""
from rubric_core.tools.checks import run_check
run_check({name!r}, {arg!r}, {draft!r}).output
"""
    assert _finishes(code) == output


def test_json_check_finishes_on_thousands_of_unclosed_fences():
    draft = "```json\n" * 24_000
    code = f"""
from rubric_core.tools.checks import run_check
result = run_check("json", "", {draft!r})
[result.passed, result.output]
"""
    passed, output = _finishes(code)
    assert passed is False
    assert "the draft is not valid JSON" in output
    # Only a bare fence closes: the first opening fence's block runs to it.
    closed = "```json\n" * 24_000 + "```\n"
    assert fenced_blocks(closed) == [("json", "```json\n" * 23_999)]


def test_fence_lookup_finds_the_blocks_a_reader_sees():
    draft = 'Intro\n```json\n{"a": 1}\n```\ntext\n  ```python extra\nx = 1\n```  \n```\nplain\n```'
    assert fenced_blocks(draft) == [("json", '{"a": 1}\n'), ("python", "x = 1\n"), ("", "plain\n")]
    assert fenced_block(draft, ("json",)) == '{"a": 1}\n'
    assert fenced_block(draft, ("py", "python")) == "x = 1\n"
    assert fenced_block("```json\nnever closed", ("json",)) == "```json\nnever closed"
    assert fenced_block("```js\nx\n```", ("json",)) == "```js\nx\n```"  # nothing untagged


def test_grade_only_outputs_have_a_size_limit():
    row = json.dumps({"input": "q", "output": "x" * (MAX_OUTPUT_CHARS + 1)})
    data = (json.dumps({"input": "q", "output": "fine"}) + "\n" + row + "\n").encode()
    with pytest.raises(
        DatasetError,
        match=r"^g\.jsonl: line 2: output is 200,001 characters; the limit is 200,000$",
    ):
        load_graded_upload("g.jsonl", data)
    fits = json.dumps({"input": "q", "output": "x" * MAX_OUTPUT_CHARS}).encode()
    assert len(load_graded_upload("g.jsonl", fits)[0]["output"]) == MAX_OUTPUT_CHARS


def test_an_output_past_the_limit_is_refused_before_anything_is_stored(store):
    from rubric_core.batch import Grader
    from rubric_core.workbench.grade import GradingError, grade_by_person, grade_one

    version = store.rubrics.save_version("essay", "- has a title")
    too_long = "x" * (MAX_OUTPUT_CHARS + 1)
    with pytest.raises(GradingError, match=r"^output is 200,001 characters; the limit is 200,000$"):
        grade_by_person(store, version["id"], "q", too_long, {"has a title": True}, reviewer="ana")
    with pytest.raises(GradingError, match=r"^output is 200,001 characters"):
        grade_one(store, version["id"], "q", too_long, Grader("replay:essay"))
    assert store.runs.find() == []
