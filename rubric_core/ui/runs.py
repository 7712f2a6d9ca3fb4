"""Stored runs read for people: table rows, picker labels, durations, settings, transcripts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rubric_core.messages import is_grader_feedback, message_text
from rubric_core.scoring import shown_score
from rubric_core.ui.format import cell, format_timestamp, one_line, rounded, score_cell
from rubric_core.ui.status import status_badge

if TYPE_CHECKING:
    from rubric_core.store import RunFilters, Store

__all__ = [
    "compare_runs_rows",
    "data_version",
    "page_pass_rates",
    "rubric_label",
    "run_label",
    "run_seconds",
    "run_spec_rows",
    "runs_table",
    "transcript_items",
]

Run = Mapping[str, Any]
"""One stored run (`Store.runs.get` / `Store.runs.find` rows)."""

GRADER_SPEAKER = "Grader feedback (injected by the rubric loop)"
"""How the transcript names the turns the rubric loop injected."""

_COMPARED_FIELDS: tuple[tuple[str, str | None], ...] = (
    ("status", "status"),
    ("rubric", None),
    ("agent model", "agent_model"),
    ("grader model", "grader_model"),
    ("grader tools", "grader_tools"),
    ("max iterations", "max_iterations"),
    ("agent kind", "agent_kind"),
    ("passes", "iterations"),
    ("keep", "keep"),
    ("score", "score"),
    ("best pass", "best_iteration"),
    ("regressions", "regression_count"),
    ("seconds", "duration_s"),
    ("grader tokens in", "grader_input_tokens"),
    ("grader tokens out", "grader_output_tokens"),
    ("input", "input"),
)


def rubric_label(run: Run) -> str:
    """The rubric version a run was judged against.

    Examples:
        >>> rubric_label({"rubric": "haiku", "rubric_version": 2})
        'haiku v2'
    """
    return f"{run.get('rubric', '')} v{run.get('rubric_version', '?')}"


def runs_table(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Rows for the runs table: the columns a person scans, with readable values.

    A running run has no score yet: its cell is an em dash (`NO_VALUE`), never `None`; its
    seconds are those since it started.

    Examples:
        >>> runs_table([{"id": 1, "status": "running", "score": None}])[0]["score"]
        '—'
    """
    return [
        {
            "run": run.get("id"),
            "status": status_badge(run.get("status")),
            "rubric": rubric_label(run),
            "passes": run.get("iterations"),
            "score": score_cell(shown_score(run.get("score"))),  # one run: as stored
            "regressions": run.get("regression_count") or 0,
            "agent model": run.get("agent_model"),
            "grader model": run.get("grader_model"),
            "started": format_timestamp(run.get("started_at")),
            "seconds": rounded(run_seconds(run)),
            "input": one_line(run.get("input"), 80),
        }
        for run in runs
    ]


def run_label(run: Run) -> str:
    """How a run appears in pickers: `"#12 · ✅ satisfied · haiku v2 · write a haiku…"`."""
    return (
        f"#{run.get('id')} · {status_badge(run.get('status'))} · "
        f"{rubric_label(run)} · {one_line(run.get('input'), 40)}"
    )


def run_seconds(run: Run, now: dt.datetime | None = None) -> float:
    """A run's duration: stored once it ended, else the time since it started.

    Examples:
        >>> run_seconds({"status": "satisfied", "duration_s": 2.5})
        2.5
        >>> start = "2025-01-01T00:00:00+00:00"
        >>> run_seconds({"status": "running", "started_at": start},
        ...             now=dt.datetime(2025, 1, 1, 0, 0, 3, tzinfo=dt.UTC))
        3.0
    """
    if run.get("status") != "running" and run.get("duration_s") is not None:
        return float(run["duration_s"])
    try:
        started = dt.datetime.fromisoformat(str(run.get("started_at")))
    except ValueError:
        return float(run.get("duration_s") or 0.0)
    if started.tzinfo is None:
        started = started.replace(tzinfo=dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    return max(0.0, (now - started).total_seconds())


def run_spec_rows(run: Run) -> list[dict[str, str]]:
    """The settings a run was started with, as `{setting, value}` rows."""
    agent_in = int(run.get("agent_input_tokens") or 0)
    agent_out = int(run.get("agent_output_tokens") or 0)
    rows = [
        ("rubric", rubric_label(run)),
        ("agent model", run.get("agent_model")),
        ("grader model", run.get("grader_model")),
        ("grader tools", ", ".join(run.get("grader_tools") or []) or "(none)"),
        ("max iterations", run.get("max_iterations")),
        ("agent kind", run.get("agent_kind")),
        ("grader system prompt", one_line(run.get("grader_system_prompt") or "(default)", 200)),
        ("agent system prompt", one_line(run.get("agent_system_prompt") or "(default)", 200)),
        ("started", format_timestamp(run.get("started_at"))),
        ("finished", format_timestamp(run.get("finished_at"))),
        ("batch", run.get("batch_id") or ""),
        ("agent tokens", f"{agent_in:,} in / {agent_out:,} out"),
    ]
    return [{"setting": k, "value": "" if v is None else str(v)} for k, v in rows]


def compare_runs_rows(run_a: Run, run_b: Run) -> list[dict[str, Any]]:
    """Field-by-field rows for two runs side by side, with a marker where they differ."""
    rows = []
    for label, key in _COMPARED_FIELDS:
        if key is None:
            a, b = rubric_label(run_a), rubric_label(run_b)
        else:
            a, b = cell(run_a.get(key)), cell(run_b.get(key))
        rows.append({"field": label, "run A": a, "run B": b, "differs": "≠" if a != b else ""})
    return rows


def transcript_items(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Stored transcript rows as chat items; the grader's injected feedback is labelled as such.

    Returns:
        `{chat, speaker, avatar, is_grader, content, tool_calls}` per message: `chat` is the
        chat-message name (user, assistant, grader, tool, system), `avatar` an emoji or
        `None` for the default, `speaker` "Grader feedback (injected by the rubric loop)"
        for the grader's turns.
    """
    items = []
    for message in messages:
        role = str(message.get("role") or "")
        is_grader = is_grader_feedback(message)
        if is_grader:
            chat, speaker, avatar = "grader", GRADER_SPEAKER, "⚖️"
        elif role in {"human", "user"}:
            chat, speaker, avatar = "user", "User", None
        elif role in {"ai", "assistant"}:
            chat, speaker, avatar = "assistant", "Agent", None
        elif role == "tool":
            name = message.get("name")
            chat, speaker, avatar = "tool", "Tool result" + (f" · {name}" if name else ""), "🛠️"
        elif role == "system":
            chat, speaker, avatar = "system", "System prompt", "⚙️"
        else:
            chat, speaker, avatar = "message", role or "message", "💬"
        items.append(
            {
                "chat": chat,
                "speaker": speaker,
                "avatar": avatar,
                "is_grader": is_grader,
                "content": message_text(message),
                "tool_calls": [
                    f"{c.get('name', '?')}({c.get('args', {})})"
                    if isinstance(c, Mapping)
                    else str(c)
                    for c in message.get("tool_calls") or []
                ],
            }
        )
    return items


def data_version(store: Store) -> tuple[int, int]:
    """`(last run id, last pass id)`: changes whenever a run or a graded pass is added.

    Rows are never deleted and a run's passes only grow, so a result computed over
    the stored passes stays right for as long as this version is unchanged; the
    dashboard caches such results (e.g. pass rates) under it.
    """
    return store.passes.last_ids()


CachedPassRates = Callable[[str, "RunFilters", tuple[int, int]], list[dict[str, Any]]]
"""`cached(store_target, filters, data_version)`: the page's cache around the scan."""


def page_pass_rates(
    store: Store, filters: RunFilters, cached: CachedPassRates
) -> list[dict[str, Any]]:
    """Per-criterion pass rates for a page: from the counts when they serve `filters`, else cached.

    The trigger-kept counts (`store/pass_counts.py`) answer every pass of the whole store,
    a rubric or a version in well under a millisecond and are never stale, so they are
    read on every render, uncached. The filters they cannot serve (model, status, dates,
    batch) scan the matching verdicts, which takes long on a large store: that result
    goes through `cached`, keyed by `data_version`, so it is computed again only after
    a new run or pass.
    """
    from rubric_core.store.pass_counts import served_by_counts

    if served_by_counts(filters):
        return store.passes.criterion_pass_rates(filters=filters)
    return cached(store.target, filters, data_version(store))
