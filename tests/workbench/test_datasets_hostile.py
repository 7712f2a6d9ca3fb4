"""Hostile datasets and label files (issue 22): unstorable text, ambiguous columns, label
files read by the dataset reader's rules. Each is a one-line error naming the line or the
columns, before anything runs."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.runs.spec import SpecError, check_input
from rubric_core.store import NewRun, Store
from rubric_core.workbench.datasets import DatasetError, load_graded_upload, load_upload

RUBRIC = "- Fewer than 40 words {words < 40}\n- Exactly two sentences {sentences == 2}\n"
"""Checks only: graded with `--grader none`, offline."""


@pytest.fixture
def invoke(tmp_path):
    db = tmp_path / "cli.db"

    def run(*args: str):
        return CliRunner().invoke(cli, [*args, "--db", str(db)])

    run.db = db  # type: ignore[attr-defined]
    rubric = tmp_path / "rubric.txt"
    rubric.write_text(RUBRIC)
    assert run("rubrics", "add", "bottle", str(rubric)).exit_code == 0
    return run


def _one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for fragment in fragments:
        assert fragment in result.output


# --------------------------------------------------------------------------- lone surrogates


def test_batch_refuses_a_lone_surrogate_naming_its_line_and_runs_nothing(invoke, tmp_path):
    data = tmp_path / "inputs.jsonl"
    data.write_text('{"input": "fine"}\n{"input": "bad \\ud800 here"}\n')
    result = invoke("batch", "--scenario", "haiku", "--input-file", str(data))
    _one_line_error(result, "inputs.jsonl: line 2: 'input' holds a lone surrogate (U+D800")
    with Store(invoke.db) as store:
        assert store.runs.count() == 0


def test_grade_refuses_a_lone_surrogate_in_an_output_and_leaves_no_run(invoke, tmp_path):
    data = tmp_path / "graded.jsonl"
    data.write_text(
        json.dumps({"input": "q", "output": "fine"}) + '\n{"input": "q", "output": "x\\udfff"}\n'
    )
    result = invoke("grade", "--input-file", str(data), "--rubric", "bottle", "--grader", "none")
    _one_line_error(result, "graded.jsonl: line 2: 'output' holds a lone surrogate (U+DFFF")
    with Store(invoke.db) as store:
        assert store.runs.count() == 0


def test_a_run_input_with_a_lone_surrogate_is_a_spec_error():
    with pytest.raises(SpecError, match=r"inputs\[1\]: holds a lone surrogate"):
        check_input("a\udcff", "inputs[1]")


def test_a_line_separator_inside_a_json_string_does_not_split_the_line():
    data = '{"input": "one\u2028two"}\n{"input": "three"}\n'.encode()
    assert load_upload("d.jsonl", data) == ["one\u2028two", "three"]
    with pytest.raises(DatasetError, match=r"line 2 is not valid JSON"):
        load_upload("d.jsonl", '{"input": "one\u2028two"}\n{oops\n'.encode())


# --------------------------------------------------------------------------- ambiguous columns


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        ("input,output,output", "'output', 'output'"),
        ("input,Output,output ", "'Output', 'output '"),
        ("Input,input,output", "'Input', 'input'"),
    ],
)
def test_two_cells_naming_one_column_are_an_error(header, shown):
    data = f"{header}\nq,a,b\n".encode()
    with pytest.raises(DatasetError, match=r"g\.csv: line 1: the header names column") as caught:
        load_graded_upload("g.csv", data)
    assert shown in str(caught.value)


def test_two_input_columns_in_a_batch_dataset_are_an_error():
    with pytest.raises(DatasetError, match=r"column 'input' 2 times \('input', 'INPUT';"):
        load_upload("d.csv", b"input,INPUT\nfirst,second\n")


def test_extra_cells_in_a_row_are_an_error_naming_the_line():
    with pytest.raises(DatasetError, match=r"d\.csv: line 3: the row has 2 cells but the header 1"):
        load_upload("d.csv", b"input\nfine\nHello, world\n")
    with pytest.raises(DatasetError, match=r"g\.csv: line 2: the row has 3 cells but the header 2"):
        load_graded_upload("g.csv", b"input,output\nq,a,dropped\n")
    # empty trailing cells (a spreadsheet's trailing commas) lose nothing
    assert load_upload("d.csv", b"input\nfine,,\n") == ["fine"]


def test_a_jsonl_object_with_a_key_twice_is_an_error():
    with pytest.raises(DatasetError, match=r"d\.jsonl: line 1: key 'input' appears twice"):
        load_upload("d.jsonl", b'{"input": "a", "input": "b"}\n')
    with pytest.raises(DatasetError, match=r"g\.jsonl: line 1: key 'output' appears twice"):
        load_graded_upload("g.jsonl", b'{"input": "q", "output": "a", "output": "b"}\n')


# --------------------------------------------------------------------------- label files


@pytest.fixture
def graded(invoke, tmp_path):
    data = tmp_path / "graded.jsonl"
    data.write_text(json.dumps({"input": "q", "output": "It keeps drinks cold. It is steel."}))
    result = invoke("grade", "--input-file", str(data), "--rubric", "bottle", "--grader", "none")
    assert result.exit_code == 0, result.output
    return invoke


@pytest.mark.parametrize("codec", ["utf-16", "utf-32", "utf-8-sig"])
def test_label_reads_a_file_with_a_byte_order_mark(graded, tmp_path, codec):
    labels = tmp_path / "labels.csv"
    labels.write_bytes("run_id,criterion,human_passed\n1,Fewer than 40 words,yes\n".encode(codec))
    result = graded("label", "--input-file", str(labels))
    assert result.exit_code == 0, result.output
    assert "Stored 1 labels" in result.output


def test_label_refuses_latin1_naming_the_byte_and_line(graded, tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_bytes("run_id,criterion,human_passed,label_note\n1,Fewer than 40 words,yes,café\n".encode("latin-1"))  # fmt: skip
    result = graded("label", "--input-file", str(labels))
    _one_line_error(result, "labels.csv: is not UTF-8 text (byte 0xe9", "line 2")


def test_label_names_an_unclosed_quote_instead_of_no_verdicts(graded, tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text('run_id,criterion,human_passed\n1,"Fewer than 40 words,yes\n1,x,no\n')
    result = graded("label", "--input-file", str(labels))
    _one_line_error(
        result, "labels.csv: line 2: a quoted field opened on this line is never closed"
    )
    assert "no row has a human_passed verdict" not in result.output


# --------------------------------------------------------------------------- stored text limits


def test_a_huge_rubric_name_is_refused_quoting_only_a_prefix(tmp_path):
    rubric = tmp_path / "r.txt"
    rubric.write_text("- a\n")
    name = "x" * 100_000
    result = CliRunner().invoke(cli, ["rubrics", "add", name, str(rubric), "--db", str(tmp_path / "s.db")])  # fmt: skip
    _one_line_error(result, "100,000 characters", "the limit is 200")
    assert len(result.output) < 400


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0b"])
def test_a_line_or_paragraph_separator_fails_the_single_line_check(tmp_path, separator):
    with Store(tmp_path / "s.db") as store, pytest.raises(Exception, match="single line"):
        store.rubrics.save_version(f"one{separator}two", "- a\n")


def test_a_huge_explanation_and_gap_are_cut_and_marked(tmp_path):
    from rubric_core.limits import MAX_EXPLANATION_CHARS, MAX_GAP_CHARS

    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("r", "- a\n")
        run = store.runs.create(NewRun(rubric_version_id=version["id"], input="q", agent_model="m", grader_model="g", max_iterations=1, agent_kind="basic"))  # fmt: skip
        store.passes.record(
            run,
            {
                "grading_run_id": "g1",
                "iteration": 0,
                "result": "needs_revision",
                "status": "needs_revision",
                "explanation": "e" * 3_000_000,
                "criteria": [{"name": "a", "passed": False, "gap": "g" * 3_000_000}],
                "draft": "d",
                "started_at": 0.0,
                "duration_s": 0.0,
                "grader_attempts": 1,
                "grader_input_tokens": 0,
                "grader_output_tokens": 0,
            },
        )
        (stored,) = store.passes.of_run(run)
    assert len(stored["explanation"]) <= MAX_EXPLANATION_CHARS
    assert stored["explanation"].endswith("more characters]")
    gap = stored["criteria"][0]["gap"]
    assert len(gap) <= MAX_GAP_CHARS and "[cut: " in gap


def test_thousands_of_invented_criteria_are_counted_not_listed():
    from rubric_core.grader.subagent import _conclude
    from rubric_core.schema import GraderResponse

    invented = [{"name": f"invented {i}", "passed": True} for i in range(5_000)]
    criteria = [{"name": "a", "passed": True}, *invented]
    response = GraderResponse.model_validate(
        {"criteria": criteria, "explanation": "ok", "result": "satisfied"}
    )
    outcome = _conclude(["a"], response)
    assert "and 4,990 more" in outcome.explanation
    assert len(outcome.explanation) < 1_000


# --------------------------------------------------------------------------- CSV formula defusing


@pytest.mark.parametrize(
    "filler", ["\u034f", "\u2800", "\u3164", "\u115f", "\u1160", "\uffa0", "\ufe0f", "\u034f\u2800"]
)
def test_blank_drawn_fillers_before_a_formula_are_seen_through(filler):
    from rubric_core.cells import csv_cell, neutralise_cell

    cell = f'{filler}=HYPERLINK("http://evil","x")'
    assert neutralise_cell(cell) == "'" + cell
    assert csv_cell(cell).lstrip('"').startswith("'")
    assert neutralise_cell(f"{filler}plain") == f"{filler}plain"


def test_a_panel_judges_huge_explanation_is_cut_too(tmp_path):
    from rubric_core.limits import MAX_EXPLANATION_CHARS, MAX_GAP_CHARS

    with Store(tmp_path / "s.db") as store:
        version = store.rubrics.save_version("r", "- a\n", note="n" * 100_000)
        assert len(version["note"]) <= 2_000
        run = store.runs.create(NewRun(rubric_version_id=version["id"], input="q", agent_model="m", grader_model="g", max_iterations=1, agent_kind="basic"))  # fmt: skip
        judge = {
            "judge": "j",
            "result": "needs_revision",
            "explanation": "e" * 1_000_000,
            "criteria": [{"name": "a", "passed": False, "gap": "g" * 1_000_000}],
        }
        store.passes.record(
            run,
            {
                "grading_run_id": "g1", "iteration": 0, "result": "needs_revision",
                "status": "needs_revision", "explanation": "x",
                "criteria": [{"name": "a", "passed": False, "gap": "g"}], "draft": "d",
                "started_at": 0.0, "duration_s": 0.0, "grader_attempts": 1,
                "grader_input_tokens": 0, "grader_output_tokens": 0, "judges": [judge],
            },
        )  # fmt: skip
        (stored,) = store.passes.of_run(run)
    (kept,) = stored["judges"]
    assert len(kept["explanation"]) <= MAX_EXPLANATION_CHARS
    assert len(kept["criteria"][0]["gap"]) <= MAX_GAP_CHARS
