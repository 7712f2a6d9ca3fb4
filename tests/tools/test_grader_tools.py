"""Grader tools: the registry, the text tools and run_test_suite on ordinary code."""

from __future__ import annotations

import pytest
from langchain_core.tools import BaseTool

from rubric_core.providers import load_scenario
from rubric_core.tools import (
    TOOL_DESCRIPTIONS,
    TOOL_NAMES,
    UnknownToolError,
    count_syllables,
    get_tools,
    make_run_test_suite,
    regex_check,
    run_pytest,
    run_test_suite,
    syllable_count,
    text_stats,
)

# --------------------------------------------------------------------------- registry


def test_get_tools_returns_tools_in_order_without_duplicates():
    tools = get_tools(["text_stats", "run_test_suite", "text_stats"])
    assert [t.name for t in tools] == ["text_stats", "run_test_suite"]
    assert all(isinstance(t, BaseTool) for t in tools)
    assert get_tools([]) == []


def test_get_tools_unknown_names_each_and_lists_available():
    with pytest.raises(UnknownToolError) as info:
        get_tools(["count_syllables", "web_search", "run_tests"])
    message = str(info.value)
    assert "'web_search'" in message
    assert "'run_tests'" in message
    assert "'count_syllables'" not in message.split("available")[0]
    for name in TOOL_NAMES:
        assert name in message
    assert info.value.unknown == ["web_search", "run_tests"]


def test_tool_names_and_descriptions_agree():
    assert set(TOOL_NAMES) == set(TOOL_DESCRIPTIONS)
    assert {"run_test_suite", "count_syllables", "text_stats", "regex_check"} <= set(TOOL_NAMES)
    for tool in get_tools(TOOL_NAMES):
        assert tool.description


# --------------------------------------------------------------------------- syllables


def test_count_syllables_reports_each_line_and_the_pattern():
    result = count_syllables.invoke(
        {"text": "an old silent pond\na frog jumps into the pond\nsplash! silence again\n"}
    )
    assert "line 1: 5 syllables" in result
    assert "line 2: 7 syllables" in result
    assert "lines: 3" in result
    assert result.endswith("pattern: 5/7/5")


def test_count_syllables_empty_text_is_a_clear_result():
    assert count_syllables.invoke({"text": "  \n "}).startswith("ERROR: the text is empty")


def test_syllable_heuristic_is_right_on_common_words():
    words = {
        "cat": 1, "stone": 1, "leaves": 1, "rain": 1, "make": 1, "jumped": 1, "the": 1,
        "water": 2, "maple": 2, "little": 2, "silent": 2, "autumn": 2, "wanted": 2,
        "boxes": 2, "puddles": 2, "table": 2, "people": 2, "river": 2, "morning": 2,
        "beautiful": 3, "syllable": 3, "banana": 3, "together": 3, "library": 3,
        "everything": 4, "information": 4, "haiku": 2, "quiet": 2, "poem": 2, "fire": 1,
    }  # fmt: skip
    wrong = {w: syllable_count(w) for w, n in words.items() if syllable_count(w) != n}
    assert len(wrong) <= 2, wrong


# --------------------------------------------------------------------------- text stats


def test_text_stats_counts():
    result = text_stats.invoke({"text": "Hello there, world. How are you?\n\nFine!"})
    stats = dict(line.split(": ") for line in result.splitlines())
    assert stats["words"] == "7"
    assert stats["sentences"] == "3"
    assert stats["lines"] == "2"
    assert stats["paragraphs"] == "2"
    assert stats["characters"] == str(len("Hello there, world. How are you?\n\nFine!"))


# --------------------------------------------------------------------------- regex


def test_regex_check_match_and_no_match():
    found = regex_check.invoke({"pattern": r"(?m)^## (\w+)$", "text": "## Summary\nx\n## Impact"})
    assert found.startswith("MATCH")
    assert "'## Impact'" in found
    assert regex_check.invoke({"pattern": "zebra", "text": "horse"}).startswith("NO MATCH")


def test_regex_check_bad_pattern_is_a_result_not_a_crash():
    result = regex_check.invoke({"pattern": "([a-z", "text": "abc"})
    assert result.startswith("ERROR: invalid regular expression")
    assert regex_check.invoke({"pattern": "a" * 600, "text": "a"}).startswith("ERROR")
    assert regex_check.invoke({"pattern": "", "text": "a"}).startswith("ERROR")


def test_regex_check_catastrophic_pattern_times_out():
    result = regex_check.invoke({"pattern": r"^(a+)+$", "text": "a" * 40 + "!"})
    assert result.startswith("TIMEOUT")
    assert "backtracking" in result


# --------------------------------------------------------------------------- run_test_suite


def test_run_test_suite_passes_and_fails_with_the_error_line():
    scenario = load_scenario("find_duplicates")
    code_block = scenario["agent_turns"][0]["content"].split("```python\n")[1].split("```")[0]
    failing = run_test_suite.invoke({"code": code_block, "tests": scenario["tests"]})
    assert failing.startswith("FAILED: 1 failed, 3 passed")
    assert "test_unhashable - TypeError: unhashable type: 'list'" in failing
    fixed = scenario["agent_turns"][1]["content"].split("```python\n")[1].split("```")[0]
    assert run_test_suite.invoke({"code": fixed, "tests": scenario["tests"]}) == (
        "PASSED: 4 passed"
    )


def test_run_test_suite_imports_solution_when_tests_do_not():
    result = run_pytest(
        "def add(a, b):\n    return a + b\n", "def test_add():\n    assert add(2, 2) == 4\n"
    )
    assert result.status == "PASSED"
    assert result.counts == {"passed": 1}


def test_run_test_suite_syntax_error_is_reported():
    result = run_pytest("def broken(:\n    pass\n", "def test_x():\n    assert broken\n")
    assert result.status == "ERROR"
    assert "SyntaxError" in result.text


def test_run_test_suite_no_tests_and_empty_inputs():
    assert run_pytest("x = 1", "x = 2  # solution").text.startswith(
        "ERROR: no tests were collected"
    )
    assert run_pytest("", "def test_a(): pass").text.startswith("ERROR: no code given")
    assert run_pytest("x = 1", "   ").text.startswith("ERROR: no tests given")


def test_make_run_test_suite_binds_the_tests():
    tool = make_run_test_suite(
        "from solution import double\n\ndef test_double():\n    assert double(3) == 6\n",
        name="check_double",
    )
    assert tool.name == "check_double"
    assert set(tool.args) == {"code"}
    assert tool.invoke({"code": "def double(x):\n    return 2 * x\n"}) == "PASSED: 1 passed"
    assert tool.invoke({"code": "def double(x):\n    return x\n"}).startswith("FAILED: 1 failed")
    with pytest.raises(ValueError, match="tests must be"):
        make_run_test_suite("  ")


def test_run_test_suite_says_when_pytest_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh `pip install -r requirements.txt` once left pytest out; the grader then
    # read "FAILED: no tests ran" and asked the agent to fix code that was never run.
    from rubric_core.tools import test_runner
    from rubric_core.tools.sandbox import SandboxResult

    def no_pytest(*args: object, **kwargs: object) -> SandboxResult:
        output = "/venv/bin/python: No module named pytest\n"
        return SandboxResult(returncode=1, output=output, output_bytes=len(output))

    monkeypatch.setattr(test_runner, "run_sandboxed", no_pytest)
    report = test_runner.run_test_suite.invoke({"code": "x = 1", "tests": "def test_x(): pass"})
    assert report.startswith("ERROR: pytest is not installed")
    assert "requirements.txt" in report
