"""Batch wall time on threads of one process against Ray tasks on the local two-node cluster.

Replay models (`replay:<scenario>`: scripted turns, not language models) with a fixed latency
per call, into one fresh PostgreSQL database for both executors (Ray needs a shared store).
The two executors alternate, so a change in the machine's load hits both; the ratio is the
figure. Needs the servers: `.ci/postgres.sh start S1 && PYTHONPATH=$PWD .ci/ray_cluster.sh
start S2`, then `set -a; . S1; . S2; set +a`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubric_core.batch import Job, RunInputs, run_batch
from rubric_core.runs import RunSpec, run_once
from rubric_core.store import Store
from tests.support.store import replay_template

_SCENARIO = "needs_revision_then_satisfied"
"""Two agent turns and two grader verdicts per run: four model calls, two grading passes."""

_RESULTS = Path(__file__).resolve().parent / "results" / "ray_batch.md"


def _fresh_database(server_url: str) -> tuple[str, str]:
    import psycopg
    from psycopg import sql

    name = f"rubric_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
    return urlunsplit(urlsplit(server_url)._replace(path="/" + name)), name


def _drop_database(server_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server_url, autocommit=True, connect_timeout=10) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _template(store: Store, latency_s: float) -> RunSpec:
    return replay_template(store, _SCENARIO, latency_s=latency_s, rubric="bench")


def _timed(store: Store, template: RunSpec, inputs: list[str], **kwargs: object) -> float:
    started = time.perf_counter()
    summary = run_batch(store, Job(RunInputs(template, tuple(inputs)), **kwargs))  # type: ignore[arg-type]
    elapsed = time.perf_counter() - started
    assert summary.by_status == {"satisfied": len(inputs)}, summary.by_status
    return elapsed


def main() -> None:
    """Measure and write the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="inputs per batch")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="latency per model call")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--concurrency", type=int, default=8, help="runs (or tasks) at once")
    parser.add_argument("--ray-task-cpus", type=float, default=0.25, help="CPUs per Ray task")
    parser.add_argument("--output", type=Path, default=_RESULTS)
    args = parser.parse_args()

    server = os.environ.get("RUBRIC_STUDIO_PG_URL")
    address = os.environ.get("RUBRIC_STUDIO_RAY_ADDRESS")
    if not server or not address:
        sys.exit("set RUBRIC_STUDIO_PG_URL and RUBRIC_STUDIO_RAY_ADDRESS (see the docstring)")
    latency_s = args.latency_ms / 1000
    inputs = [f"Summarise release note number {n} in one paragraph." for n in range(args.runs)]
    ray_kwargs = {
        "executor": "ray",
        "ray_address": address,
        "ray_task_cpus": args.ray_task_cpus,
        "concurrency": args.concurrency,
    }
    url, name = _fresh_database(server)
    times: dict[str, list[float]] = {"thread": [], "ray": []}
    try:
        store = Store(url)
        try:
            template = _template(store, latency_s)
            run_once(store, template)  # warm-up: imports, graph, checkpoint tables
            # Warm-up on Ray: start the worker processes (imports, store pools) of every slot.
            _timed(store, template, inputs[: 2 * args.concurrency], **ray_kwargs)
            for _ in range(args.repeat):
                times["thread"].append(
                    _timed(store, template, inputs, concurrency=args.concurrency)
                )
                times["ray"].append(_timed(store, template, inputs, **ray_kwargs))
        finally:
            store.close()
    finally:
        _drop_database(server, name)

    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    thread_s, ray_s = statistics.median(times["thread"]), statistics.median(times["ray"])
    ratios = ", ".join(f"{r / t:.2f}" for r, t in zip(times["ray"], times["thread"], strict=True))
    floor = 4 * latency_s * args.runs / args.concurrency
    lines = [
        "# Batch executors: threads against Ray",
        "",
        f"{args.runs} runs of replay scenario `{_SCENARIO}` (4 model calls of "
        f"{args.latency_ms:g} ms each per run, so {floor:.2f} s of model latency per batch at "
        f"concurrency {args.concurrency}), one fresh PostgreSQL database for both executors "
        "(store and checkpointer). Thread: `run_batch(concurrency="
        f"{args.concurrency})` in this process. Ray: `executor='ray'`, {args.concurrency} "
        f"tasks in flight at {args.ray_task_cpus:g} CPU each on the two-node loopback cluster "
        "(1 CPU per node), worker processes warmed up first. "
        f"{args.repeat} interleaved rounds, median. Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}.",
        "",
        f"Load at the end: `{load}`",
        "",
        "| executor | median wall time (s) | runs/s | all rounds (s) |",
        "|---|---:|---:|---|",
    ]
    for label, key in (("threads, one process", "thread"), ("Ray, two nodes", "ray")):
        median = statistics.median(times[key])
        rounds = ", ".join(f"{t:.2f}" for t in times[key])
        lines.append(f"| {label} | {median:.2f} | {args.runs / median:.1f} | {rounds} |")
    lines += [
        "",
        f"Ray / threads wall time: **{ray_s / thread_s:.2f}x** (per round: {ratios}).",
        "",
        "Reproduce: `python bench/bench_ray_batch.py` "
        f"(`--runs {args.runs} --latency-ms {args.latency_ms:g} --repeat {args.repeat} "
        f"--concurrency {args.concurrency} --ray-task-cpus {args.ray_task_cpus:g}`).",
        "",
    ]
    text = "\n".join(lines)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
