"""Streaming CSV and JSONL exports of the evaluation dataset held in the store.

`columns` (the datasets, formats, columns and request checks), `rows` (the store's reads
shaped into rows), `streams` (CSV and JSON Lines text in chunks), `files` (writing to
open files, paths and spools), `training` (the revision loop as SFT, preference and
trajectory rows for TRL). Everything callers use is importable from here.
"""

from __future__ import annotations

from rubric_core.cells import neutralise_cell
from rubric_core.export.columns import DATASETS, EXPORT_COLUMNS, FORMATS, ExportError
from rubric_core.export.files import export_file, open_export, write_csv, write_jsonl
from rubric_core.export.rows import iter_rows
from rubric_core.export.streams import csv_chunks, jsonl_chunks
from rubric_core.export.training import (
    TRAINING_FORMATS,
    TrainingOptions,
    training_rows,
    write_training,
)

__all__ = [
    "DATASETS",
    "EXPORT_COLUMNS",
    "FORMATS",
    "TRAINING_FORMATS",
    "ExportError",
    "TrainingOptions",
    "csv_chunks",
    "export_file",
    "iter_rows",
    "jsonl_chunks",
    "neutralise_cell",
    "open_export",
    "training_rows",
    "write_csv",
    "write_jsonl",
    "write_training",
]
