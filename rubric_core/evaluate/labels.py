"""Human labels: the CSV import format, a dataset's `labels` column, and rubric checks."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypedDict

from rubric_core.cells import neutralise_cell
from rubric_core.evaluate._errors import EvaluationError, LabelError
from rubric_core.tables import TableError, csv_rows, decode_table, no_extra_cells

LABEL_COLUMNS: tuple[str, ...] = (
    "run_id",
    "evaluation_id",
    "grading_run_id",
    "iteration",
    "criterion",
    "human_passed",
    "reviewer",
    "label_note",
)
"""The columns a labels CSV may hold, in the order a labels file is written. `criterion`,
`human_passed` and one of `run_id` / `evaluation_id` are required; other columns (the
rest of a criteria export: `passed`, `gap`...) are ignored, so an export imports as is."""

PASS_WORDS: frozenset[str] = frozenset({"true", "1", "yes", "pass"})
"""`human_passed` cells read as a pass (case and surrounding spaces ignored)."""

FAIL_WORDS: frozenset[str] = frozenset({"false", "0", "no", "fail"})
"""`human_passed` cells read as a fail."""

_FIELD_CHARS = 131_072
"""Longest cell of a labels file (the csv module's default limit)."""

_FORMULA_CHARS = frozenset("=+-@\t\r")
_REQUIRED = ("criterion", "human_passed")
_IDS = ("run_id", "evaluation_id")


class LabelRow(TypedDict):
    """One validated human label read from a labels CSV."""

    row: int
    """Its row number as a spreadsheet shows it (the first row, normally the header, is 1)."""

    run_id: int | None
    """The labelled run; without `grading_run_id`/`iteration`, its final pass."""

    evaluation_id: int | None
    """The labelled pass, when the file names it (with `run_id` too, the importer checks
    that the pass belongs to that run)."""

    grading_run_id: str | None
    """With `run_id`: which rubric attempt of the run (as in the criteria export)."""

    iteration: int | None
    """With `run_id`: which pass of the attempt, zero-based (as in the criteria export)."""

    criterion: str
    """The labelled criterion, as written in the file (see `check_label_criteria`)."""

    human_passed: bool
    """The person's verdict."""

    reviewer: str | None
    """Who labelled it: the `reviewer` cell, else the parser's `reviewer` default."""

    label_note: str | None
    """The reviewer's note, if any."""


def parse_human_passed(value: str) -> bool | None:
    """Read a verdict cell: `true/false`, `1/0`, `yes/no`, `pass/fail`; empty is no label.

    Raises:
        EvaluationError: Any other text.

    Examples:
        >>> parse_human_passed(" Yes "), parse_human_passed("FAIL"), parse_human_passed("")
        (True, False, None)
    """
    word = value.strip().casefold()
    if not word:
        return None
    if word in PASS_WORDS:
        return True
    if word in FAIL_WORDS:
        return False
    msg = f"{value.strip()!r} is not a verdict; use true/false, 1/0, yes/no or pass/fail"
    raise EvaluationError(msg)


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


def _plain(cell: str) -> str:
    """Undo the export's spreadsheet-formula guard: `'=x` back to `=x`."""
    if cell[:1] == "'" and neutralise_cell(cell[1:]) == cell:
        cell = cell[1:]  # exactly what `cells.neutralise_cell` added
    cell = cell.strip()
    if cell[:1] == "'" and cell[1:2] in _FORMULA_CHARS:
        cell = cell[1:].strip()
    return cell


def _whole(value: str, where: str, column: str, row: int, *, minimum: int) -> int | None:
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < minimum:
        kind = "a positive whole number" if minimum else "a whole number from 0"
        msg = f"{where}, column {column!r}: {value!r} is not {kind}"
        raise LabelError(msg, row=row, column=column)
    return number


def _header(cells: list[str], source: str, row: int) -> dict[str, int]:
    names = [cell.strip().lstrip("\ufeff").strip().casefold() for cell in cells]
    columns: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in LABEL_COLUMNS:
            if name in columns:
                msg = f"{source}: row {row}: column {name!r} appears twice"
                raise LabelError(msg, row=row, column=name)
            columns[name] = index
    missing = [name for name in _REQUIRED if name not in columns]
    if not any(name in columns for name in _IDS):
        missing.append("run_id or evaluation_id")
    if missing:
        msg = (
            f"{source}: row {row}: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (columns: {', '.join(c.strip() for c in cells) or 'none'})"
        )
        raise LabelError(msg, row=row, column=missing[0])
    return columns


def _label(
    cells: list[str], columns: dict[str, int], row: int, source: str, reviewer: str | None
) -> LabelRow | None:
    def cell(name: str) -> str:
        index = columns.get(name)
        return _plain(cells[index]) if index is not None and index < len(cells) else ""

    where = f"{source}: row {row}"
    try:
        verdict = parse_human_passed(cell("human_passed"))
    except EvaluationError as exc:
        msg = f"{where}, column 'human_passed': {exc}"
        raise LabelError(msg, row=row, column="human_passed") from None
    if verdict is None:
        return None  # an unlabelled row, e.g. of a criteria export nobody reviewed
    run_id = _whole(cell("run_id"), where, "run_id", row, minimum=1)
    evaluation_id = _whole(cell("evaluation_id"), where, "evaluation_id", row, minimum=1)
    if run_id is None and evaluation_id is None:
        msg = f"{where}, column 'run_id': empty; say which run (or evaluation_id) it labels"
        raise LabelError(msg, row=row, column="run_id")
    criterion = cell("criterion")
    if not criterion:
        msg = f"{where}, column 'criterion': empty; name the criterion the label is for"
        raise LabelError(msg, row=row, column="criterion")
    return {
        "row": row,
        "run_id": run_id,
        "evaluation_id": evaluation_id,
        "grading_run_id": cell("grading_run_id") or None,
        "iteration": _whole(cell("iteration"), where, "iteration", row, minimum=0),
        "criterion": criterion,
        "human_passed": verdict,
        "reviewer": cell("reviewer") or reviewer,
        "label_note": cell("label_note") or None,
    }


def decode_labels(data: bytes, *, source: str = "labels") -> str:
    """The text of a labels file's bytes, by the dataset reader's rules: UTF-8 (with or
    without a byte-order mark), or UTF-16 / UTF-32 with one; anything else is a
    `LabelError` naming the offset and line.

    Examples:
        >>> decode_labels("run_id\\n".encode("utf-16"))
        'run_id\\n'
    """
    try:
        return decode_table(source, data)
    except TableError as exc:
        raise LabelError(str(exc)) from exc


def parse_labels_csv(
    text: str | Iterable[str], *, source: str = "labels", reviewer: str | None = None
) -> list[LabelRow]:
    """Read and validate a human-labels CSV (`python -m rubric_core label --input-file F`).

    The header names the columns (any order, any case, see `LABEL_COLUMNS`); a row says
    which pass it labels (`evaluation_id`, or `run_id` optionally narrowed by
    `grading_run_id` and `iteration`), the `criterion` and `human_passed`. A row with an
    empty `human_passed` is not a label and is skipped, so a criteria export with the
    `human_passed` column filled in only where reviewed imports as it is. The export's
    guard against spreadsheet formulas (`'=...`) is undone. The CSV is read by the dataset
    reader's rules (`rubric_core.tables`): strictly, so a quote never closed or a stray
    quote is an error naming its line, and a row with a non-empty cell past the header's
    is one too. Nothing is checked against the store here: whether the runs and criteria
    exist is the importer's business.

    Args:
        text: The file's text (or its lines).
        source: How errors name the file, e.g. its path.
        reviewer: Who labelled rows whose `reviewer` cell is empty (the CLI passes the
            file's name).

    Returns:
        The labelled rows, in file order.

    Raises:
        LabelError: Not CSV, a missing column, a bad cell (the message names the row and
            column), the same pass and criterion labelled twice, or no label at all.

    Examples:
        >>> rows = parse_labels_csv(
        ...     "run_id,criterion,human_passed,label_note\\n"
        ...     "12,has a title,yes,\\n"
        ...     "12,cites a source,,\\n"
        ...     "13,has a title,fail,no heading\\n",
        ...     reviewer="ana",
        ... )
        >>> [(r["row"], r["run_id"], r["human_passed"], r["reviewer"]) for r in rows]
        [(2, 12, True, 'ana'), (4, 13, False, 'ana')]
        >>> try:
        ...     parse_labels_csv("run_id,criterion,human_passed\\n12,has a title,maybe\\n")
        ... except LabelError as exc:
        ...     print(exc)
        labels: row 2, column 'human_passed': 'maybe' is not a verdict; use true/false, 1/0, yes/no or pass/fail
    """
    whole = text if isinstance(text, str) else "".join(text)
    try:
        records = csv_rows(source, whole, field_chars=_FIELD_CHARS)
    except TableError as exc:
        raise LabelError(str(exc)) from exc
    labels: list[LabelRow] = []
    first: dict[tuple[object, ...], int] = {}
    columns: dict[str, int] | None = None
    width = 0
    row = 0
    for line, cells in records:
        row += 1
        if not any(cell.strip() for cell in cells):
            continue  # blank lines before the header or between rows
        if columns is None:
            columns = _header(cells, source, row)
            width = len(cells)
            continue
        try:
            no_extra_cells(source, line, cells, width)
        except TableError as exc:
            raise LabelError(str(exc), row=row) from exc
        label = _label(cells, columns, row, source, reviewer)
        if label is None:
            continue
        key = (
            label["evaluation_id"],
            label["run_id"],
            label["grading_run_id"],
            label["iteration"],
            _key(label["criterion"]),
        )
        if key in first:
            msg = (
                f"{source}: row {row}: labels criterion {label['criterion']!r} of the same "
                f"pass again (first at row {first[key]}); keep one"
            )
            raise LabelError(msg, row=row, column="criterion")
        first[key] = row
        labels.append(label)
    if columns is None:
        msg = (
            f"{source}: is empty; expected a header row with criterion, human_passed and "
            "run_id or evaluation_id"
        )
        raise LabelError(msg)
    if not labels:
        msg = f"{source}: no row has a human_passed verdict; fill it with true or false"
        raise LabelError(msg, column="human_passed")
    return labels


def _no_duplicate_keys(
    where: str, row: int | None
) -> Callable[[list[tuple[str, object]]], dict[str, object]]:
    def hook(items: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in items:
            if key in out:
                msg = f"{where}, column 'labels': criterion {key!r} is labelled twice"
                raise LabelError(msg, row=row, column="labels")
            out[key] = value
        return out

    return hook


def parse_dataset_labels(
    value: object, *, row: int | str, source: str | None = None
) -> dict[str, bool]:
    """Read a dataset row's `labels`: a JSON object from criterion name to true/false.

    In a CSV dataset the cell holds the JSON text; in a JSONL dataset the value may be
    the object itself. An empty cell (or `null`) means the row has no labels.

    Args:
        value: The cell's text, the decoded object, or `None`.
        row: Its row number (an int: `row 3`), or how to name it (`"line 3"`).
        source: The dataset's name, to start the error messages.

    Returns:
        `{criterion: passed}` with names stripped, in the object's order.

    Raises:
        LabelError: Not JSON, not an object, an empty name, a value other than
            `true`/`false` (the message names the row and the criterion).

    Examples:
        >>> parse_dataset_labels('{"has a title": true, "cites a source": false}', row=2)
        {'has a title': True, 'cites a source': False}
        >>> try:
        ...     parse_dataset_labels('{"has a title": "yes"}', row=2)
        ... except LabelError as exc:
        ...     print(exc)
        row 2, column 'labels', criterion 'has a title': expected true or false, got 'yes'
    """
    number = row if isinstance(row, int) else None
    where = f"row {row}" if isinstance(row, int) else str(row)
    if source:
        where = f"{source}: {where}"
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value, object_pairs_hook=_no_duplicate_keys(where, number))
        except json.JSONDecodeError as exc:
            msg = (
                f"{where}, column 'labels': not valid JSON ({exc.msg} at column {exc.colno}); "
                'expected an object like {"criterion": true}'
            )
            raise LabelError(msg, row=number, column="labels") from None
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        msg = (
            f"{where}, column 'labels': expected a JSON object from criterion name to "
            f"true/false, got {type(value).__name__}"
        )
        raise LabelError(msg, row=number, column="labels")
    labels: dict[str, bool] = {}
    for name, passed in value.items():
        criterion = name.strip() if isinstance(name, str) else ""
        if not criterion:
            msg = f"{where}, column 'labels': a criterion name is empty"
            raise LabelError(msg, row=number, column="labels")
        if not isinstance(passed, bool):
            msg = (
                f"{where}, column 'labels', criterion {criterion!r}: expected true or false, "
                f"got {passed!r}"
            )
            raise LabelError(msg, row=number, column="labels")
        if criterion in labels:
            msg = f"{where}, column 'labels': criterion {criterion!r} is labelled twice"
            raise LabelError(msg, row=number, column="labels")
        labels[criterion] = passed
    return labels


def check_label_criteria(
    names: Iterable[str], criteria: Sequence[str], *, rubric: str | None = None
) -> dict[str, str]:
    """Check that labels name only the rubric's criteria; map each to the rubric's spelling.

    Names match ignoring case and runs of white space, nothing looser: a label for a
    criterion the rubric does not have is an error, not a guess.

    Args:
        names: The criteria the labels name.
        criteria: The rubric version's criteria (`parse_rubric` of its text).
        rubric: Its name (`essay@3`), for the message.

    Returns:
        Each given name to the rubric's own spelling of it.

    Raises:
        EvaluationError: Some names are not criteria of the rubric; the message names
            them all and lists the rubric's criteria.

    Examples:
        >>> check_label_criteria(["Has a  title"], ["has a title", "cites a source"])
        {'Has a  title': 'has a title'}
        >>> try:
        ...     check_label_criteria(["rhymes", "has a title"], ["has a title"], rubric="essay@2")
        ... except EvaluationError as exc:
        ...     print(exc)
        labels name a criterion that is not in rubric 'essay@2': 'rhymes' (its criteria: 'has a title')
    """
    known = {_key(name): name for name in criteria}
    given = list(dict.fromkeys(names))
    unknown = [name for name in given if _key(name) not in known]
    if unknown:
        which = f"rubric {rubric!r}" if rubric else "the rubric"
        noun = "a criterion" if len(unknown) == 1 else "criteria"
        verb = "is" if len(unknown) == 1 else "are"
        msg = (
            f"labels name {noun} that {verb} not in {which}: {', '.join(map(repr, unknown))} "
            f"(its criteria: {', '.join(map(repr, criteria)) or 'none'})"
        )
        raise EvaluationError(msg)
    return {name: known[_key(name)] for name in given}
