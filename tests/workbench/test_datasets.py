"""Tests for rubric_core.workbench.datasets: what a malformed or unusual file is told."""

from __future__ import annotations

import csv

import pytest

from rubric_core.runs.spec import MAX_INPUT_CHARS
from rubric_core.workbench.datasets import (
    DatasetError,
    load_dataset,
    load_graded_upload,
    load_upload,
)


def test_an_unterminated_quote_names_its_line_instead_of_merging_rows():
    data = b'input\nfirst\n"second, never closed\nthird\nfourth\n'
    with pytest.raises(
        DatasetError, match=r"d\.csv: line 3: a quoted field opened on this line is never closed"
    ):
        load_upload("d.csv", data)
    with pytest.raises(
        DatasetError, match=r"g\.csv: line 2: a quoted field opened on this line is never closed"
    ):
        load_graded_upload("g.csv", b'input,output\nq,"a\nq2,a2\n')


def test_a_stray_quote_is_an_error_not_a_silent_rewrite():
    with pytest.raises(
        DatasetError, match=r"line 2: a quote inside a quoted field must be doubled"
    ):
        load_upload("d.csv", b'input\n"a"b"\nnext\n')
    assert load_upload("d.csv", b'input\n"a""b"\n"two\nlines"\n') == ['a"b', "two\nlines"]


def test_a_multiline_row_is_reported_from_its_first_line():
    data = b'input,other\n"one\ntwo",x\n"three\nfour"x,y\n'
    with pytest.raises(DatasetError, match=r"the row starting on line 4: a quote inside"):
        load_upload("d.csv", data)


def test_a_long_field_within_the_input_limit_is_read(tmp_path):
    limit = csv.field_size_limit()
    long_input = "x" * 150_000
    path = tmp_path / "long.csv"
    path.write_text(f'input\n"{long_input}"\nshort\n', encoding="utf-8")
    assert load_dataset(path) == [long_input, "short"]
    too_long = "y" * (MAX_INPUT_CHARS + 1)
    path.write_text(f"input\n{too_long}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"row 2 \(line 2\): input is 200,001 characters"):
        load_dataset(path)
    assert csv.field_size_limit() == limit  # the process-wide limit is put back


def _with_bom(text: str, codec: str) -> bytes:
    """`text` encoded with a byte-order mark (the -le/-be codecs write none themselves)."""
    if codec.endswith(("-le", "-be")):
        text = "\ufeff" + text
    return text.encode(codec)


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_with_a_bom_are_read(codec):
    data = _with_bom("input\nÉcris un haïku 🚀\nsecond\n", codec)
    assert load_upload("d.csv", data) == ["Écris un haïku 🚀", "second"]
    assert load_upload("d.jsonl", _with_bom('{"input": "a"}\n', codec)) == ["a"]


def test_utf16_without_a_bom_is_named_with_how_to_convert():
    data = "input\nhello\n".encode("utf-16-le")
    with pytest.raises(
        DatasetError, match=r"looks like UTF-16 text without a byte-order mark.*iconv"
    ):
        load_upload("d.csv", data)
    with pytest.raises(DatasetError, match="looks like a binary file"):
        load_upload("d.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
