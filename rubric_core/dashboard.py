"""Plain functions behind the dashboard pages: filters, paging, model choices, templates, summaries."""

from __future__ import annotations

import datetime as dt
import difflib
import math
import os
import re
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rubric_core.schema import RUBRIC_GRADER_MESSAGE_SOURCE, STATUS_DESCRIPTIONS
from rubric_core.store import RUN_STATUSES  # every status a stored run can have, filter order

RUN_STATUS_DESCRIPTIONS: dict[str, str] = {
    **STATUS_DESCRIPTIONS,
    "running": "The agent is working or the grader is judging; passes appear as they are graded.",
    "interrupted": (
        "The process running it stopped (the dashboard or CLI was closed, or Stop was pressed) "
        "before a verdict; every pass graded until then is kept."
    ),
    "error": (
        "The agent or its model raised before the loop could finish; the error is shown and "
        "every pass graded until then is kept."
    ),
}
"""One sentence per run status: the loop's statuses plus the run-only ones."""

_STATUS_ICONS: dict[str, str] = {
    "running": "⏳",
    "satisfied": "✅",
    "needs_revision": "✏️",
    "failed": "⛔",
    "grader_error": "⚠️",
    "max_iterations_reached": "🔁",
    "interrupted": "⏸️",
    "error": "❌",
}

RUBRIC_TEMPLATES: dict[str, str] = {
    "Code with tests": (
        "- The answer contains one Python function that solves the task\n"
        "- All unit tests pass when the test suite is run\n"
        "- The function has a docstring that states its inputs and output\n"
        "- Empty and invalid inputs are handled without crashing\n"
    ),
    "Haiku": (
        "- The poem has exactly three lines\n"
        "- The lines have 5, 7 and 5 syllables\n"
        "- It names or evokes a season\n"
        "- There is no title and no commentary around the poem\n"
    ),
    "Report sections": (
        "- Starts with a one-line title\n"
        "- Has a section headed Summary\n"
        "- Has a section headed Findings with at least three findings\n"
        "- Has a section headed Recommendations\n"
        "- Each recommendation follows from a finding\n"
    ),
}
"""Starting points on the Rubrics page: one checklist per common kind of task."""

BASE_URL_ENV = "RUBRIC_STUDIO_LLM_BASE_URL"
"""An OpenAI-compatible endpoint (e.g. a local llama.cpp server) offered on the Run page."""

MODEL_ENV = "RUBRIC_STUDIO_LLM_MODEL"
"""The model name to ask that endpoint for (optional)."""

DEFAULT_PAGE_SIZE = 25

ANY = "(any)"
"""The filter choice that means no filter."""


class InputError(ValueError):
    """Something a person typed or picked cannot be used; the message says what and how to fix it."""


# ---------------------------------------------------------------- status badges


def status_badge(status: str | None) -> str:
    """A short label for a run or pass status, e.g. `"✅ satisfied"`.

    Examples:
        >>> status_badge("max_iterations_reached")
        '🔁 max iterations reached'
    """
    name = status or "unknown"
    return f"{_STATUS_ICONS.get(name, '•')} {name.replace('_', ' ')}"


def status_meaning(status: str | None) -> str:
    """What a status means for the person reading it (one sentence)."""
    return RUN_STATUS_DESCRIPTIONS.get(status or "", f"Unknown status {status!r}.")


def status_level(status: str | None) -> str:
    """Which Streamlit alert fits a status: `success`, `info`, `warning` or `error`."""
    if status == "satisfied":
        return "success"
    if status in {"running", "needs_revision"}:
        return "info"
    if status in {"max_iterations_reached", "interrupted"}:
        return "warning"
    return "error"


# ---------------------------------------------------------------- rubrics


def parse_tags(text: str | Iterable[str]) -> list[str]:
    """Tags from a comma-separated string (or a list), trimmed, lower-cased, de-duplicated.

    Examples:
        >>> parse_tags(" Haiku, poetry,, haiku ")
        ['haiku', 'poetry']
    """
    parts = text.split(",") if isinstance(text, str) else list(text)
    tags: list[str] = []
    for part in parts:
        tag = " ".join(str(part).split()).lower()
        if tag and tag not in tags:
            tags.append(tag)
    return tags


def version_label(version: Mapping[str, Any]) -> str:
    """How a rubric version appears in pickers: `"v2 · 2025-01-31 12:00 · tighter title rule"`."""
    parts = [f"v{version['version']}", format_timestamp(version.get("created_at"))]
    note = " ".join(str(version.get("note") or "").split())
    if note:
        parts.append(note[:60])
    return " · ".join(p for p in parts if p)


def version_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """Unified diff between two rubric versions' texts, labelled with their version numbers."""
    lines = difflib.unified_diff(
        str(old.get("text") or "").splitlines(),
        str(new.get("text") or "").splitlines(),
        fromfile=f"{old.get('name', 'rubric')} v{old.get('version', '?')}",
        tofile=f"{new.get('name', 'rubric')} v{new.get('version', '?')}",
        lineterm="",
    )
    return "\n".join(lines)


def criteria_changes(old: Sequence[str], new: Sequence[str]) -> dict[str, list[str]]:
    """Criteria added to and removed from a rubric between two versions.

    Examples:
        >>> criteria_changes(["a", "b"], ["b", "c"])
        {'added': ['c'], 'removed': ['a']}
    """
    old_set, new_set = set(old), set(new)
    return {
        "added": [c for c in new if c not in old_set],
        "removed": [c for c in old if c not in new_set],
    }


def scenario_templates(scenarios: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Rubric templates from the replay scenarios, keyed `"Scenario: <title>"`."""
    return {
        f"Scenario: {s.get('title') or s['name']}": str(s["rubric"])
        for s in scenarios
        if s.get("rubric")
    }


# ---------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelsMode:
    """Whether the dashboard can run real models or only offline replays, for the sidebar."""

    real: bool
    """A provider API key or an OpenAI-compatible base URL is configured."""
    providers: tuple[str, ...]
    """Providers whose API key is set."""
    base_url: str | None
    """The configured OpenAI-compatible endpoint, if any."""
    summary: str
    """One or two sentences saying which it is, plainly."""


def models_mode(key_status: Iterable[Mapping[str, Any]], base_url: str | None = None) -> ModelsMode:
    """Describe which models can run, from `models.api_key_status()` and the base URL.

    Examples:
        >>> models_mode([{"provider": "openai", "configured": False}]).real
        False
        >>> models_mode([{"provider": "openai", "configured": True}]).providers
        ('openai',)
    """
    providers = tuple(str(s["provider"]) for s in key_status if s.get("configured"))
    base_url = (base_url or "").strip() or None
    if providers or base_url:
        found = [f"API key for {', '.join(providers)}"] if providers else []
        if base_url:
            found.append(f"OpenAI-compatible server at {base_url}")
        summary = "Real models: " + "; ".join(found) + ". Replay scenarios stay available offline."
        return ModelsMode(True, providers, base_url, summary)
    summary = (
        "Offline replay: no API key or base URL is configured, so the models replay "
        "scripted responses (no network, no cost; they judge nothing themselves). "
        "Put API keys in .streamlit/secrets.toml to use real models."
    )
    return ModelsMode(False, (), None, summary)


def replay_spec(scenario: str) -> str:
    """The model string for a replay scenario (`"replay:<name>"`)."""
    return f"replay:{scenario}"


MODEL_SOURCES: dict[str, str] = {
    "replay": "Replay scenario (offline)",
    "provider": "Provider model (provider:model-id)",
    "base_url": "OpenAI-compatible server (base URL)",
}
"""The Run page's ways to pick a model, with their labels."""


def model_choice(
    source: str,
    *,
    scenario: str = "",
    provider_string: str = "",
    base_url: str = "",
    base_url_model: str = "",
) -> tuple[str, str | None]:
    """Turn one model picker of the Run page into `(model_spec, base_url)`.

    Args:
        source: `"replay"`, `"provider"` or `"base_url"` (see `MODEL_SOURCES`).
        scenario: The replay scenario's name (source `"replay"`).
        provider_string: `"provider:model-id"` (source `"provider"`).
        base_url: OpenAI-compatible endpoint (source `"base_url"`).
        base_url_model: Model name to request from that endpoint.

    Raises:
        InputError: Naming the missing or malformed field.

    Examples:
        >>> model_choice("replay", scenario="haiku")
        ('replay:haiku', None)
        >>> model_choice("base_url", base_url="http://127.0.0.1:8080/v1", base_url_model="m")
        ('openai-compatible:m', 'http://127.0.0.1:8080/v1')
    """
    if source == "replay":
        if not scenario.strip():
            msg = "pick a replay scenario"
            raise InputError(msg)
        return replay_spec(scenario.strip()), None
    if source == "provider":
        spec = provider_string.strip()
        provider, sep, model_id = spec.partition(":")
        if not sep or not provider.strip() or not model_id.strip():
            msg = (
                f"model {spec!r} is not of the form provider:model-id "
                "(for example openai:gpt-4.1-mini or anthropic:claude-haiku-4-5)"
            )
            raise InputError(msg)
        return spec, None
    if source == "base_url":
        url = base_url.strip()
        if not url.startswith(("http://", "https://")):
            msg = (
                f"base URL {url!r} must start with http:// or https:// "
                "(for example http://127.0.0.1:8080/v1)"
            )
            raise InputError(msg)
        name = base_url_model.strip()
        if not name:
            msg = "name the model to ask the server for (the llama.cpp alias, e.g. smollm2-135m)"
            raise InputError(msg)
        return f"openai-compatible:{name}", url
    msg = f"unknown model source {source!r}; use one of {', '.join(MODEL_SOURCES)}"
    raise InputError(msg)


def combine_models(
    agent: tuple[str, str | None], grader: tuple[str, str | None]
) -> tuple[str, str, str | None]:
    """Merge the agent's and grader's choices into `(agent_spec, grader_spec, base_url)`.

    A run has one base URL for both models (replay models ignore it), so two
    different servers, or a server for one and a provider model for the other,
    cannot be combined; the error says so.

    Examples:
        >>> combine_models(("openai-compatible:m", "http://h/v1"), ("replay:haiku", None))
        ('openai-compatible:m', 'replay:haiku', 'http://h/v1')
    """
    (agent_spec, agent_url), (grader_spec, grader_url) = agent, grader
    urls = {u for u in (agent_url, grader_url) if u}
    if len(urls) > 1:
        msg = "the agent and the grader must use the same base URL (a run has one server)"
        raise InputError(msg)
    base_url = next(iter(urls), None)
    if base_url:
        for role, spec, url in (
            ("agent", agent_spec, agent_url),
            ("grader", grader_spec, grader_url),
        ):
            if not url and not spec.startswith("replay:"):
                msg = (
                    f"the {role} uses {spec!r} while the other model uses the server at "
                    f"{base_url}; a run sends both non-replay models to that server, so pick "
                    f"the server (or a replay scenario) for the {role} too"
                )
                raise InputError(msg)
    return agent_spec, grader_spec, base_url


def replay_scenario_mismatch(
    model_spec: str, scenarios: Iterable[Mapping[str, Any]], criteria: Sequence[str]
) -> str | None:
    """The replay scenario a model plays if its scripted rubric differs from `criteria`, else None.

    Replay graders answer from a script written for their scenario's rubric; pointed at
    another rubric their verdicts name the wrong criteria.

    Examples:
        >>> scenarios = [{"name": "haiku", "rubric": "- three lines"}]
        >>> replay_scenario_mismatch("replay:haiku", scenarios, ["five lines"])
        'haiku'
        >>> replay_scenario_mismatch("replay:haiku", scenarios, ["three lines"]) is None
        True
    """
    from rubric_core.rubric import parse_rubric

    if not model_spec.startswith("replay:"):
        return None
    name = model_spec.removeprefix("replay:").split("?", 1)[0]
    scenario = next((s for s in scenarios if s.get("name") == name), None)
    if scenario is None or parse_rubric(str(scenario.get("rubric") or "")) == list(criteria):
        return None
    return name


def spec_error_hint(message: str) -> str:
    """Add what to do to a run-spec error (missing keys go in `.streamlit/secrets.toml`)."""
    if "API key" in message:
        return (
            f"{message}. Put the key in .streamlit/secrets.toml (see secrets.toml.example) "
            "and restart the dashboard, or choose a replay scenario."
        )
    return message


# ---------------------------------------------------------------- runs: filters and paging


@dataclass(frozen=True)
class RunFilters:
    """The Runs and Export pages' filters, in the form `Store.list_runs` takes."""

    rubric: str | None = None
    version_id: int | None = None
    model: str | None = None
    status: str | None = None
    since: str | None = None
    until: str | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `list_runs`, `count_runs`, `criterion_pass_rates` and export."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def pass_rate_kwargs(self) -> dict[str, Any]:
        """The same filters as `criterion_pass_rates` names them."""
        return self.as_kwargs()


_ANY = {"", "any", "(any)", "all", "(all)"}


def _chosen(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in _ANY:
        return None
    return value


def parse_run_filters(
    *,
    rubric: str | None = None,
    version_id: int | None = None,
    model: str | None = None,
    status: str | None = None,
    since: dt.date | str | None = None,
    until: dt.date | str | None = None,
) -> RunFilters:
    """Validate the filter widgets into a `RunFilters`; "(any)" and blanks mean no filter.

    Dates are whole days in UTC: the store reads `since` from its midnight and
    `until` to the end of its day.

    Raises:
        InputError: An unknown status, a malformed date, or `since` after `until`.

    Examples:
        >>> parse_run_filters(status="(any)", since=dt.date(2025, 1, 2)).as_kwargs()
        {'since': '2025-01-02'}
    """
    status = _chosen(status)
    if status is not None and status not in RUN_STATUSES:
        msg = f"unknown status {status!r}; choose one of {', '.join(RUN_STATUSES)}"
        raise InputError(msg)
    since_day = _as_date(_chosen(since), "since")
    until_day = _as_date(_chosen(until), "until")
    if since_day and until_day and since_day > until_day:
        msg = f"the 'from' date {since_day} is after the 'to' date {until_day}; swap them"
        raise InputError(msg)
    return RunFilters(
        rubric=_chosen(rubric),
        version_id=int(version_id) if _chosen(version_id) is not None else None,
        model=_chosen(model),
        status=status,
        since=since_day.isoformat() if since_day else None,
        until=until_day.isoformat() if until_day else None,
    )


def _as_date(value: dt.date | str | None, which: str) -> dt.date | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value).strip())
    except ValueError:
        msg = f"{which} date {value!r} is not a date; use YYYY-MM-DD"
        raise InputError(msg) from None


def page_count(total: int, page_size: int = DEFAULT_PAGE_SIZE) -> int:
    """How many pages `total` rows fill (at least 1, so an empty table still has page 1).

    Examples:
        >>> page_count(0), page_count(25), page_count(26)
        (1, 1, 2)
    """
    if page_size < 1:
        msg = f"page_size must be at least 1, got {page_size}"
        raise ValueError(msg)
    return max(1, math.ceil(max(0, total) / page_size))


def page_window(page: int, total: int, page_size: int = DEFAULT_PAGE_SIZE) -> tuple[int, int, int]:
    """Clamp a 1-based page number and give `(page, offset, limit)` for the query.

    Examples:
        >>> page_window(9, total=30, page_size=25)
        (2, 25, 25)
    """
    pages = page_count(total, page_size)
    page = min(max(1, int(page)), pages)
    return page, (page - 1) * page_size, page_size


def page_caption(page: int, total: int, page_size: int = DEFAULT_PAGE_SIZE) -> str:
    """`"Runs 26–50 of 120 (page 2 of 5)"`, or `"No runs match these filters"`."""
    if total <= 0:
        return "No runs match these filters"
    page, offset, _ = page_window(page, total, page_size)
    last = min(total, offset + page_size)
    return f"Runs {offset + 1}–{last} of {total:,} (page {page} of {page_count(total, page_size)})"


def format_timestamp(value: Any) -> str:
    """An ISO-8601 (or Unix time) timestamp as `"YYYY-MM-DD HH:MM"` UTC; empty for none."""
    if value in (None, ""):
        return ""
    try:
        if isinstance(value, (int, float)):
            moment = dt.datetime.fromtimestamp(float(value), tz=dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            if moment.tzinfo is not None:
                moment = moment.astimezone(dt.UTC)
    except (ValueError, OverflowError, OSError):
        return str(value)
    return moment.strftime("%Y-%m-%d %H:%M")


def runs_table(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows for the runs table: the columns a person scans, with readable values."""
    table = []
    for run in runs:
        table.append(
            {
                "run": run.get("id"),
                "status": status_badge(run.get("status")),
                "rubric": f"{run.get('rubric', '')} v{run.get('rubric_version', '?')}",
                "passes": run.get("iterations"),
                "agent model": run.get("agent_model"),
                "grader model": run.get("grader_model"),
                "started": format_timestamp(run.get("started_at")),
                "seconds": _round(run.get("duration_s")),
                "input": one_line(run.get("input"), 80),
            }
        )
    return table


def _round(value: Any, digits: int = 2) -> float | None:
    try:
        return round(float(value), digits)
    except (TypeError, ValueError):
        return None


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def md_escape(text: Any) -> str:
    """Backslash-escape Markdown so model or user text shows literally inside an alert or caption.

    Examples:
        >>> print(md_escape("**bold** [x](javascript:y)"))
        \\*\\*bold\\*\\* \\[x\\]\\(javascript\\:y\\)
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(text or "").split()))


def one_line(text: Any, limit: int = 80) -> str:
    """Text on a single line, cut to `limit` characters with an ellipsis."""
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def run_label(run: Mapping[str, Any]) -> str:
    """How a run appears in pickers: `"#12 · ✅ satisfied · haiku v2 · write a haiku…"`."""
    return (
        f"#{run.get('id')} · {status_badge(run.get('status'))} · "
        f"{run.get('rubric', '')} v{run.get('rubric_version', '?')} · {one_line(run.get('input'), 40)}"
    )


# ---------------------------------------------------------------- a run's detail


def pass_details(evaluations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per pass: verdict, loop status, explanation, the failing criteria with their gaps.

    Returns:
        `{label, result, status, explanation, passed, total, gaps: [(criterion, gap)],
        duration_s, grader_tokens}` per pass, oldest first.
    """
    details = []
    for j, evaluation in enumerate(evaluations):
        criteria = evaluation.get("criteria") or []
        gaps = [(c["name"], str(c.get("gap") or "")) for c in criteria if not c.get("passed")]
        details.append(
            {
                "label": f"Pass {j + 1}",
                "result": evaluation.get("result"),
                "status": evaluation.get("status"),
                "explanation": str(evaluation.get("explanation") or ""),
                "passed": sum(1 for c in criteria if c.get("passed")),
                "total": len(criteria),
                "gaps": gaps,
                "duration_s": _round(evaluation.get("duration_s")),
                "grader_tokens": int(evaluation.get("grader_input_tokens") or 0)
                + int(evaluation.get("grader_output_tokens") or 0),
            }
        )
    return details


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
        is_grader = (
            bool(message.get("is_grader")) or message.get("name") == RUBRIC_GRADER_MESSAGE_SOURCE
        )
        if is_grader:
            chat, speaker, avatar = "grader", "Grader feedback (injected by the rubric loop)", "⚖️"
        elif role in {"human", "user"}:
            chat, speaker, avatar = "user", "User", None
        elif role in {"ai", "assistant"}:
            chat, speaker, avatar = "assistant", "Agent", None
        elif role == "tool":
            chat, speaker, avatar = "tool", f"Tool result{_suffix(message.get('name'))}", "🛠️"
        elif role == "system":
            chat, speaker, avatar = "system", "System prompt", "⚙️"
        else:
            chat, speaker, avatar = "message", role or "message", "💬"
        calls = message.get("tool_calls") or []
        items.append(
            {
                "chat": chat,
                "speaker": speaker,
                "avatar": avatar,
                "is_grader": is_grader,
                "content": _content_text(message.get("content")),
                "tool_calls": [
                    f"{c.get('name', '?')}({c.get('args', {})})"
                    if isinstance(c, Mapping)
                    else str(c)
                    for c in calls
                ],
            }
        )
    return items


def _suffix(name: Any) -> str:
    return f" · {name}" if name else ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, Mapping):
                parts.append(str(block.get("text") or block.get("content") or ""))
            else:
                parts.append(str(block))
        return "\n".join(p for p in parts if p)
    return "" if content is None else str(content)


def run_seconds(run: Mapping[str, Any], now: dt.datetime | None = None) -> float:
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


def run_spec_rows(run: Mapping[str, Any]) -> list[dict[str, str]]:
    """The settings a run was started with, as `{setting, value}` rows."""
    rows = [
        ("rubric", f"{run.get('rubric', '')} v{run.get('rubric_version', '?')}"),
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
        (
            "agent tokens",
            f"{int(run.get('agent_input_tokens') or 0):,} in / {int(run.get('agent_output_tokens') or 0):,} out",
        ),
    ]
    return [{"setting": k, "value": "" if v is None else str(v)} for k, v in rows]


def data_version(store: Any) -> tuple[int, int]:
    """`(last run id, last pass id)`: changes whenever a run or a graded pass is added.

    Rows are never deleted and a run's passes only grow, so a result computed over
    the stored passes stays right for as long as this version is unchanged; the
    dashboard caches such results (e.g. pass rates) under it.
    """
    conn = store.connect_readonly()
    try:
        row = conn.execute(
            "SELECT (SELECT COALESCE(MAX(id), 0) FROM runs), "
            "(SELECT COALESCE(MAX(id), 0) FROM evaluations)"
        ).fetchone()
    finally:
        conn.close()
    return int(row[0]), int(row[1])


def known_models(store: Any, limit: int = 200) -> list[str]:
    """Model strings used by stored runs (agent or grader), for the model filter."""
    conn = store.connect_readonly()
    try:
        rows = conn.execute(
            "SELECT agent_model AS m FROM runs UNION SELECT grader_model FROM runs ORDER BY m LIMIT ?",
            (int(limit),),
        ).fetchall()
    finally:
        conn.close()
    return [str(row[0]) for row in rows if row[0]]


def final_verdict_rows(
    evaluations_a: Sequence[Mapping[str, Any]], evaluations_b: Sequence[Mapping[str, Any]]
) -> list[dict[str, str]]:
    """Each criterion's last verdict in two runs: `{criterion, run A, run B}` with ✓, ✗ or –.

    Examples:
        >>> final_verdict_rows([{"criteria": [{"name": "a", "passed": True}]}], [])
        [{'criterion': 'a', 'run A': '✓', 'run B': '–'}]
    """
    verdicts_a, verdicts_b = final_criteria(evaluations_a), final_criteria(evaluations_b)
    marks = {True: "✓", False: "✗"}
    return [
        {
            "criterion": name,
            "run A": marks.get(verdicts_a.get(name), "–"),
            "run B": marks.get(verdicts_b.get(name), "–"),
        }
        for name in dict.fromkeys([*verdicts_a, *verdicts_b])
    ]


def compare_runs_rows(run_a: Mapping[str, Any], run_b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Field-by-field rows for two runs side by side, with a marker where they differ."""
    fields = [
        ("status", "status"),
        ("rubric", None),
        ("agent model", "agent_model"),
        ("grader model", "grader_model"),
        ("grader tools", "grader_tools"),
        ("max iterations", "max_iterations"),
        ("agent kind", "agent_kind"),
        ("passes", "iterations"),
        ("seconds", "duration_s"),
        ("grader tokens in", "grader_input_tokens"),
        ("grader tokens out", "grader_output_tokens"),
        ("input", "input"),
    ]
    rows = []
    for label, key in fields:
        if key is None:
            a = f"{run_a.get('rubric', '')} v{run_a.get('rubric_version', '?')}"
            b = f"{run_b.get('rubric', '')} v{run_b.get('rubric_version', '?')}"
        else:
            a, b = _cell(run_a.get(key)), _cell(run_b.get(key))
        rows.append({"field": label, "run A": a, "run B": b, "differs": "≠" if a != b else ""})
    return rows


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return one_line(value, 120) if value is not None else ""


def final_criteria(evaluations: Sequence[Mapping[str, Any]]) -> dict[str, bool | None]:
    """The last judged verdict of each criterion across a run's passes."""
    verdicts: dict[str, bool | None] = {}
    for evaluation in evaluations:
        for criterion in evaluation.get("criteria") or []:
            verdicts[criterion["name"]] = bool(criterion.get("passed"))
    return verdicts


# ---------------------------------------------------------------- batches


def summarize_runs(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A batch's summary from its stored runs.

    Returns:
        `{total, finished, running, satisfied, satisfied_rate, status_counts,
        iterations_to_satisfied: list[int], grader_errors: [{run, error}]}`;
        `satisfied_rate` is over finished runs (0.0 when none finished).
    """
    counts = Counter(str(r.get("status")) for r in runs)
    finished = sum(n for s, n in counts.items() if s != "running")
    satisfied = counts.get("satisfied", 0)
    return {
        "total": len(runs),
        "finished": finished,
        "running": counts.get("running", 0),
        "satisfied": satisfied,
        "satisfied_rate": satisfied / finished if finished else 0.0,
        "status_counts": dict(sorted(counts.items())),
        "iterations_to_satisfied": sorted(
            int(r.get("iterations") or 0) for r in runs if r.get("status") == "satisfied"
        ),
        "grader_errors": [
            {
                "run": r.get("id"),
                "error": one_line(r.get("error") or r.get("final_output") or "", 200),
            }
            for r in runs
            if r.get("status") == "grader_error"
        ],
    }


def expand_counts(counts: Mapping[int, int]) -> list[int]:
    """`{passes: runs}` back to one value per run, for a histogram.

    Examples:
        >>> expand_counts({1: 2, 3: 1})
        [1, 1, 3]
    """
    return [value for value, count in sorted(counts.items()) for _ in range(int(count))]


def progress(done: int, total: int) -> tuple[float, str]:
    """Progress-bar value and text: `(0.4, "2 of 5 inputs finished")`."""
    if total <= 0:
        return 0.0, "No inputs"
    done = min(max(0, done), total)
    return done / total, f"{done} of {total} inputs finished"


def load_uploaded_dataset(file_name: str, data: bytes) -> list[str]:
    """Read an uploaded CSV/JSONL dataset into inputs via `runner.load_dataset`.

    The upload is written to a temporary file with the same suffix so that the
    runner's loader (and its row-numbered errors) applies unchanged.

    Raises:
        InputError: The file type is not CSV or JSONL, or the runner rejected the file
            (the message names the file and the row).
    """
    from rubric_core.runner import DatasetError, load_dataset

    suffix = Path(file_name).suffix.lower()
    if suffix not in {".csv", ".jsonl", ".json", ".ndjson"}:
        msg = f"{file_name}: upload a .csv (with an 'input' column) or a .jsonl file ({{\"input\": ...}} per line)"
        raise InputError(msg)
    with tempfile.TemporaryDirectory(prefix="rubric-studio-upload-") as folder:
        path = Path(folder) / (Path(file_name).name or f"dataset{suffix}")
        path.write_bytes(data)
        try:
            inputs = load_dataset(path)
        except DatasetError as exc:
            raise InputError(str(exc).replace(str(path), file_name)) from exc
    if not inputs:
        msg = f"{file_name} holds no inputs; add rows with an 'input' value"
        raise InputError(msg)
    return inputs


# ---------------------------------------------------------------- store faults


def store_error_message(exc: BaseException, path: str | os.PathLike[str]) -> str:
    """Say what went wrong with the database file and what to do about it.

    Covers the faults a person can fix: a read-only file or folder, a file locked
    by another writer, a file deleted or moved while the dashboard is open.

    Examples:
        >>> store_error_message(OSError("attempt to write a readonly database"), "x.db")[:40]
        'The database x.db is read-only, so nothi'
    """
    text = f"{type(exc).__name__}: {exc}"
    lowered = text.lower()
    if any(word in lowered for word in ("readonly", "read-only", "permission denied")):
        return (
            f"The database {path} is read-only, so nothing can be saved ({text}). "
            "Make the file and its folder writable (e.g. chmod u+w), or set RUBRIC_STUDIO_DB "
            "to a writable path, then reload the page. Stored runs are unchanged."
        )
    if any(word in lowered for word in ("locked", "busy")):
        return (
            f"The database {path} is locked by another process ({text}). Wait for that "
            "writer (another dashboard, CLI or batch) to finish, or stop it, then retry. "
            "Nothing stored was lost."
        )
    if any(
        word in lowered
        for word in ("no such file", "deleted", "does not exist", "unable to open", "disk i/o")
    ):
        return (
            f"The database {path} cannot be opened: it was deleted or moved while the "
            f"dashboard was open ({text}). Put the file back, or start a new empty "
            "database at that path, then reload the page."
        )
    return (
        f"The database {path} failed: {text}. Check the file (disk space, permissions), "
        "then reload the page; stored rows are kept."
    )


# ---------------------------------------------------------------- background work


class RunRegistry:
    """Run handles and batch jobs of this process, keyed by id; shared by every session.

    The dashboard holds one in `st.cache_resource`, so a run keeps its handle (and its
    Stop button) when the person switches page or reloads. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[int, Any] = {}
        self._batches: dict[str, BatchJob] = {}

    def add_run(self, handle: Any) -> None:
        """Keep a `RunHandle` under its `run_id`."""
        with self._lock:
            self._runs[int(handle.run_id)] = handle

    def run(self, run_id: int | None) -> Any | None:
        """The handle of `run_id` if this process started it, else `None`."""
        if run_id is None:
            return None
        with self._lock:
            return self._runs.get(int(run_id))

    def active_runs(self) -> list[int]:
        """Ids of runs started here that have not finished, newest first."""
        with self._lock:
            return sorted((i for i, h in self._runs.items() if not h.done()), reverse=True)

    def add_batch(self, job: BatchJob) -> None:
        """Keep a batch job under its `batch_id`."""
        with self._lock:
            self._batches[job.batch_id] = job

    def batch(self, batch_id: str | None) -> BatchJob | None:
        """The job of `batch_id` if this process started it, else `None`."""
        if batch_id is None:
            return None
        with self._lock:
            return self._batches.get(batch_id)


@dataclass
class BatchJob:
    """A batch running on a background thread; progress is read from the store."""

    batch_id: str
    total: int
    stop_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    error: str | None = None
    """Why the batch stopped early, if it raised."""

    def done(self) -> bool:
        """Whether the batch thread has finished."""
        return self.thread is not None and not self.thread.is_alive()

    def stop(self) -> None:
        """Stop the running runs (they end `interrupted`) and start no more."""
        self.stop_event.set()


def start_batch(store: Any, spec: Any, inputs: Sequence[str], *, concurrency: int) -> BatchJob:
    """Validate a batch, then run it on a background thread; returns at once.

    The spec and every input are checked before anything starts, so a bad row or a
    missing API key is reported here (as `SpecError`) rather than from the thread.
    """
    from rubric_core.runner import MAX_CONCURRENCY, SpecError, run_batch, validate_spec

    if not 1 <= int(concurrency) <= MAX_CONCURRENCY:
        raise SpecError(
            "concurrency", f"must be between 1 and {MAX_CONCURRENCY}, got {concurrency}"
        )
    if not inputs:
        raise SpecError("inputs", "the dataset has no inputs")
    validate_spec(spec.with_input(inputs[0]), store)
    job = BatchJob(batch_id=f"batch-{uuid.uuid4().hex[:16]}", total=len(inputs))

    def work() -> None:
        try:
            run_batch(
                store,
                spec,
                list(inputs),
                concurrency=int(concurrency),
                stop_event=job.stop_event,
                batch_id=job.batch_id,
            )
        except Exception as exc:  # shown on the Batch page; runs stored so far are kept
            job.error = f"{type(exc).__name__}: {exc}"

    job.thread = threading.Thread(target=work, name=f"rubric-{job.batch_id}", daemon=True)
    job.thread.start()
    return job


def batch_progress(store: Any, batch_id: str, total: int) -> tuple[int, int]:
    """`(finished, started)` runs of a batch, counted in the store."""
    started = int(store.count_runs(batch_id=batch_id))
    running = int(store.count_runs(batch_id=batch_id, status="running"))
    return started - running, started


# ---------------------------------------------------------------- export


def preview_rows(
    store: Any, dataset: str, filters: RunFilters, limit: int = 20
) -> list[dict[str, Any]]:
    """The first `limit` rows an export with these filters would write (cells cut to 200 chars)."""
    from rubric_core.export import iter_rows

    rows = iter_rows(store, dataset, **filters.as_kwargs())
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
        >>> export_file_name("runs", "jsonl", RunFilters(rubric="Haiku Poems", status="satisfied"))
        'rubric-studio-runs-haiku-poems-satisfied.jsonl'
    """
    parts = ["rubric-studio", dataset]
    for value in (filters.rubric, filters.status, filters.since, filters.until):
        if value:
            slug = "".join(ch if ch.isalnum() else "-" for ch in str(value).lower()).strip("-")
            parts.append("-".join(p for p in slug.split("-") if p))
    return "-".join(parts) + f".{fmt}"


def export_bytes(store: Any, fmt: str, dataset: str, filters: RunFilters) -> bytes:
    """The whole export as bytes, for `st.download_button(data=lambda: ...)`.

    `export.open_export` spools to a temporary file; Streamlit's deferred download
    accepts only str, bytes or a plain file object, so the spool is read and closed here.
    """
    from rubric_core.export import open_export

    with open_export(store, fmt, dataset, **filters.as_kwargs()) as spool:
        return spool.read()
