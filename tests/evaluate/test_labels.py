"""Tests for rubric_core.evaluate.labels: the labels CSV, the dataset `labels` column, rubric checks."""

from __future__ import annotations

import csv
import io

import pytest

from rubric_core.evaluate import (
    LABEL_COLUMNS,
    EvaluationError,
    LabelError,
    check_label_criteria,
    parse_dataset_labels,
    parse_human_passed,
    parse_labels_csv,
)
from rubric_core.export import EXPORT_COLUMNS, neutralise_cell

TITLE, SOURCE = "has a title", "cites a source"


def _csv(rows: list[list[object]], *, bom: bool = False) -> str:
    buffer = io.StringIO()
    if bom:
        buffer.write("\ufeff")
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("true", True), ("TRUE", True), ("1", True), ("yes", True), (" Pass ", True),
        ("false", False), ("0", False), ("No", False), ("fail", False), ("", None), ("  ", None),
    ],
)  # fmt: skip
def test_human_passed_words(cell, expected):
    assert parse_human_passed(cell) is expected


def test_labels_csv_reads_every_column():
    text = _csv(
        [
            [" Run_ID", "Evaluation_ID", "grading_run_id", "iteration", "criterion", "human_passed", "reviewer", "label_note", "extra"],
            [3, "", "g-1", 1, TITLE, "yes", "ana", "clear title", "ignored"],
            ["", 41, "", "", SOURCE, "0", "", "", ""],
        ],
        bom=True,
    )  # fmt: skip
    assert parse_labels_csv(text, source="labels.csv", reviewer="labels.csv") == [
        {
            "row": 2, "run_id": 3, "evaluation_id": None, "grading_run_id": "g-1", "iteration": 1,
            "criterion": TITLE, "human_passed": True, "reviewer": "ana", "label_note": "clear title",
        },
        {
            "row": 3, "run_id": None, "evaluation_id": 41, "grading_run_id": None, "iteration": None,
            "criterion": SOURCE, "human_passed": False, "reviewer": "labels.csv", "label_note": None,
        },
    ]  # fmt: skip


def test_labels_round_trip_through_a_criteria_export():
    """A criteria export with the label columns beside the judge's `passed` imports as it is."""
    # the export carries the label columns (and the pass's evaluation_id)
    columns = list(EXPORT_COLUMNS["criteria"])
    assert {"human_passed", "reviewer", "label_note", "evaluation_id"} <= set(columns)
    labelled = [
        {"run_id": 1, "grading_run_id": "g1", "iteration": 0, "criterion": TITLE, "passed": "true",
         "human_passed": "true", "reviewer": "ana", "label_note": "=SUM(A1) is not a formula here"},
        {"run_id": 1, "grading_run_id": "g1", "iteration": 0, "criterion": "=total under 5",
         "passed": "true", "human_passed": "false", "reviewer": "-bo", "label_note": ""},
        {"run_id": 2, "grading_run_id": "g2", "iteration": 1, "criterion": TITLE, "passed": "false",
         "human_passed": "", "reviewer": "", "label_note": ""},  # not reviewed yet
    ]  # fmt: skip
    rows = [columns]
    for item in labelled:
        item = {"evaluation_id": "", **item}  # label by run, attempt and pass here
        cells = [item.get(column, 'x, "quoted"\nmultiline') for column in columns]
        rows.append([neutralise_cell(c) if isinstance(c, str) else c for c in cells])
    parsed = parse_labels_csv(_csv(rows, bom=True), reviewer="export.csv")
    assert [
        (r["row"], r["run_id"], r["grading_run_id"], r["iteration"], r["criterion"],
         r["human_passed"], r["reviewer"], r["label_note"])
        for r in parsed
    ] == [
        (2, 1, "g1", 0, TITLE, True, "ana", "=SUM(A1) is not a formula here"),
        (3, 1, "g1", 0, "=total under 5", False, "-bo", None),
    ]  # fmt: skip


def test_labels_round_trip_through_label_columns():
    labels = [
        {"row": 2, "run_id": 5, "evaluation_id": None, "grading_run_id": None, "iteration": None,
         "criterion": TITLE, "human_passed": True, "reviewer": "ana", "label_note": "a, \"b\"\nc"},
        {"row": 3, "run_id": None, "evaluation_id": 9, "grading_run_id": None, "iteration": None,
         "criterion": SOURCE, "human_passed": False, "reviewer": "bo", "label_note": None},
    ]  # fmt: skip
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=LABEL_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(labels)
    assert parse_labels_csv(buffer.getvalue()) == labels


def test_labels_csv_skips_blank_lines_and_counts_rows_as_a_spreadsheet_does():
    text = "\n\nrun_id,criterion,human_passed\n1,has a title,yes\n\n2,has a title,maybe\n"
    with pytest.raises(LabelError, match=r"^labels: row 6, column 'human_passed': 'maybe'") as info:
        parse_labels_csv(text)
    assert (info.value.row, info.value.column) == (6, "human_passed")


@pytest.mark.parametrize(
    ("rows", "message", "row", "column"),
    [
        (
            [["criterion", "human_passed"], [TITLE, "yes"]],
            "f.csv: row 1: missing column run_id or evaluation_id (columns: criterion, human_passed)",
            1,
            "run_id or evaluation_id",
        ),
        (
            [["run_id", "passed"], [1, "true"]],
            "f.csv: row 1: missing columns criterion, human_passed (columns: run_id, passed)",
            1,
            "criterion",
        ),
        (
            [["run_id", "criterion", "human_passed", "Run_Id"], [1, TITLE, "yes", 1]],
            "f.csv: row 1: column 'run_id' appears twice",
            1,
            "run_id",
        ),
        (
            [["run_id", "criterion", "human_passed"], ["abc", TITLE, "yes"]],
            "f.csv: row 2, column 'run_id': 'abc' is not a positive whole number",
            2,
            "run_id",
        ),
        (
            [["run_id", "criterion", "human_passed"], [0, TITLE, "yes"]],
            "f.csv: row 2, column 'run_id': '0' is not a positive whole number",
            2,
            "run_id",
        ),
        (
            [["run_id", "iteration", "criterion", "human_passed"], [1, -1, TITLE, "yes"]],
            "f.csv: row 2, column 'iteration': '-1' is not a whole number from 0",
            2,
            "iteration",
        ),
        (
            [["run_id", "evaluation_id", "criterion", "human_passed"], ["", "", TITLE, "no"]],
            "f.csv: row 2, column 'run_id': empty; say which run (or evaluation_id) it labels",
            2,
            "run_id",
        ),
        (
            [["run_id", "criterion", "human_passed"], [1, "  ", "no"]],
            "f.csv: row 2, column 'criterion': empty; name the criterion the label is for",
            2,
            "criterion",
        ),
        (
            [["run_id", "criterion", "human_passed"], [1, TITLE, "yes"], [1, "Has a  Title", "no"]],
            "f.csv: row 3: labels criterion 'Has a  Title' of the same pass again (first at row 2); keep one",
            3,
            "criterion",
        ),
        (
            [["run_id", "criterion", "human_passed"], [1, TITLE, ""]],
            "f.csv: no row has a human_passed verdict; fill it with true or false",
            None,
            "human_passed",
        ),
    ],
)
def test_labels_csv_errors_name_the_row_and_column(rows, message, row, column):
    with pytest.raises(LabelError) as info:
        parse_labels_csv(_csv(rows), source="f.csv")
    assert str(info.value) == message
    assert (info.value.row, info.value.column) == (row, column)


def test_labels_csv_empty_or_broken_file():
    with pytest.raises(LabelError, match=r"f\.csv: is empty; expected a header row"):
        parse_labels_csv("\n\n", source="f.csv")
    huge = _csv(
        [["run_id", "criterion", "human_passed", "label_note"], [1, TITLE, "yes", "x" * 200_000]]
    )
    with pytest.raises(
        LabelError, match=r"f\.csv: line 2: a field is longer than 131,072 characters"
    ):
        parse_labels_csv(huge, source="f.csv")


def test_label_errors_are_evaluation_errors_and_value_errors():
    assert issubclass(LabelError, EvaluationError) and issubclass(LabelError, ValueError)


def test_dataset_labels_read_json_objects():
    assert parse_dataset_labels(' {" has a title ": true, "cites a source": false}', row=2) == {
        TITLE: True,
        SOURCE: False,
    }
    assert parse_dataset_labels({TITLE: False}, row="line 4") == {TITLE: False}
    assert parse_dataset_labels("", row=2) == {}
    assert parse_dataset_labels(None, row=2) == {}
    assert parse_dataset_labels("null", row=2) == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{has a title: true}", "data.csv: row 7, column 'labels': not valid JSON (Expecting property name enclosed in double quotes at column 2); expected an object like {\"criterion\": true}"),
        ('["has a title"]', "data.csv: row 7, column 'labels': expected a JSON object from criterion name to true/false, got list"),
        ('{"has a title": "yes"}', "data.csv: row 7, column 'labels', criterion 'has a title': expected true or false, got 'yes'"),
        ('{"has a title": 1}', "data.csv: row 7, column 'labels', criterion 'has a title': expected true or false, got 1"),
        ('{" ": true}', "data.csv: row 7, column 'labels': a criterion name is empty"),
        ('{"has a title": true, "has a title": false}', "data.csv: row 7, column 'labels': criterion 'has a title' is labelled twice"),
        ('{"has a title": true, " has a title": false}', "data.csv: row 7, column 'labels': criterion 'has a title' is labelled twice"),
    ],
)  # fmt: skip
def test_dataset_labels_errors_name_the_row_and_criterion(value, message):
    with pytest.raises(LabelError) as info:
        parse_dataset_labels(value, row=7, source="data.csv")
    assert str(info.value) == message
    assert (info.value.row, info.value.column) == (7, "labels")


def test_dataset_labels_name_a_jsonl_line():
    with pytest.raises(LabelError, match=r"^data.jsonl: line 3, column 'labels'"):
        parse_dataset_labels([True], row="line 3", source="data.jsonl")


def test_label_criteria_map_to_the_rubric_spelling():
    criteria = [TITLE, SOURCE, "under 200 words"]
    assert check_label_criteria(["Has A Title", SOURCE, " under  200 words "], criteria) == {
        "Has A Title": TITLE,
        SOURCE: SOURCE,
        " under  200 words ": "under 200 words",
    }


def test_label_criteria_outside_the_rubric_are_named():
    with pytest.raises(EvaluationError) as info:
        check_label_criteria(
            ["rhymes", TITLE, "is funny", "rhymes"], [TITLE, SOURCE], rubric="essay@2"
        )
    assert str(info.value) == (
        "labels name criteria that are not in rubric 'essay@2': 'rhymes', 'is funny' "
        "(its criteria: 'has a title', 'cites a source')"
    )
