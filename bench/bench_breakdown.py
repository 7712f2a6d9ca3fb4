"""Where a run's CPU goes: our pieces, LangGraph's own, the model calls, and the other threads.

`run_once` of the runner benchmark's scenario (zero-latency replay models, real SQLite
store and checkpointer), with the pieces below timed by `time.thread_time` on the thread
that calls them, each exclusive of the other timed pieces it calls (so LangGraph's own
share is what `invoke` spends outside our hooks and the model calls). The store's writer
thread is timed by its own CPU clock; "other threads" is the process CPU no timed piece
and no long-lived thread accounts for: the threads LangGraph starts per `invoke` for the
checkpoint writes, and their start. Instrumentation only: the product code is unchanged.

Usage:
    python bench/bench_breakdown.py [--runs 300]
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_SCENARIO = "needs_revision_then_satisfied"
_OWN: defaultdict[str, float] = defaultdict(float)
_CALLS: Counter[str] = Counter()
_LOCAL = threading.local()


def _timed(owner: Any, name: str, label: str) -> None:
    """Replace `owner.name` by a wrapper adding its exclusive thread CPU to `_OWN[label]`."""
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stack = getattr(_LOCAL, "stack", None)
        if stack is None:
            stack = _LOCAL.stack = []
        stack.append(0.0)
        started = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            elapsed = time.thread_time() - started
            nested = stack.pop()
            _OWN[label] += elapsed - nested
            _CALLS[label] += 1
            if stack:
                stack[-1] += elapsed

    setattr(owner, name, wrapper)


def _instrument() -> None:
    from langgraph.pregel.main import Pregel

    import rubric_core.runs as runs
    from rubric_core.grader.direct import DirectGrader
    from rubric_core.grader.subagent import Grader
    from rubric_core.middleware import RubricMiddleware
    from rubric_core.providers.replay import ScenarioReplayChatModel
    from rubric_core.runs import execute
    from rubric_core.store.queries.passes import Passes
    from rubric_core.store.queries.rubrics import Rubrics
    from rubric_core.store.queries.runs import Runs

    pieces: list[tuple[Any, str, str]] = [
        (runs, "run_once", "ours: run_once itself"),
        (execute, "prepare_run", "ours: prepare_run (spec checks, the run's row)"),
        (execute, "execute_run", "ours: execute_run itself"),
        (execute, "store_missing_passes", "ours: store_missing_passes"),
        (RubricMiddleware, "after_agent", "ours: RubricMiddleware.after_agent itself"),
        (Grader, "grade", "ours: Grader.grade itself (payload, alignment)"),
        (DirectGrader, "_call", "ours: DirectGrader._call itself"),
        (Runs, "create", "ours: Store.runs.create"),
        (Passes, "record", "ours: Store.passes.record"),
        (Runs, "finish", "ours: Store.runs.finish"),
        (Runs, "get", "ours: Store.runs.get"),
        (Rubrics, "version", "ours: Store.rubrics.version"),
        (ScenarioReplayChatModel, "invoke", "model calls (LangChain's invoke and the replay)"),
        (Pregel, "invoke", "LangGraph: invoke, outside the pieces above"),
    ]
    for owner, name, label in pieces:
        _timed(owner, name, label)


def _thread_cpu() -> dict[tuple[str, int | None], float]:
    clocks: dict[tuple[str, int | None], float] = {}
    for thread in threading.enumerate():
        if thread.ident is None or thread is threading.main_thread():
            continue
        try:
            clocks[(thread.name, thread.ident)] = time.clock_gettime(
                time.pthread_getcpuclockid(thread.ident)
            )
        except (OSError, ProcessLookupError):
            continue
    return clocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "breakdown.md"
    )
    args = parser.parse_args()
    _instrument()
    import rubric_core.runs as runs
    from rubric_core.providers import load_scenario
    from rubric_core.store import Store

    scenario = load_scenario(_SCENARIO)
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        try:
            version = store.rubrics.save_version("bench", scenario["rubric"])["id"]
            spec = runs.RunSpec(
                rubric_version_id=version,
                input=scenario["input"],
                agent_model=f"replay:{_SCENARIO}",
                grader_model=f"replay:{_SCENARIO}",
                max_iterations=scenario["max_iterations"],
            )
            for n in range(20):  # warm-up
                runs.run_once(store, spec.with_input(f"warm-up {n}"))
            _OWN.clear()
            _CALLS.clear()
            threads_before, cpu = _thread_cpu(), time.process_time()
            for n in range(args.runs):
                assert runs.run_once(store, spec.with_input(f"input {n}"))["status"] == "satisfied"
            cpu = time.process_time() - cpu
            threads_after = _thread_cpu()
        finally:
            store.close()
    load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    per_run = {label: seconds / args.runs * 1e3 for label, seconds in _OWN.items()}
    for key, end in threads_after.items():
        if key in threads_before:
            per_run[f"thread {key[0]}"] = (end - threads_before[key]) / args.runs * 1e3
    total = cpu / args.runs * 1e3
    per_run["other threads (LangGraph's per-invoke checkpoint writers)"] = total - sum(
        per_run.values()
    )
    lines = [
        f"`python bench/bench_breakdown.py --runs {args.runs}`; load before `{load_before}`, "
        f"after `{load_after}`",
        "",
        f"Process CPU per run: **{total:.1f} ms**",
        "",
        "| piece | CPU per run (ms) | calls per run | share |",
        "|---|---:|---:|---:|",
    ]
    for label, ms in sorted(per_run.items(), key=lambda item: -item[1]):
        calls = _CALLS.get(label, 0) / args.runs
        lines.append(
            f"| {label} | {ms:.2f} | {calls:.1f} | {ms / total:.0%} |"
            if calls
            else f"| {label} | {ms:.2f} | | {ms / total:.0%} |"
        )
    ours = sum(ms for label, ms in per_run.items() if label.startswith("ours"))
    writer = sum(ms for label, ms in per_run.items() if label.startswith("thread rubric-store"))
    lines += [
        "",
        f"Ours on the run's thread: {ours:.1f} ms; the store's writer thread: {writer:.1f} ms.",
    ]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
