"""Rubric syntax: bullets and checkboxes, weights, penalties, code checks, HealthBench import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_core.providers import list_scenarios, load_scenario
from rubric_core.rubric import (
    MAX_WEIGHT,
    CheckSpec,
    CriterionSpec,
    RubricError,
    criteria_from_healthbench,
    parse_criteria,
    parse_rubric,
    tool_warnings,
    validate_criteria,
    validate_rubric,
)
from rubric_core.tools.checks import CheckResult, register_check, unregister_check


def _weights(text: str) -> list[tuple[str, int]]:
    return [(c.name, c.weight) for c in parse_criteria(text)]


def test_parse_rubric_keeps_every_existing_bullet_form():
    text = "\n".join(
        [
            "# Section",
            "- dash item",
            "* star item",
            "+ plus item",
            "• bullet item",
            "- [ ] open box",
            "- [x] ticked box",
            "- [X] upper tick",
            "- [] empty box",
            "[ ] bare open box",
            "[x] bare ticked box",
            "1. numbered",
            "2) paren numbered",
            "(3) wrapped number",
            "a) lettered",
            "plain line",
            "",
            "- DASH ITEM",
        ]
    )
    assert parse_rubric(text) == [
        "dash item",
        "star item",
        "plus item",
        "bullet item",
        "open box",
        "ticked box",
        "upper tick",
        "empty box",
        "bare open box",
        "bare ticked box",
        "numbered",
        "paren numbered",
        "wrapped number",
        "lettered",
        "plain line",
    ]
    assert all(c.weight == 1 and c.check is None for c in parse_criteria(text))


def test_parse_rubric_reads_every_shipped_scenario_as_before():
    for summary in list_scenarios():
        scenario = load_scenario(summary["name"])
        criteria = parse_rubric(scenario["rubric"])
        assert criteria, summary["name"]
        assert all("[" not in name[:1] for name in criteria)
        assert [c.name for c in parse_criteria(scenario["rubric"])] == criteria


def test_parse_criteria_reads_weights_and_penalties():
    text = "- [3] Cites the release date\n- Names the product\n- [-5] Invents a price\n1. [+2] Is short"
    assert parse_criteria(text) == [
        CriterionSpec("Cites the release date", 3),
        CriterionSpec("Names the product", 1),
        CriterionSpec("Invents a price", -5),
        CriterionSpec("Is short", 2),
    ]
    assert [c.penalty for c in parse_criteria(text)] == [False, False, True, False]
    assert [c.line for c in parse_criteria("\n- [3] a\n\n- b")] == [2, 4]


def test_parse_rubric_drops_weights_and_checks_from_names():
    text = "- [3] Cites the date\n- [-5] Invents a price {regex: \\$\\d}\n[2] Bare weight"
    assert parse_rubric(text) == ["Cites the date", "Invents a price", "Bare weight"]


def test_checkbox_and_weight_read_unambiguously():
    assert _weights("- [ ] [3] open, weighted\n- [x] [-2] ticked, penalty\n[x] [4] bare") == [
        ("open, weighted", 3),
        ("ticked, penalty", -2),
        ("bare", 4),
    ]
    assert _weights("- [ ] plain box\n- [ 7 ] spaced weight") == [
        ("plain box", 1),
        ("spaced weight", 7),
    ]


def test_weight_limits_are_inclusive():
    assert _weights(f"- [{MAX_WEIGHT}] top\n- [-{MAX_WEIGHT}] bottom\n- [1] one") == [
        ("top", 100),
        ("bottom", -100),
        ("one", 1),
    ]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("- [0] Cites the date", "weight [0] counts for nothing"),
        ("- [abc] Cites the date", "weight [abc] is not a whole number"),
        ("- [99999] Cites the date", "weight [99999] is out of range"),
        ("- [101] Cites the date", "weight [101] is out of range"),
        ("- [-101] Cites the date", "weight [-101] is out of range"),
        ("- [1.5] Cites the date", "weight [1.5] is not a whole number"),
        ("- [3]", "the line has a weight or a check but no criterion"),
    ],
)
def test_bad_weights_name_the_line_and_its_text(line, problem):
    text = f"- Names the product\n\n{line}"
    with pytest.raises(RubricError) as caught:
        parse_criteria(text)
    assert str(caught.value).startswith(f"line 3 ({line!r}): {problem}")
    assert caught.value.line == 3
    assert caught.value.text == line
    with pytest.raises(RubricError, match=r"^line 3 "):
        validate_rubric(text)


def test_parse_rubric_keeps_malformed_lines_whole_as_before():
    assert parse_rubric("- [0] zero\n- [abc] word\n- fine") == ["[0] zero", "[abc] word", "fine"]


def test_links_and_escaped_brackets_are_text():
    assert _weights("- [docs](https://example.org) are linked\n- \\[Draft] is marked") == [
        ("[docs](https://example.org) are linked", 1),
        ("[Draft] is marked", 1),
    ]


def test_parse_criteria_reads_checks():
    text = "\n".join(
        [
            "- [2] Exactly three lines {lines == 3}",
            "- Has a summary {regex: (?m)^## Summary$}",
            "- [-5] Invents a price {no-regex: \\$\\d}",
            '- Is a person record {json: {"type": "object", "required": ["name"]}}',
            "- Is JSON {JSON}",
            "- Short enough {words<=150}",
            "- Repeats a{2} {regex: a{2}}",
        ]
    )
    criteria = parse_criteria(text)
    assert [(c.name, c.weight, c.check) for c in criteria] == [
        ("Exactly three lines", 2, CheckSpec("lines", "== 3")),
        ("Has a summary", 1, CheckSpec("regex", "(?m)^## Summary$")),
        ("Invents a price", -5, CheckSpec("no-regex", "\\$\\d")),
        ("Is a person record", 1, CheckSpec("json", '{"type": "object", "required": ["name"]}')),
        ("Is JSON", 1, CheckSpec("json", "")),
        ("Short enough", 1, CheckSpec("words", "<=150")),
        ("Repeats a{2}", 1, CheckSpec("regex", "a{2}")),
    ]
    assert str(criteria[0].check) == "{lines == 3}"


def test_braces_that_are_not_a_trailing_check_are_text():
    assert parse_rubric("- Prints f{name}\n- Prints \\{name}\n- Ends with }\n- {x} then text") == [
        "Prints f{name}",
        "Prints {name}",
        "Ends with }",
        "{x} then text",
    ]
    assert all(c.check is None for c in parse_criteria("- Prints f{name}\n- Prints \\{name}"))


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("- Three lines {line == 3}", "unknown check 'line'; the checks are: words, lines,"),
        ("- Three lines {lines about 3}", "check 'lines': cannot read 'about 3' as a count"),
        ("- Short {words 150..100}", "check 'words': the range 150..100 is empty"),
        ("- Has it {regex: (unclosed}", "check 'regex': invalid regular expression"),
        ("- Haiku {syllables: five-seven}", "check 'syllables': cannot read"),
        (
            '- Record {json: {"type": 5}}',
            "check 'json': the inline schema is not a valid JSON Schema",
        ),
        ("- Record {json: {not json}}", "check 'json': the inline schema is not valid JSON"),
        ("- Record {json: schema.yaml}", "check 'json': 'schema.yaml' is neither"),
        (
            "- Adds {pytest: assert add(1, 2) ==}",
            "check 'pytest': the inline test is not valid Python",
        ),
        ("- Tests {pytest}", "check 'pytest': name a test file"),
        ('- Odd {"a": 1}', '{"a": 1} at the end of the line must name a check'),
        ("- {lines == 3}", "the line has a weight or a check but no criterion"),
    ],
)
def test_bad_checks_name_the_line(line, problem):
    with pytest.raises(RubricError) as caught:
        parse_criteria(f"- ok\n{line}")
    assert str(caught.value).startswith(f"line 2 ({line!r}): {problem}")
    assert caught.value.line == 2


def test_repeated_criterion_is_kept_once_unless_it_disagrees():
    assert _weights("- [2] Cites the date\n- [2] cites the date") == [("Cites the date", 2)]
    with pytest.raises(RubricError, match=r"^line 2 .*repeats the criterion of line 1"):
        parse_criteria("- [2] Cites the date\n- [3] cites the date")
    with pytest.raises(RubricError, match="repeats the criterion of line 1"):
        parse_criteria("- Short\n- Short {words <= 5}")


def test_validate_rubric_keeps_its_limits_and_returns_names():
    assert validate_rubric("- [2] Exactly three lines {lines == 3}\n- Mentions rain") == [
        "Exactly three lines",
        "Mentions rain",
    ]
    with pytest.raises(RubricError, match="rubric is empty"):
        validate_rubric("# only a heading\n")
    with pytest.raises(RubricError, match="limit is 20,000"):
        validate_rubric("- x\n" * 6000)
    with pytest.raises(RubricError, match="rubric must be a string, got int"):
        validate_rubric(3)
    with pytest.raises(RubricError, match="the check is 2,001 characters; the limit is 2,000"):
        validate_rubric("- long {regex: " + "a" * 1994 + "}")
    assert validate_criteria("- [-2] Only a penalty")[0].weight == -2


def test_tool_warnings_skip_checked_criteria():
    text = "- Exactly three lines {lines == 3}\n- The lines have 5/7/5 syllables"
    warnings = tool_warnings(text)
    assert len(warnings) == 1
    assert "count_syllables" in warnings[0]


def test_criteria_from_healthbench_round_trips():
    items = [
        {"criterion": "Advises seeing a doctor\n within a week", "points": 5, "tags": ["x"]},
        {"criterion": "[Urgent] flags chest pain", "points": 10},
        {"criterion": "Recommends a dose {mg}", "points": -8.0},
        {"criterion": "Is polite", "points": 1},
    ]
    text = criteria_from_healthbench(json.dumps(items))
    assert text == (
        "- [5] Advises seeing a doctor within a week\n"
        "- [10] [Urgent] flags chest pain\n"
        "- [-8] Recommends a dose \\{mg}\n"
        "- [1] Is polite"
    )
    assert _weights(text) == [
        ("Advises seeing a doctor within a week", 5),
        ("[Urgent] flags chest pain", 10),
        ("Recommends a dose {mg}", -8),
        ("Is polite", 1),
    ]
    assert all(c.check is None for c in parse_criteria(text))
    assert criteria_from_healthbench({"prompt": [], "rubrics": items}) == text
    assert criteria_from_healthbench(items) == text


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("[{", "the HealthBench rubric is not valid JSON"),
        ('{"criterion": "x", "points": 1}', "a HealthBench rubric is a JSON list"),
        ("[]", "the HealthBench rubric is empty"),
        ('[{"criterion": "a", "points": 1}, "b"]', "rubric item at index 1: must be an object"),
        ('[{"points": 1}]', "rubric item at index 0: criterion must be a non-empty string"),
        (
            '[{"criterion": "  ", "points": 1}]',
            "rubric item at index 0: criterion must be a non-empty",
        ),
        ('[{"criterion": "a", "points": 0}]', "rubric item at index 0: points must be 1 to 100"),
        ('[{"criterion": "a", "points": 101}]', "rubric item at index 0: points must be 1 to 100"),
        (
            '[{"criterion": "a", "points": 2.5}]',
            "rubric item at index 0: points must be a whole number",
        ),
        (
            '[{"criterion": "a", "points": true}]',
            "rubric item at index 0: points must be a whole number",
        ),
        (
            '[{"criterion": "a", "points": "3"}]',
            "rubric item at index 0: points must be a whole number",
        ),
        ('[{"criterion": "a"}]', "rubric item at index 0: points must be a whole number, got None"),
        (
            '[{"criterion": "A b", "points": 1}, {"criterion": "a  B", "points": 2}]',
            "rubric item at index 1: repeats the criterion at index 0",
        ),
    ],
)
def test_criteria_from_healthbench_rejects_bad_items(data, problem):
    with pytest.raises(RubricError) as caught:
        criteria_from_healthbench(data)
    assert str(caught.value).startswith(problem)


def test_criteria_from_healthbench_enforces_rubric_limits():
    too_many = [{"criterion": f"item {n}", "points": 1} for n in range(101)]
    with pytest.raises(RubricError, match="has 101 criteria; the limit is 100"):
        criteria_from_healthbench(too_many)
    with pytest.raises(RubricError, match="index 0: criterion is 1,001 characters"):
        criteria_from_healthbench([{"criterion": "x" * 1001, "points": 1}])


def test_every_example_in_the_readme_syntax_table_parses():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Rubric syntax", 1)[1].split("\n\n")[2]
    examples = [row.rsplit("|", 2)[1].strip().strip("`") for row in table.splitlines()[2:]]
    assert len(examples) == 16
    register_check("title-case", lambda draft, arg: CheckResult(draft.istitle(), draft))
    try:
        parsed = [parse_criteria(example) for example in examples]
    finally:
        unregister_check("title-case")
    assert parsed[1] == []
    assert [c.weight for [c] in parsed[2:4]] == [3, -5]
    assert [c.check.name for [c] in parsed[4:15]] == [
        "lines", "chars", "regex", "no-regex", "syllables", "json", "json", "pytest", "pytest",
        "regex", "title-case",
    ]  # fmt: skip
    assert parsed[15][0].name == "[Draft] is marked as a draft"


@pytest.mark.parametrize(
    "bullet", ["-", "*", "+", "•", "1.", "2)", "(3)", "a)", "- [ ]", "[x]", "- "]
)
def test_a_bare_bullet_is_refused_not_saved_as_a_criterion(bullet):
    """`-`, `*` and `1.` on their own lines were saved as three criteria."""
    text = f"- has a title\n{bullet}\n- cites a source"
    with pytest.raises(RubricError, match=r"line 2 .*a bullet with no criterion after it"):
        parse_criteria(text)
    with pytest.raises(RubricError, match="a bullet with no criterion"):
        validate_rubric(text)
    assert parse_rubric(text) == ["has a title", "cites a source"]


def test_a_rubric_of_bare_bullets_is_refused(store):
    with pytest.raises(RubricError, match=r"line 1 \('-'\): a bullet with no criterion"):
        validate_rubric("-\n*\n1.")
    with pytest.raises(RubricError, match="a bullet with no criterion"):
        store.rubrics.save_version("bullets", "-\n*\n1.")
    assert store.rubrics.find() == []
