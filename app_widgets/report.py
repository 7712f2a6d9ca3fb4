"""The "Download report" button: one self-contained HTML file, built by the library on click."""

from __future__ import annotations

import html
import re
from typing import Any

import streamlit as st

from rubric_core.errors import InputError
from rubric_core.report.html import report_html
from rubric_core.store import Store
from rubric_core.ui.errors import STORE_ERRORS

__all__ = ["report_download"]


def _file_name(subject: dict[str, Any]) -> str:
    """`report-batch-graded-1a2b.html`, `report-experiment-3-vs-2.html`, `report-run-12.html`."""
    parts = [f"{k.removesuffix('_id')}-{v}" for k, v in subject.items() if v is not None]
    name = "-".join(parts).replace("against-", "vs-")
    return "report-" + re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".html"


def report_download(store: Store, *, key: str, **subject: Any) -> None:
    """A "Download report" button for `batch_id=`, `experiment_id=` (and `against=`) or
    `run_id=`; the report is built only when clicked (`report.html.report_html`)."""

    def build() -> str:
        try:
            return report_html(store, **subject)
        except (InputError, *STORE_ERRORS) as exc:  # the file says why, in one line
            return (
                f"<!DOCTYPE html><title>No report</title><p>No report: {html.escape(str(exc))}</p>"
            )

    st.download_button(
        "Download report",
        data=build,
        file_name=_file_name(subject),
        mime="text/html",
        key=key,
        icon=":material/download:",
        on_click="ignore",
        help="One HTML file that opens offline: the rubric, the figures, the charts and "
        "every input's drafts, verdicts and gaps.",
    )
