"""Rate-limit-aware batches: one budget per endpoint, shared by every run, against a provider
that enforces its limit (`tests/support/fake_provider.py`, loopback, 429 with Retry-After).

The batch tests count what the provider saw (answered requests and 429s), never a time:
under `--rpm` a batch stays within the limit (at most 2 % of its requests refused), while
today's behaviour (no limiter) fires as fast as its concurrency allows and collects 429s.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from rubric_core import config
from rubric_core.cli import cli
from rubric_core.errors import InputError
from rubric_core.providers import resolve_model
from rubric_core.providers.headers import MAX_WAIT_S, rate_headers
from rubric_core.providers.ratelimit import (
    HEADROOM,
    Budget,
    RateBook,
    RateLimit,
    rate_limit_from_env,
    use_book,
)
from rubric_core.runs import RunSpec
from rubric_core.store import Store
from tests.support.fake_provider import RateLimitedProvider
from tests.support.jobs import batch_of, grade_of, regrade_of

RUBRIC = "- has a title\n- cites a source"
RPM = 240
"""The fake provider's limit in the batch tests: 4 requests a second, 4 deep."""


def _share(stats: dict[str, Any]) -> float:
    total = stats["ok"] + stats["throttled"]
    return stats["throttled"] / total if total else 0.0


def _spec(store: Store, base_url: str) -> RunSpec:
    version_id = store.rubrics.save_version("article", RUBRIC)["id"]
    return RunSpec(
        rubric_version_id=version_id,
        input="template",
        agent_model="openai-compatible:fake",
        grader_model="openai-compatible:fake",
        base_url=base_url,
        max_iterations=1,
    )


@pytest.fixture
def store(tmp_path):
    opened = Store(str(tmp_path / "rate.db"))
    yield opened
    opened.close()


# --------------------------------------------------------------------------- the budget


def test_a_budget_paces_requests_at_the_limit_from_the_first_one():
    budget = Budget(RateLimit(rpm=120))
    waits = [budget.reserve(0, now=10.0) for _ in range(4)]
    interval = 0.5 / HEADROOM  # 2 % under the limit
    assert waits == pytest.approx([0.0, interval, 2 * interval, 3 * interval])
    assert budget.reserve(0, now=20.0) == 0.0  # idle time is not banked into a burst


def test_a_budget_books_tokens_and_settles_them_by_the_usage_reported():
    budget = Budget(RateLimit(tpm=612))  # 10 tokens a second at 0.98, a second's worth ahead
    assert budget.reserve(100, now=0.0) == 0.0
    assert budget.reserve(100, now=0.0) == pytest.approx(9.0, rel=1e-3)
    budget.settle(100, 10)  # the first used 10, not 100: 9 s of tokens come back
    assert budget.reserve(10, now=0.0) == pytest.approx(10.0, rel=1e-3)


def test_headers_lower_a_configured_limit_and_set_one_only_when_learning():
    configured = Budget(RateLimit(rpm=600))
    configured.observe(200, {"x-ratelimit-limit-requests": "60"}, now=0.0)
    assert configured.rpm == 60
    configured.observe(200, {"x-ratelimit-limit-requests": "6000"}, now=0.0)
    assert configured.rpm == 600  # the latest header, never above what was configured
    unlearned = Budget(RateLimit(tpm=1000))
    unlearned.observe(200, {"x-ratelimit-limit-requests": "60"}, now=0.0)
    assert unlearned.rpm is None
    learning = Budget(RateLimit(learn=True))
    learning.observe(200, {"x-ratelimit-limit-tokens": "9000"}, now=0.0)
    assert learning.tpm == 9000


def test_a_429_holds_the_endpoint_for_every_caller_for_its_retry_after():
    book = RateBook(RateLimit(rpm=6000))
    book.observe("http://a:1", 429, {"retry-after": "2"})
    assert 1.5 < book.hold("http://a:1") <= 2.0
    assert book.reserve("http://a:1", 0) > 1.5
    assert book.hold("http://b:2") == 0  # another endpoint is not held
    assert book.stats()["http://a:1"]["throttled"] == 1


def test_an_exhausted_budget_holds_until_one_request_frees():
    budget = Budget(RateLimit(rpm=600))
    headers = {
        "x-ratelimit-limit-requests": "60",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "59s",
    }
    budget.observe(200, headers, now=0.0)
    assert budget.hold(now=0.0) == 0  # requests already booked stand
    assert budget.reserve(0, now=0.0) >= 1.0  # new ones start once a request frees


def test_a_learning_budget_sends_one_request_and_waits_for_its_headers():
    budget = Budget(RateLimit(learn=True))
    assert budget.reserve(0, now=0.0) == 0.0  # the probe
    assert budget.reserve(0, now=0.1) < 0  # nothing booked: ask again
    budget.observe(200, {"x-ratelimit-limit-requests": "60"}, now=0.2)
    assert budget.reserve(0, now=0.2) == 0.0
    assert budget.reserve(0, now=0.2) == pytest.approx(1.0 / HEADROOM)


def test_retry_after_reads_milliseconds_seconds_and_dates():
    def wait(headers, now=None):
        return rate_headers(headers, now=now).retry_after_s

    assert wait({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    assert wait({"Retry-After-Ms": "250"}) == 0.25  # any key case, as httpx gives them
    assert wait({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470) == 10
    assert wait({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412490) == 0
    assert wait({"retry-after": "soon"}) is None
    assert wait({"retry-after-ms": "soon", "retry-after": "3"}) == 3


@pytest.mark.parametrize(
    "bad", ["inf", "1e400", "-inf", "nan", "-5", "Fri, 31 Dec 9999 23:59:59 GMT"]
)
def test_absurd_rate_limit_headers_are_ignored_or_capped_never_raised(bad):
    """Guards issue 30: a header is a server's text; `x-ratelimit-limit-requests: 1e400`
    raised OverflowError out of the book (`int(float(...))`), failing the request, and an
    endless `Retry-After` could hold an endpoint without bound. Now a value that is not a
    finite, non-negative number is ignored and an endless wait is cut to MAX_WAIT_S."""
    headers = {
        "retry-after": bad,
        "x-ratelimit-limit-requests": bad,
        "x-ratelimit-remaining-requests": bad,
        "x-ratelimit-reset-requests": bad,
        "x-ratelimit-limit-tokens": bad,
    }
    said = rate_headers(headers, now=0.0)
    assert said.retry_after_s is None or 0 <= said.retry_after_s <= MAX_WAIT_S
    assert not said.limits and not said.remaining
    budget = Budget(RateLimit(rpm=600, learn=True))
    budget.observe(429, headers, now=0.0)
    assert budget.rpm == 600  # no limit learned from it
    assert 0 < budget.hold(now=0.0) <= 120
    assert budget.reserve(0, now=0.0) <= 121


def test_limits_are_checked_and_read_from_the_environment(monkeypatch):
    with pytest.raises(InputError, match="tpm must be between 1 and"):
        RateLimit(tpm=-5)
    monkeypatch.setenv("RUBRIC_STUDIO_RATE_LIMIT_RPM", "300")
    monkeypatch.setenv("RUBRIC_STUDIO_RATE_LIMIT_LEARN", "1")
    assert rate_limit_from_env() == RateLimit(rpm=300, learn=True)
    assert rate_limit_from_env(rpm=60) == RateLimit(rpm=60, learn=True)
    names = {row["name"] for row in config.describe()}
    assert {"RUBRIC_STUDIO_RATE_LIMIT_RPM", "RUBRIC_STUDIO_RATE_LIMIT_TPM"} <= names


# --------------------------------------------------------------------------- the HTTP seam


def test_a_429d_request_is_sent_again_after_the_hold_inside_a_limited_batch():
    with RateLimitedProvider(rpm=60, burst=1, latency_s=0) as fake:
        model = resolve_model("openai-compatible:fake", base_url=fake.base_url)
        model.invoke("first")  # takes the only slot
        book = RateBook(RateLimit(learn=True))
        with use_book(book):
            reply = model.invoke("second")  # 429 with retry-after-ms, held, sent again
        assert "42" in reply.content
        assert fake.stats()["throttled"] == 1
        assert next(iter(book.stats().values()))["throttled"] == 1


def test_outside_a_limited_batch_requests_go_out_as_before():
    with RateLimitedProvider(rpm=60, burst=1, latency_s=0) as fake:
        model = resolve_model("openai-compatible:fake", base_url=fake.base_url)
        model.invoke("first")
        with pytest.raises(Exception, match="429"):
            model.invoke("second")


# --------------------------------------------------------------------------- batches


def test_a_thread_batch_under_its_rpm_stays_within_the_limit_where_today_it_storms(store):
    with RateLimitedProvider(rpm=RPM, latency_s=0.02) as fake:
        spec = _spec(store, fake.base_url)
        inputs = [f"question {n}" for n in range(10)]
        today = batch_of(store, spec, inputs, concurrency=8)
        unlimited = fake.stats()
        fake.reset()
        limited = batch_of(store, spec, inputs, concurrency=8, rate_limit=RateLimit(rpm=RPM))
        paced = fake.stats()
    assert _share(unlimited) > 0.1, unlimited  # 8 at once against 4 deep
    assert today.by_status.get("error", 0) > 0  # an agent's 429 ends its run today
    assert _share(paced) <= 0.02, paced
    assert limited.by_status == {"satisfied": 10}
    assert paced["ok"] == 20  # one agent call and one grading each, nothing wasted


def test_a_batch_learns_its_limit_from_the_providers_headers(store):
    with RateLimitedProvider(rpm=RPM, latency_s=0.02, headers=True) as fake:
        spec = _spec(store, fake.base_url)
        summary = batch_of(
            store,
            spec,
            [f"q{n}" for n in range(8)],
            concurrency=8,
            rate_limit=RateLimit(learn=True),
        )
        seen = fake.stats()
    assert summary.by_status == {"satisfied": 8}
    assert _share(seen) <= 0.02, seen


def test_a_process_batch_shares_one_budget_across_its_worker_processes(store):
    # Two workers of two threads; a budget per worker would send twice the limit.
    with RateLimitedProvider(rpm=RPM, latency_s=0.02) as fake:
        spec = _spec(store, fake.base_url)
        summary = batch_of(
            store,
            spec,
            [f"q{n}" for n in range(12)],
            concurrency=4,
            executor="process",
            rate_limit=RateLimit(rpm=RPM),
        )
        seen = fake.stats()
    assert summary.by_status == {"satisfied": 12}
    assert _share(seen) <= 0.02, seen


def test_grade_and_regrade_draw_on_one_budget_per_call(store):
    rows: list[Any] = [{"input": f"q{n}", "output": "# T\n[1]", "labels": {}} for n in range(8)]
    with RateLimitedProvider(rpm=RPM, latency_s=0.02) as fake:
        version_id = store.rubrics.save_version("article", RUBRIC)["id"]
        graded = grade_of(
            store,
            rows,
            rubric_version_id=version_id,
            grader_model="openai-compatible:fake",
            base_url=fake.base_url,
            max_concurrency=8,
            rate_limit=RateLimit(rpm=RPM),
        )
        regraded = regrade_of(
            store,
            batch_id=graded["batch_id"],
            grader_model="openai-compatible:fake",
            base_url=fake.base_url,
            max_concurrency=8,
            rate_limit=RateLimit(rpm=RPM),
        )
        seen = fake.stats()
    assert graded["by_result"] == {"satisfied": 8}
    assert regraded["items"] == 8 and regraded["errors"] == 0
    assert _share(seen) <= 0.02, seen


# --------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("command", ["batch", "grade", "regrade"])
def test_the_cli_names_a_bad_rate_limit_in_one_line(command, tmp_path):
    argv = {
        "batch": ["batch", "--scenario", "haiku", "--input-file", "x.csv"],
        "grade": ["grade", "--input-file", "x.csv", "--rubric", "r", "--grader", "replay:haiku"],
        "regrade": ["regrade", "--batch", "b", "--grader", "replay:haiku"],
    }[command]
    result = CliRunner().invoke(
        cli, [*argv, "--rpm", "0", "--db", str(tmp_path / "s.db")], catch_exceptions=False
    )
    assert result.exit_code == 2
    assert "--rpm must be between 1 and 100000000 per minute, got 0" in result.output
    assert "Traceback" not in result.output


def test_the_cli_grades_under_a_rate_limit(tmp_path):
    data = tmp_path / "outputs.jsonl"
    data.write_text(
        "\n".join(json.dumps({"input": f"q{n}", "output": "# T\n[1]"}) for n in range(6))
    )
    db = str(tmp_path / "s.db")
    seeded = Store(db)
    seeded.rubrics.save_version("article", RUBRIC)
    seeded.close()
    with RateLimitedProvider(rpm=RPM, latency_s=0.02) as fake:
        argv = ["grade", "--input-file", str(data), "--rubric", "article", "--db", db]
        argv += ["--grader", "openai-compatible:fake", "--concurrency", "6", "--rpm", str(RPM)]
        env = {"RUBRIC_STUDIO_LLM_BASE_URL": fake.base_url}
        result = CliRunner().invoke(cli, argv, env=env, catch_exceptions=False)
        seen = fake.stats()
    assert result.exit_code == 0, result.output
    assert "6 satisfied" in result.output
    assert _share(seen) <= 0.02, seen


def test_a_ray_batch_shares_one_budget_across_its_tasks_on_both_nodes(pg_url, ray_address):
    # Four tasks in flight over two nodes, one budget in an actor: within the limit.
    store = Store(pg_url)
    try:
        with RateLimitedProvider(rpm=RPM, latency_s=0.02) as fake:
            spec = _spec(store, fake.base_url)
            summary = batch_of(
                store,
                spec,
                [f"q{n}" for n in range(12)],
                concurrency=4,
                executor="ray",
                ray_address=ray_address,
                ray_task_cpus=0.5,
                rate_limit=RateLimit(rpm=RPM),
            )
            seen = fake.stats()
    finally:
        store.close()
    assert summary.by_status == {"satisfied": 12}
    assert _share(seen) <= 0.02, seen


# --------------------------------------------------------------------------- the Batch page


@pytest.fixture
def page(tmp_path, monkeypatch):
    """The app on a fresh store in tmp_path, no keys, no base URL; a function of the page."""
    from tests.support.pages import app_env, open_app, open_page

    app_env(tmp_path, monkeypatch)
    return lambda name: open_page(open_app(), name)


def test_the_batch_page_passes_its_rate_limit_fields_to_the_batch(page, monkeypatch):
    import rubric_core.workbench as workbench
    from tests.support.pages import no_exception as _no_exception

    asked: dict[str, Any] = {}
    started = workbench.start_job

    def recording(store: Any, job: Any, **kwargs: Any) -> Any:
        asked["rate_limit"] = job.rate_limit
        return started(store, job, **kwargs)

    monkeypatch.setattr(workbench, "start_job", recording)
    app = page("batch")
    app.selectbox(key="batch_scenario_helper").set_value("satisfied_first_try")
    app.button(key="batch_use_scenario").click().run()
    app.number_input(key="batch_rpm").set_value(600)
    app.checkbox(key="batch_learn_rate_limits").check()
    app.button(key="batch_launch").click().run()
    _no_exception(app)
    assert not app.error, [e.value for e in app.error]
    assert asked["rate_limit"] == RateLimit(rpm=600, learn=True)


def test_the_batch_page_starts_from_the_environments_rate_limit(page, monkeypatch):
    from tests.support.pages import no_exception as _no_exception

    monkeypatch.setenv("RUBRIC_STUDIO_RATE_LIMIT_TPM", "90000")
    app = page("batch")
    app.selectbox(key="batch_scenario_helper").set_value("satisfied_first_try")
    app.button(key="batch_use_scenario").click().run()
    _no_exception(app)
    assert app.number_input(key="batch_tpm").value == 90000
    assert app.number_input(key="batch_rpm").value == 0
