"""The Export page's helpers: a preview of the first rows, a telling file name, the bytes
(of the datasets and of the training exports)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from rubric_core.export import (
    DATASETS,
    EXPORT_COLUMNS,
    TRAINING_FORMATS,
    TrainingOptions,
    iter_rows,
    open_export,
    write_training,
)
from rubric_core.ui.format import one_line

if TYPE_CHECKING:
    from rubric_core.store import RunFilters, Store

__all__ = [
    "DATASETS",
    "EXPORT_COLUMNS",
    "TRAINING_FORMATS",
    "TrainingOptions",
    "export_bytes",
    "export_file_name",
    "preview_rows",
    "training_bytes",
]


def preview_rows(
    store: Store, dataset: str, filters: RunFilters, limit: int = 20
) -> list[dict[str, Any]]:
    """The first `limit` rows an export with these filters would write (cells cut to 200 chars)."""
    rows = iter_rows(store, dataset, filters=filters)
    try:
        preview = []
        for row in rows:
            preview.append(
                {k: one_line(v, 200) if isinstance(v, str) else v for k, v in row.items()}
            )
            if len(preview) >= limit:
                break
        return preview
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()


def export_file_name(dataset: str, fmt: str, filters: RunFilters) -> str:
    """A download name that says what is in it: `rubric-studio-criteria-haiku-v3.csv`.

    Examples:
        >>> from rubric_core.store import RunFilters
        >>> export_file_name("runs", "jsonl", RunFilters(rubric="Haiku Poems", status="satisfied"))
        'rubric-studio-runs-haiku-poems-satisfied.jsonl'
    """
    parts = ["rubric-studio", dataset]
    for value in (filters.rubric, filters.status, filters.since, filters.until):
        if value:
            slug = "".join(ch if ch.isalnum() else "-" for ch in str(value).lower()).strip("-")
            parts.append("-".join(p for p in slug.split("-") if p))
    return "-".join(parts) + f".{fmt}"


def export_bytes(store: Store, fmt: str, dataset: str, filters: RunFilters) -> bytes:
    """The whole export as bytes, for `st.download_button(data=lambda: ...)`.

    `export.open_export` spools to a temporary file; Streamlit's deferred download
    accepts only str, bytes or a plain file object, so the spool is read and closed here.
    """
    with open_export(store, fmt, dataset, filters=filters) as spool:
        return spool.read()


def training_bytes(
    store: Store,
    kind: str,
    filters: RunFilters,
    options: TrainingOptions,
    *,
    parquet: bool = False,
) -> bytes:
    """A training export (`sft`, `preference`, `trajectories`) as bytes: JSON Lines or Parquet.

    The same rows as `python -m rubric_core export --format KIND` with the same filters.
    """
    buffer = io.BytesIO()
    write_training(store, buffer, kind, filters, options, parquet=parquet)
    return buffer.getvalue()
