"""Tests for rubric_core.export: streamed CSV/JSONL datasets checked cell by cell."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random

import pytest

from rubric_core.export import (
    EXPORT_COLUMNS,
    ExportError,
    csv_chunks,
    export_file,
    iter_rows,
    jsonl_chunks,
    neutralise_cell,
    open_export,
    write_csv,
    write_jsonl,
)
from rubric_core.store import RunEnd, RunFilters, StoreError

NASTY_INPUT = '=HYPERLINK("http://evil","x")\nsecond line, with comma and "quotes" — ünïcödé 🚀'
NASTY_GAP = "+cmd|' /C calc'!A0"

pytestmark = pytest.mark.both_backends


@pytest.fixture
def seeded(store, new_run, make_evaluation):
    """Two rubrics; a two-pass run with hostile text, a one-pass run, and a run on another rubric."""
    essay = store.rubrics.save_version("essay", "- has a title\n- cites a source")
    poem = store.rubrics.save_version("poem", "- rhymes")
    first = new_run(store, essay["id"], input=NASTY_INPUT, agent_model="agent-a")
    store.passes.record(
        first,
        make_evaluation(
            grading_run_id="g1",
            iteration=0,
            verdicts=[("has a title", True), ("cites a source", False, NASTY_GAP)],
            explanation="@SUM(A1:A2) is not a source",
            started_at=1_700_000_000.0,
            grader_input_tokens=11,
            grader_output_tokens=3,
        ),
    )
    store.passes.record(
        first,
        make_evaluation(
            grading_run_id="g1",
            iteration=1,
            verdicts=[("has a title", True), ("cites a source", True)],
            explanation="Both pass.\nWell done — ✓",
            started_at=1_700_000_010.0,
        ),
    )
    store.runs.finish(first, RunEnd(status="satisfied", final_output="-1 is the answer"))
    second = new_run(store, essay["id"], agent_model="agent-b", grader_model="judge-x")
    store.passes.record(
        second,
        make_evaluation(grading_run_id="g2", verdicts=[("has a title", False, "\tadd one")]),
    )
    store.runs.finish(second, RunEnd(status="max_iterations_reached"))
    third = new_run(store, poem["id"])
    store.passes.record(third, make_evaluation(grading_run_id="g3", verdicts=[("rhymes", True)]))
    return {"essay": essay, "poem": poem, "runs": (first, second, third)}


def _csv(store, dataset="criteria", **kwargs):
    data = b"".join(csv_chunks(store, dataset, **kwargs)).decode("utf-8")
    return list(csv.reader(io.StringIO(data, newline="")))


def test_criteria_csv_cells_exact_and_formulas_neutralised(store, seeded):
    first, second, third = seeded["runs"]
    header, *rows = _csv(store)
    assert tuple(header) == EXPORT_COLUMNS["criteria"]
    assert len(rows) == 6  # 2 + 2 + 1 + 1 criterion verdicts
    by_key = {(r[0], r[7], r[10]): dict(zip(header, r, strict=True)) for r in rows}

    failing = by_key[(str(first), "0", "cites a source")]
    assert failing == {
        "run_id": str(first),
        "rubric": "essay",
        "rubric_version": "1",
        "input": "'" + NASTY_INPUT,
        "agent_model": "agent-a",
        "grader_model": "replay:article-grader",
        "grading_run_id": "g1",
        "iteration": "0",
        "result": "needs_revision",
        "status": "needs_revision",
        "criterion": "cites a source",
        "passed": "false",
        "gap": "'" + NASTY_GAP,
        "explanation": "'@SUM(A1:A2) is not a source",
        "grader_input_tokens": "11",
        "grader_output_tokens": "3",
        "duration_s": "0.5",
        "started_at": "2023-11-14T22:13:20.000000+00:00",
        # weight and checked_by per criterion, the pass's score (none recorded)
        "weight": "1",
        "checked_by": "",
        "score": "",
        # the pass, insufficient evidence and the human label beside `passed`
        "evaluation_id": failing["evaluation_id"],
        "insufficient": "false",
        "human_passed": "",
        "reviewer": "",
        "label_note": "",
        # the run's own final status and the draft this pass judged
        "run_status": "satisfied",
        "draft": "A draft answer.",
    }
    passing = by_key[(str(first), "1", "has a title")]
    assert (passing["passed"], passing["gap"]) == ("true", "")
    assert passing["explanation"] == "Both pass.\nWell done — ✓"
    assert by_key[(str(second), "0", "has a title")]["gap"] == "'\tadd one"
    # oldest run first, passes in order, criteria in rubric order
    assert [(r[0], r[7], r[10]) for r in rows][:4] == [
        (str(first), "0", "has a title"),
        (str(first), "0", "cites a source"),
        (str(first), "1", "has a title"),
        (str(first), "1", "cites a source"),
    ]


def test_runs_csv_summarises_each_run(store, seeded):
    first, second, third = seeded["runs"]
    header, *rows = _csv(store, "runs")
    assert tuple(header) == EXPORT_COLUMNS["runs"]
    table = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert set(table) == {str(first), str(second), str(third)}
    run = table[str(first)]
    assert run["status"] == "satisfied"
    assert run["iterations"] == "2"
    assert (run["final_criteria_passed"], run["final_criteria_total"]) == ("2", "2")
    assert run["final_output"] == "'-1 is the answer"
    assert run["grader_tools"] == '["text_stats"]'
    assert table[str(second)]["final_criteria_passed"] == "0"
    assert table[str(third)]["status"] == "running"


def test_jsonl_keeps_raw_values_and_unicode(store, seeded):
    first, *_ = seeded["runs"]
    lines = b"".join(jsonl_chunks(store, "criteria", rubric="essay")).decode("utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == 5
    assert rows[0]["input"] == NASTY_INPUT  # JSONL is for programs: no apostrophes
    assert rows[1]["gap"] == NASTY_GAP
    assert rows[1]["passed"] is False
    assert rows[0]["gap"] is None
    assert "🚀" in lines[0]  # not \u-escaped
    runs = [json.loads(line) for line in b"".join(jsonl_chunks(store, "runs")).splitlines()]
    assert runs[0]["grader_tools"] == ["text_stats"]


def test_filters_match_list_runs(store, seeded):
    first, second, third = seeded["runs"]
    assert {r["run_id"] for r in iter_rows(store, rubric="poem")} == {third}
    assert {r["run_id"] for r in iter_rows(store, version_id=seeded["essay"]["id"])} == {
        first,
        second,
    }
    assert {r["run_id"] for r in iter_rows(store, model="judge-x")} == {second}
    assert {r["run_id"] for r in iter_rows(store, model="agent-a")} == {first}
    assert {r["run_id"] for r in iter_rows(store, "runs", status="running")} == {third}
    assert list(iter_rows(store, since="2999-01-01")) == []
    assert len(list(iter_rows(store, "runs", until="2999-01-01"))) == 3


def test_bad_export_requests_name_the_problem(store, seeded):
    with pytest.raises(ExportError, match="unknown export dataset 'passes'"):
        iter_rows(store, "passes")
    with pytest.raises(ExportError, match="unknown export filter colour"):
        iter_rows(store, colour="red")
    with pytest.raises(StoreError, match="unknown status 'great'"):
        iter_rows(store, status="great")
    with pytest.raises(ExportError, match="unknown export format 'xlsx'"):
        open_export(store, "xlsx")


def test_write_csv_and_jsonl_to_files_with_bom(store, seeded, tmp_path):
    path = tmp_path / "out.csv"
    assert export_file(store, path, bom=True) == 6
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")
    with path.open(encoding="utf-8-sig", newline="") as fp:
        rows = list(csv.reader(fp))
    assert rows[0][0] == "run_id"
    assert rows[1][3] == "'" + NASTY_INPUT

    jsonl = tmp_path / "runs.jsonl"
    assert export_file(store, jsonl, dataset="runs", status="satisfied") == 1
    assert json.loads(jsonl.read_text(encoding="utf-8"))["status"] == "satisfied"
    with pytest.raises(ExportError, match=r"name it \.csv or \.jsonl"):
        export_file(store, tmp_path / "out.txt")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out")) == ["out.csv"]

    text = io.StringIO(newline="")
    assert write_csv(store, text, "runs") == 3
    binary = io.BytesIO()
    assert write_jsonl(store, binary) == 6
    assert binary.getvalue().count(b"\n") == 6


def test_open_export_returns_rewound_file(store, seeded):
    with open_export(store, "csv", "criteria", rubric="poem") as fp:
        rows = list(csv.reader(io.TextIOWrapper(fp, encoding="utf-8", newline="")))
    assert rows[1][10] == "rhymes"


def test_empty_store_exports_header_only(store):
    assert _csv(store) == [list(EXPORT_COLUMNS["criteria"])]
    assert b"".join(jsonl_chunks(store)) == b""


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("=1+1", "'=1+1"),
        # a plain number is a number to a spreadsheet, not a formula; keep it
        ("+1", "+1"),
        ("-1", "-1"),
        ("@A1", "'@A1"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("a=b", "a=b"),
        ("", ""),
        ("ünï", "ünï"),
    ],
)
def test_neutralise_cell(cell, expected):
    assert neutralise_cell(cell) == expected


def test_export_streams_many_rows_in_chunks(store, new_run, make_evaluation):
    version = store.rubrics.save_version("bulk", "- a")
    run_id = new_run(store, version["id"])
    verdicts = [(f"criterion {i}", i % 2 == 0) for i in range(60)]
    for iteration in range(40):
        store.passes.record(
            run_id, make_evaluation(grading_run_id="g", iteration=iteration, verdicts=verdicts)
        )
    chunks = list(csv_chunks(store, rows_per_chunk=100))
    assert len(chunks) > 20
    rows = list(csv.reader(io.StringIO(b"".join(chunks).decode(), newline="")))
    assert len(rows) == 1 + 40 * 60


# --------------------------------------------------------------------------- fast path, rows, cells


LOOKALIKE_CELLS = [
    "\uff1dHYPERLINK(1)",  # full-width =
    "\uff0b1",
    "\uff0dcmd",
    "\uff20SUM(A1)",
    "\ufe66cmd",  # small-form =
    " =1+1",
    "\u00a0=1+1",
    "\u200b=1+1",
    "\ufeff=1+1",
    "\n=1+1",
    "\u00ad+cmd",  # soft hyphen, then +
]


@pytest.mark.parametrize("cell", LOOKALIKE_CELLS)
def test_neutralise_cell_sees_through_lookalikes_and_leading_invisibles(cell):
    assert neutralise_cell(cell) == "'" + cell


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("-1.5", "-1.5"),
        ("+2e3", "+2e3"),
        ("-1+1", "'-1+1"),  # arithmetic is a formula: a spreadsheet would show 0
        ("- bullet", "'- bullet"),
        (" plain", " plain"),
        ("\u00a0plain", "\u00a0plain"),
        ("ünï = x", "ünï = x"),
    ],
)
def test_neutralise_cell_keeps_numbers_and_harmless_text(cell, expected):
    assert neutralise_cell(cell) == expected


@pytest.fixture
def complete(store, new_run, make_evaluation):
    """A run that needed revision then was satisfied, a run whose grader broke, a label,
    and hostile text in every kind of cell."""
    version = store.rubrics.save_version("essay", "- has a title\n- cites a source")
    revised = new_run(store, version["id"], input=" =cmd|' /C calc'!A0")
    first = store.passes.record(
        revised,
        make_evaluation(
            grading_run_id="g1",
            verdicts=[("has a title", True), ("cites a source", False, '\uff1d"quoted", gap\r\n')],
            draft="\u200b@draft, one",
            started_at=1_700_000_000.0,
        ),
    )
    store.passes.record(
        revised,
        make_evaluation(
            grading_run_id="g1",
            iteration=1,
            started_at=1_700_000_010.0,
            verdicts=[("has a title", True), ("cites a source", True)],
        ),
    )
    store.labels.save(first, {"cites a source": True}, reviewer='ann, "r"', note="-1")
    store.runs.finish(revised, RunEnd(status="satisfied", final_output="done"))
    broken = new_run(store, version["id"])
    store.passes.record(
        broken,
        make_evaluation(
            grading_run_id="g2",
            verdicts=[],
            result="grader_error",
            explanation="APITimeoutError: the grader did not answer",
            draft="the draft it could not judge",
            started_at=1_700_000_020.0,
        ),
    )
    store.runs.finish(broken, RunEnd(status="grader_error", error="APITimeoutError"))
    return {"revised": revised, "broken": broken, "first_pass": first}


def test_criteria_csv_bytes_match_the_reference_export(store, complete):
    """The fast export writes exactly what the slow csv.writer path writes."""
    from tests.support.export_reference import reference_criteria_csv

    expected = io.StringIO(newline="")
    rows = reference_criteria_csv(store, expected, RunFilters())
    assert rows == 5  # 2 + 2 verdicts, and the grader_error pass as one row
    for chunk_rows in (1, 2, 500):
        fast = b"".join(csv_chunks(store, rows_per_chunk=chunk_rows)).decode("utf-8")
        assert fast == expected.getvalue()
    written = io.StringIO(newline="")
    assert write_csv(store, written) == rows
    assert written.getvalue() == expected.getvalue()


def test_criteria_rows_carry_run_status_draft_and_grader_errors(store, complete):
    """Each row says how its run ended and what it judged; a broken pass is a row."""
    header, *rows = _csv(store)
    table = [dict(zip(header, row, strict=True)) for row in rows]
    revised = [r for r in table if r["run_id"] == str(complete["revised"])]
    assert [(r["status"], r["run_status"]) for r in revised] == [
        ("needs_revision", "satisfied"),
        ("needs_revision", "satisfied"),
        ("satisfied", "satisfied"),
        ("satisfied", "satisfied"),
    ]
    assert revised[0]["draft"] == "'\u200b@draft, one"
    assert revised[0]["input"] == "' =cmd|' /C calc'!A0"
    assert revised[1]["gap"] == '\'\uff1d"quoted", gap\r\n'
    assert (revised[1]["human_passed"], revised[1]["reviewer"], revised[1]["label_note"]) == (
        "true",
        'ann, "r"',
        "-1",
    )
    (broken,) = [r for r in table if r["run_id"] == str(complete["broken"])]
    assert broken["result"] == broken["run_status"] == "grader_error"
    assert broken["explanation"] == "APITimeoutError: the grader did not answer"
    assert broken["draft"] == "the draft it could not judge"
    for column in ("criterion", "passed", "gap", "weight", "checked_by", "insufficient"):
        assert broken[column] == ""

    satisfied = list(iter_rows(store, status="satisfied"))
    assert {r["run_status"] for r in satisfied} == {"satisfied"}
    (error_row,) = iter_rows(store, status="grader_error")
    assert (error_row["criterion"], error_row["passed"], error_row["insufficient"]) == (
        None,
        None,
        None,
    )
    jsonl = [json.loads(line) for line in b"".join(jsonl_chunks(store)).splitlines()]
    assert len(jsonl) == 5
    assert jsonl[0]["input"] == " =cmd|' /C calc'!A0"  # JSONL is for programs: raw


def test_runs_csv_bytes_match_csv_writer(store, complete):
    text = b"".join(csv_chunks(store, "runs")).decode("utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    again = io.StringIO(newline="")
    csv.writer(again, lineterminator="\r\n").writerows(rows)
    assert again.getvalue() == text
    assert rows[1][EXPORT_COLUMNS["runs"].index("input")] == "' =cmd|' /C calc'!A0"


def test_export_reads_one_snapshot_while_passes_arrive(store, complete, new_run, make_evaluation):
    """A pass recorded while an export streams is either wholly in it or wholly out."""
    chunks = csv_chunks(store, rows_per_chunk=1)
    head = next(chunks)
    late = new_run(store, store.runs.get(complete["revised"])["rubric_version_id"])
    store.passes.record(late, make_evaluation(grading_run_id="g3"))
    text = (head + b"".join(chunks)).decode("utf-8")
    assert len(list(csv.reader(io.StringIO(text, newline="")))) == 1 + 5
    assert len(list(iter_rows(store))) == 5 + 2


HOSTILE_TEXT = [
    "plain",
    "=SUM(A1)",
    'a,"b"',
    "line\nbreak\r\nend",
    "nul\x00inside",
    "\u200b+cmd",
    "\uff1dx",
    "ünï 🚀",
    "-1",
    "-1+1",
    "@x",
    "\tx",
    "'quoted'",
    "#-ok",
]


@pytest.fixture
def hostile(store, new_run, make_evaluation):
    """Runs whose every text cell is one of HOSTILE_TEXT, with labels, code checks,
    insufficient verdicts, scores and timestamps on rounding boundaries."""
    version = store.rubrics.save_version("hostile", "- one\n- two")
    stamps = [1_700_000_000.0000005, 1_700_000_059.9999995, 1_700_000_000.5, 0.0, 86_399.9999996]
    for index, text in enumerate(HOSTILE_TEXT):
        run_id = new_run(store, version["id"], input=text, agent_model=text)
        for iteration in range(2):
            evaluation = make_evaluation(
                grading_run_id=text,
                iteration=iteration,
                explanation=text,
                draft=HOSTILE_TEXT[-1 - index],
                started_at=stamps[(index + iteration) % len(stamps)] + index,
                verdicts=[(f"c{index}", True), (f"{text} x", False, text), ("g", False, "")],
            )
            evaluation["criteria"][1]["checked_by"] = text
            evaluation["criteria"][2]["insufficient"] = True
            evaluation["score"] = [None, 0.25, 1.0][index % 3]
            first = store.passes.record(run_id, evaluation)
            if iteration == 0:
                store.labels.save(first, {f"{text} x": index % 2 == 0}, reviewer=text, note=text)
        store.runs.finish(run_id, RunEnd(status="satisfied" if index % 2 else "failed"))


def test_criteria_csv_bytes_match_the_reference_on_hostile_cells(store, hostile):
    """Every kind of cell (NUL, line breaks, quotes, formulas, look-alikes,
    unicode, labels, code checks) is written as the slow csv.writer path writes it."""
    from tests.support.export_reference import reference_criteria_csv

    expected = io.StringIO(newline="")
    assert reference_criteria_csv(store, expected, RunFilters()) == len(HOSTILE_TEXT) * 2 * 3
    for chunk_rows in (1, 4, 1000):
        fast = b"".join(csv_chunks(store, rows_per_chunk=chunk_rows)).decode("utf-8")
        assert fast == expected.getvalue()
    labelled = [row for row in iter_rows(store) if row["reviewer"] is not None]
    assert len(labelled) == len(HOSTILE_TEXT)


@pytest.mark.parametrize(
    "stamp",
    [
        0.0,
        -1.5,
        0.0000005,
        0.0000015,
        -0.0000005,
        59.9999995,
        86_399.9999996,
        1_700_000_000.123456,
        1_700_000_000.9999995,
        1e9 + 0.5e-6,
        253_402_300_799.0,
        -62_135_596_800.0,
        *(1_700_000_000 + step / 2e6 for step in range(-5, 6)),
    ],
)
def test_iso_timestamps_match_datetime(stamp):
    """`criteria.started_at` is formatted without datetime, rounded as datetime rounds."""
    from rubric_core.export.rows import _iso

    expected = dt.datetime.fromtimestamp(stamp, dt.UTC).isoformat(timespec="microseconds")
    assert _iso(stamp) == expected


def test_iso_timestamps_match_datetime_on_many_values():
    from rubric_core.export.rows import _iso

    rng = random.Random(12)
    for _ in range(20_000):
        stamp = rng.uniform(-6e10, 2.5e11) if rng.random() < 0.5 else 1.7e9 + rng.random() * 1e7
        expected = dt.datetime.fromtimestamp(stamp, dt.UTC).isoformat(timespec="microseconds")
        assert _iso(stamp) == expected


def test_plain_cell_pattern_only_matches_cells_written_as_they_are():
    """`PLAIN_CELL` is csv_cell's shortcut: whatever it matches, neutralising and quoting
    would leave alone."""
    from rubric_core.cells import _NEEDS_QUOTES, PLAIN_CELL

    for code in range(0x110000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        for cell in (chr(code), chr(code) + "x", "a" + chr(code)):
            if PLAIN_CELL.match(cell):
                assert neutralise_cell(cell) == cell
                assert _NEEDS_QUOTES.search(cell) is None
    assert PLAIN_CELL.match("plain text; with: marks!")
    assert not PLAIN_CELL.match("=1")
