"""What durability costs: NUL escaping on PostgreSQL reads, WAL checkpoints on SQLite writes.

1. PostgreSQL: stream every criterion row of 2,000 passes (20,000 rows) with the NUL
   restore step (`store.postgres.nul.restore_row`) and with it replaced by the identity,
   interleaved; the ratio is the escaping's cost on a long read of text without NULs.
2. SQLite: record passes one at a time with a checkpoint after every commit (the worst
   case of `CHECKPOINT_INTERVAL_S`, which is 30 s by default) and with none, interleaved.

    set -a; . artifacts/pg.env; set +a
    python bench/bench_durability.py            # both; PostgreSQL only with RUBRIC_STUDIO_PG_URL

Timings are medians of interleaved rounds in one process; read the ratios.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubric_core.store import Store
from rubric_core.store.postgres import backend as pg_backend
from rubric_core.store.sqlite import connection
from tests.support.store import make_evaluation, new_run

RUBRIC = "\n".join(f"- criterion {i}" for i in range(10))
VERDICTS = [(f"criterion {i}", i % 3 != 0, f"gap {i} " * 8) for i in range(10)]


def _fill(store: Store, passes: int) -> int:
    version = store.rubrics.save_version("bench", RUBRIC)
    run_id = new_run(store, version["id"])
    grading = uuid.uuid4().hex
    for iteration in range(passes):
        store.passes.record(
            run_id,
            make_evaluation(grading_run_id=grading, iteration=iteration, verdicts=VERDICTS),
        )
    return run_id


def _stream_all(store: Store) -> int:
    count = 0
    for batch in store.stream_rows("SELECT criterion, gap, passed FROM criterion_results"):
        count += len(batch)
    return count


def bench_postgres(url: str, rounds: int = 9) -> dict[str, float]:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE template0")
    target = url.rsplit("/", 1)[0] + f"/{name}"
    try:
        with Store(target) as store:
            _fill(store, 2000)
            real = pg_backend.restore_row
            with_restore: list[float] = []
            without: list[float] = []
            for round_ in range(rounds):  # alternate which goes first
                for variant in ("with", "without")[:: 1 if round_ % 2 else -1]:
                    pg_backend.restore_row = real if variant == "with" else (lambda row: row)
                    start = time.perf_counter()
                    assert _stream_all(store) == 20_000
                    (with_restore if variant == "with" else without).append(
                        time.perf_counter() - start
                    )
            pg_backend.restore_row = real
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    return {
        "with_ms": statistics.median(with_restore) * 1000,
        "without_ms": statistics.median(without) * 1000,
    }


def _record_ms(interval: float, passes: int) -> float:
    connection.CHECKPOINT_INTERVAL_S = interval
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "b.db") as store:
        version = store.rubrics.save_version("bench", RUBRIC)
        run_id = new_run(store, version["id"])
        grading = uuid.uuid4().hex
        times = []
        for iteration in range(passes):
            evaluation = make_evaluation(
                grading_run_id=grading, iteration=iteration, verdicts=VERDICTS
            )
            start = time.perf_counter()
            store.passes.record(run_id, evaluation)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def bench_sqlite(rounds: int = 5, passes: int = 200) -> dict[str, float]:
    every: list[float] = []
    never: list[float] = []
    saved = connection.CHECKPOINT_INTERVAL_S
    try:
        for _ in range(rounds):
            every.append(_record_ms(0.0, passes))
            never.append(_record_ms(math.inf, passes))
    finally:
        connection.CHECKPOINT_INTERVAL_S = saved
    return {"every_ms": statistics.median(every), "never_ms": statistics.median(never)}


def main() -> None:
    print(f"load: {Path('/proc/loadavg').read_text().strip()}")
    results: dict[str, Any] = {}
    url = os.environ.get("RUBRIC_STUDIO_PG_URL", "").strip()
    if url:
        pg = bench_postgres(url)
        results["pg"] = pg
        print(
            f"PostgreSQL, stream 20,000 criterion rows: with NUL restore {pg['with_ms']:.1f} ms, "
            f"without {pg['without_ms']:.1f} ms, ratio {pg['with_ms'] / pg['without_ms']:.3f}"
        )
    sq = bench_sqlite()
    print(
        f"SQLite, record one pass (median of 200, 5 rounds): checkpoint after every commit "
        f"{sq['every_ms']:.2f} ms, never {sq['never_ms']:.2f} ms, "
        f"ratio {sq['every_ms'] / sq['never_ms']:.3f}"
    )
    print(f"load: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
