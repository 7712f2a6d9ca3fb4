"""Benchmark graded-pass write throughput: PostgreSQL against SQLite, 1, 8 and 32 writers.

Each writer thread records `--passes` grading passes (10 criteria each) into its own run,
through the public `Store.passes.record` (each committed before it returns), as the
loop does. Rounds are interleaved (SQLite, PostgreSQL, SQLite, ...) so machine noise hits
both alike; the figure is the median passes/s per backend and their ratio.

    .ci/postgres.sh start /tmp/pg.env && set -a && . /tmp/pg.env && set +a
    python bench/bench_store_backends.py            # writes bench/results/store_backends.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg
from psycopg import sql

from rubric_core.store import NewRun, Store

RESULTS = Path(__file__).resolve().parent / "results" / "store_backends.md"
CRITERIA = [f"criterion {i}" for i in range(10)]


def _evaluation(grading_run_id: str, iteration: int) -> dict[str, object]:
    return {
        "grading_run_id": grading_run_id,
        "iteration": iteration,
        "result": "needs_revision",
        "status": "needs_revision",
        "explanation": "Two criteria still fail." * 4,
        "draft": "A draft answer. " * 40,
        "criteria": [
            {"name": c, "passed": i % 3 != 0, **({"gap": "fix it"} if i % 3 == 0 else {})}
            for i, c in enumerate(CRITERIA)
        ],
        "started_at": time.time(),
        "duration_s": 0.2,
        "grader_attempts": 1,
        "grader_input_tokens": 500,
        "grader_output_tokens": 80,
    }


def _round(store: Store, writers: int, passes: int) -> float:
    """passes/s for `writers` threads each writing `passes` passes into its own run."""
    version = store.rubrics.save_version("bench", "\n".join(f"- {c}" for c in CRITERIA))
    runs = [
        store.runs.create(
            NewRun(
                rubric_version_id=version["id"],
                input=f"input {n}",
                agent_model="replay:x",
                grader_model="replay:x",
                max_iterations=passes,
                agent_kind="basic",
            ),
        )
        for n in range(writers)
    ]
    barrier = threading.Barrier(writers + 1)
    errors: list[BaseException] = []

    def write(run_id: int) -> None:
        grading = uuid.uuid4().hex
        barrier.wait()
        try:
            for i in range(passes):
                store.passes.record(run_id, _evaluation(grading, i))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(r,)) for r in runs]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return writers * passes / elapsed


def _fresh_pg(server: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
    return server.rsplit("/", 1)[0] + "/" + name


def _drop_pg(server: str, url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--passes", type=int, default=25, help="passes per writer per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = os.environ.get("RUBRIC_STUDIO_PG_URL")
    if not server:
        sys.exit("RUBRIC_STUDIO_PG_URL is unset: start a server with .ci/postgres.sh start")
    load_before = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    results: dict[int, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for writers in args.writers:
            measured: dict[str, list[float]] = {"sqlite": [], "postgres": []}
            for r in range(args.rounds):
                for backend in ("sqlite", "postgres"):
                    if backend == "sqlite":
                        target = str(Path(tmp) / f"w{writers}-r{r}.db")
                    else:
                        target = _fresh_pg(server)
                    with Store(target, pool_size=max(8, writers)) as store:
                        measured[backend].append(_round(store, writers, args.passes))
                    if backend == "postgres":
                        _drop_pg(server, target)
            results[writers] = measured
            print(writers, {k: round(statistics.median(v)) for k, v in measured.items()})
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    with psycopg.connect(server) as conn:
        pg_version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    lines = [
        "| writers | SQLite passes/s | PostgreSQL passes/s | PostgreSQL / SQLite |",
        "|---:|---:|---:|---:|",
    ]
    for writers, measured in results.items():
        lite = statistics.median(measured["sqlite"])
        pg = statistics.median(measured["postgres"])
        lines.append(f"| {writers} | {lite:,.0f} | {pg:,.0f} | {pg / lite:.2f} |")
    text = "\n".join(
        [
            f"Command: `python bench/bench_store_backends.py --passes {args.passes} "
            f"--rounds {args.rounds}`; {args.rounds} interleaved rounds, median; each pass "
            "has 10 criteria and is committed before `record_evaluation` returns.",
            f"Python {platform.python_version()}, PostgreSQL {pg_version} on loopback "
            "(same machine, fsync on, synchronous_commit on), SQLite WAL synchronous=FULL.",
            f"Load before: `{load_before}`; after: `{load_after}`.",
            "",
            *lines,
            "",
        ]
    )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
