"""Issue 21's wording findings on the pages (AppTest): one rule each, read as it is meant.

Grade-only runs say no agent revises them; penalties read absent/present; Review and
Agreement open where the labels are; one demo rubric name; batch pass rates over each
run's final pass; experiments as a user expects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from rubric_core.store import Store

APP = Path(__file__).resolve().parent.parent / "app.py"
RUN_TIMEOUT_S = 60


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh database path for the app (RUBRIC_STUDIO_DB), no API keys, no base URL."""
    path = tmp_path / "studio.db"
    monkeypatch.setenv("RUBRIC_STUDIO_DB", str(path))
    monkeypatch.delenv("RUBRIC_STUDIO_LLM_BASE_URL", raising=False)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return path


@pytest.fixture
def app(db_path: Path) -> AppTest:
    """The whole app (frame + Rubrics page), run once."""
    return AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run()


def _page(at: AppTest, page: str, **params: str) -> AppTest:
    for name, value in params.items():
        at.query_params[name] = value
    return at.switch_page(f"app_pages/{page}.py").run()


def _no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _alerts(at: AppTest) -> list[str]:
    return [a.value for kind in ("info", "success", "warning", "error") for a in getattr(at, kind)]


def _graded_run(
    store: Store,
    version_id: int,
    evaluation: dict[str, Any],
    *,
    status: str,
    batch_id: str | None = None,
    agent_kind: str = "graded",
) -> int:
    run_id = store.create_run(
        rubric_version_id=version_id, input="request", agent_model="",
        grader_model="replay:x", max_iterations=1, agent_kind=agent_kind, batch_id=batch_id,
    )  # fmt: skip
    store.record_evaluation(run_id, evaluation)
    store.finish_run(run_id, status=status, final_output=evaluation["draft"])
    return run_id


# ---------------------------------------------------------------- finding 4


def test_runs_page_says_no_agent_revises_a_graded_run(
    app: AppTest, db_path: Path, make_evaluation: Callable[..., dict[str, Any]]
) -> None:
    with Store(db_path) as store:
        version = store.save_rubric_version("essay", "- has a title\n- cites a source")
        run_id = _graded_run(store, version["id"], make_evaluation(), status="needs_revision")
    _page(app, "runs", run=str(run_id))
    _no_exception(app)
    status = next(a for a in _alerts(app) if a.startswith("**needs revision**"))
    assert "agent" not in status
    assert "graded once" in status


# ---------------------------------------------------------------- finding 7


def test_try_it_and_run_scenario_store_the_demo_under_one_rubric(
    app: AppTest, db_path: Path
) -> None:
    from click.testing import CliRunner

    from app_widgets.session import run_registry
    from rubric_core.cli import cli

    app.button(key="rubrics_try").click().run()
    _no_exception(app)
    handle = run_registry().run(app.session_state["run_watch"])
    assert handle is not None
    handle.stop()
    assert handle.wait(RUN_TIMEOUT_S)
    out = CliRunner().invoke(cli, ["run", "--scenario", "haiku", "--quiet", "--db", str(db_path)])
    assert out.exit_code == 0, out.output
    with Store(db_path) as store:
        assert [r["name"] for r in store.list_rubrics()] == ["haiku"]
        assert len(store.rubric_versions("haiku")) == 1
        runs = store.list_runs(rubric="haiku")
        assert len(runs) == 2


# ---------------------------------------------------------------- finding 8


def test_batch_page_pass_rates_are_the_cli_ones_and_name_the_rule(
    app: AppTest, db_path: Path, tmp_path: Path
) -> None:
    import json

    from click.testing import CliRunner

    from rubric_core.batch import PASS_RATE_RULE
    from rubric_core.cli import cli

    inputs = tmp_path / "inputs.csv"
    inputs.write_text("input\nfirst\nsecond\n")
    out = CliRunner().invoke(
        cli,
        ["batch", "--scenario", "needs_revision_then_satisfied", "--input-file", str(inputs),
         "--json", "--db", str(db_path)],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    _page(app, "batch", batch=summary["batch_id"])
    _no_exception(app)
    charts = [json.loads(c.proto.spec) for c in app.get("plotly_chart")]
    rates = next(c for c in charts if c["layout"]["title"]["text"].startswith(PASS_RATE_RULE))
    cli_rates = [
        f"{r['pass_rate']:.0%} ({r['passed']}/{r['total']})"
        for r in summary["criterion_pass_rates"]
    ]
    assert sorted(rates["data"][0]["text"]) == sorted(cli_rates)
