"""Batch throughput against sequential runs: threads and worker processes, replay models with a fixed latency.

Usage:
    python bench/bench_batch.py                          # 32 runs, 50 ms per model call
    python bench/bench_batch.py --runs 64 --repeat 3

What "ideal" means here. A run makes 4 model calls of `latency` each, plus the CPU work
between them (graphs, middleware, store writes, checkpoints). Sequentially, N runs take
`T_seq`. At concurrency c, no executor can beat either bound:

- the latency bound: c runs overlap perfectly, speed-up c (at most N);
- the CPU bound: every core is busy all the time, speed-up `cores * T_seq / T_cpu`,
  where `T_cpu` is the CPU time the sequential runs took (`time.process_time`, all threads).

`ideal = min(c, N, cores * T_seq / T_cpu)`, measured in the same run as the batches. With a
lean run (little CPU per run) the latency bound is the smaller one and ideal is c; a run
heavy in CPU makes a 2-core machine CPU-bound before c = 16. The table gives both the
fraction of this ideal and the plain fraction of c.

Lock waits: the bench wraps the checkpointer's connection lock (`SqliteSaver.lock`, which
serialises every checkpoint of a process) and the store's writes (`SQLiteConnections.write`,
wall time: queueing for the process's writer thread and SQLite's file lock across
processes, plus the write itself) to time them per run, in the driver for threads and in
every worker process for processes. Instrumentation only: the product code is unchanged.
The LangGraph floor (`bench/floor.py`: the run's graph shape, checkpointer and replay
models with nothing of ours: no store, no grading logic) is measured in the same rounds,
sequentially and at each concurrency with both executors' shapes (threads in this
process; `min(cores, c)` fresh processes of c / processes threads each), against its own
sequential time and CPU: what any loop built on these LangGraph steps can reach here.

Steal: on a virtual machine the hypervisor can take CPU from this guest; the seconds of
steal (`/proc/stat`) during each configuration's best round are shown beside it, since a
batch starved of CPU that way is not the executor's doing.
Writes a Markdown table to bench/results/batch.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from floor import build_floor, floor_worker

from rubric_core.batch import Job, RunInputs, run_batch
from rubric_core.batch.processes import _context as _process_context
from rubric_core.runs import RunSpec, run_once
from rubric_core.store import Store
from tests.support.store import replay_template

_SCENARIO = "needs_revision_then_satisfied"
"""Two agent turns and two grader verdicts per run: four model calls, two grading passes."""

_RESULTS = Path(__file__).resolve().parent / "results" / "batch.md"

_STATS_DIR_ENV = "RUBRIC_BENCH_LOCK_STATS"
"""Where worker processes write their lock-wait totals (set by the driver)."""

_STATS: dict[str, float] = defaultdict(float)
_STATS_LOCK = threading.Lock()
_INSTRUMENTED: list[bool] = []


class _TimedLock:
    """A lock that adds the time spent acquiring it to `_STATS[key]`."""

    def __init__(self, lock: Any, key: str) -> None:
        self._lock, self._key = lock, key

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        start = time.perf_counter()
        got = self._lock.acquire(blocking, timeout)
        waited = time.perf_counter() - start
        with _STATS_LOCK:
            _STATS[self._key] += waited
        return bool(got)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _instrument() -> None:
    """Time checkpointer lock waits and store writes in this process (once)."""
    if _INSTRUMENTED:
        return
    _INSTRUMENTED.append(True)
    from rubric_core.runs import checkpoints
    from rubric_core.store.sqlite import connection

    original_open = checkpoints._open_sqlite

    def timed_open(path: str) -> Any:
        saver = original_open(path)
        saver.lock = _TimedLock(saver.lock, "checkpoint_lock_s")  # type: ignore[attr-defined]
        return saver

    checkpoints._open_sqlite = timed_open  # type: ignore[assignment]
    original_write = connection.SQLiteConnections.write

    def timed_write(self: Any, job: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original_write(self, job, **kwargs)
        finally:
            with _STATS_LOCK:
                _STATS["store_write_s"] += time.perf_counter() - start

    connection.SQLiteConnections.write = timed_write  # type: ignore[method-assign]
    stats_dir = os.environ.get(_STATS_DIR_ENV)
    if stats_dir and os.getpid() != int(os.environ.get("RUBRIC_BENCH_DRIVER_PID", "0")):
        import multiprocessing.util

        def dump() -> None:
            with _STATS_LOCK:
                data = dict(_STATS)
            Path(stats_dir, f"{os.getpid()}.json").write_text(json.dumps(data))

        multiprocessing.util.Finalize(None, dump, exitpriority=100)


def bench_models(spec: RunSpec) -> tuple[Any, Any]:
    """The batch's model factory: the models the spec names, with this process instrumented."""
    from rubric_core.runs.agents import resolve_models

    _instrument()
    with _STATS_LOCK:
        _STATS["runs"] += 1
    return resolve_models(spec)


def _collect(stats_dir: Path) -> dict[str, float]:
    """Sum the driver's stats and every worker's, then reset them."""
    total: dict[str, float] = defaultdict(float)
    with _STATS_LOCK:
        for key, value in _STATS.items():
            total[key] += value
        _STATS.clear()
    for file in stats_dir.glob("*.json"):
        for key, value in json.loads(file.read_text()).items():
            total[key] += value
        file.unlink()
    return total


def _template(store: Store, latency_s: float) -> RunSpec:
    return replay_template(store, _SCENARIO, latency_s=latency_s, rubric="bench")


def _sequential(run: Callable[[int], None], runs: int) -> tuple[float, float]:
    """Wall and CPU seconds of `run(0)`, `run(1)`, ... one after the other."""
    started, cpu = time.perf_counter(), time.process_time()
    for n in range(runs):
        run(n)
    return time.perf_counter() - started, time.process_time() - cpu


def _one_run(store: Store, template: RunSpec, inputs: list[str]) -> Callable[[int], None]:
    """`run(n)`: input `n` through `run_once`, which must end satisfied."""

    def run(n: int) -> None:
        result = run_once(store, template.with_input(inputs[n]))
        assert result["status"] == "satisfied", result

    return run


def _batch(
    store: Store, template: RunSpec, inputs: list[str], concurrency: int, executor: str
) -> float:
    started = time.perf_counter()
    work = RunInputs(template, tuple(inputs), model_factory=bench_models)
    summary = run_batch(store, Job(work, concurrency=concurrency, executor=executor))
    elapsed = time.perf_counter() - started
    assert summary.by_status == {"satisfied": len(inputs)}, summary.by_status
    return elapsed


def _steal_s() -> float:
    """Seconds of CPU the hypervisor has taken from this machine since boot (all cores)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def _floor_batch(
    run: Any,
    context: Any,
    path: str,
    runs: int,
    concurrency: int,
    executor: str,
    latency_s: float,
) -> float:
    """A floor batch: `concurrency` threads here, or fresh processes split as `run_batch` does."""
    from concurrent.futures import ThreadPoolExecutor

    from rubric_core.batch.processes import plan_workers

    started = time.perf_counter()
    if executor == "thread":
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(run, range(runs)))
        return time.perf_counter() - started
    plan = plan_workers(concurrency, runs)
    shares = [list(range(runs))[k :: len(plan)] for k in range(len(plan))]
    processes = [
        context.Process(target=floor_worker, args=(path, share, threads, latency_s))
        for share, threads in zip(shares, plan, strict=True)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=600)
        if process.exitcode != 0:
            msg = f"a floor worker process ended with exit code {process.exitcode}"
            raise RuntimeError(msg)
    return time.perf_counter() - started


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    """Measure and write the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=32, help="inputs per measurement")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="latency per model call")
    parser.add_argument("--repeat", type=int, default=3, help="best of N per configuration")
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 4, 8, 16], help="levels to measure"
    )
    parser.add_argument("--output", type=Path, default=_RESULTS)
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="skip the LangGraph floor (bench/floor.py) measured beside each configuration",
    )
    args = parser.parse_args()

    latency_s = args.latency_ms / 1000
    inputs = [f"Summarise release note number {n} in one paragraph." for n in range(args.runs)]
    cpus = os.cpu_count() or 1
    configs = [(c, ex) for c in args.concurrency for ex in ("thread", "process")]
    load_before = _loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        stats_dir = Path(tmp) / "stats"
        stats_dir.mkdir()
        os.environ[_STATS_DIR_ENV] = str(stats_dir)
        os.environ["RUBRIC_BENCH_DRIVER_PID"] = str(os.getpid())
        _instrument()
        store = Store(Path(tmp) / "bench.db")
        try:
            template = _template(store, latency_s)
            run_once(store, template)  # warm-up: imports, graph compilation, checkpoint tables
            _batch(store, template, inputs[:4], 4, "process")  # warm-up: the forkserver's imports
            _collect(stats_dir)
            floor_path = str(Path(tmp) / "floor.checkpoints.sqlite")
            # The floor's process batches use the forkserver the batches above started.
            context = _process_context()
            floor_run = build_floor(floor_path, latency_s) if args.floor else None
            if floor_run is not None:
                floor_run(-1)
                _floor_batch(floor_run, context, floor_path, 4, 4, "process", latency_s)
            sequential: list[tuple[float, float]] = []
            floor_sequential: list[tuple[float, float]] = []
            best: dict[tuple[int, str], float] = {}
            floor_best: dict[tuple[int, str], float] = {}
            steal: dict[tuple[str, int, str], float] = {}
            waits: dict[tuple[int, str], dict[str, float]] = {}
            for _ in range(args.repeat):  # interleaved: every configuration once per round
                sequential.append(_sequential(_one_run(store, template, inputs), len(inputs)))
                if floor_run is not None:
                    floor_sequential.append(_sequential(floor_run, args.runs))
                _collect(stats_dir)
                for config in configs:
                    stolen = _steal_s()
                    elapsed = _batch(store, template, inputs, *config)
                    stolen = _steal_s() - stolen
                    stats = _collect(stats_dir)
                    if config not in best or elapsed < best[config]:
                        best[config], waits[config] = elapsed, stats
                        steal[("ours", *config)] = stolen
                    if floor_run is not None:
                        stolen = _steal_s()
                        elapsed = _floor_batch(
                            floor_run, context, floor_path, args.runs, *config, latency_s
                        )
                        stolen = _steal_s() - stolen
                        if config not in floor_best or elapsed < floor_best[config]:
                            floor_best[config] = elapsed
                            steal[("floor", *config)] = stolen
        finally:
            store.close()
    load_after = _loadavg()

    t_seq, t_cpu = min(sequential)
    calls = 4 * args.runs
    floor = calls * latency_s
    cpu_bound = cpus * t_seq / t_cpu
    lines = [
        "# Batch throughput",
        "",
        f"{args.runs} runs of replay scenario `{_SCENARIO}` (2 agent calls + 2 grader calls per "
        f"run, {args.latency_ms:g} ms sleep per model call, so {floor:.2f} s of pure model "
        f"latency per {args.runs} runs when sequential). Real SQLite store and SQLite "
        f"checkpointer in a temporary directory; best of {args.repeat} interleaved rounds. "
        f"Python {platform.python_version()}, {cpus} CPUs, {platform.machine()}. "
        f"Load (`/proc/loadavg`) before: {load_before}; after: {load_after}.",
        "",
        f"Sequential: {t_seq:.2f} s wall, {t_cpu:.2f} s CPU, so "
        f"{(t_seq - floor) / args.runs * 1000:.0f} ms per run beyond model latency and "
        f"{t_cpu / args.runs * 1000:.0f} ms of CPU per run; CPU bound on {cpus} cores: "
        f"{cpu_bound:.1f}x. Ideal at concurrency c = min(c, {args.runs}, {cpu_bound:.1f}).",
        "",
        "| configuration | wall time (s) | runs/s | speed-up | ideal | of ideal | of c "
        "| checkpointer lock wait per run (ms) | store write time per run (ms) | steal (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| sequential `run_once` | {t_seq:.2f} | {args.runs / t_seq:.1f} | 1.00x | | | | | | |",
    ]
    for (concurrency, executor), seconds in best.items():
        speed = t_seq / seconds
        ideal = min(concurrency, args.runs, cpu_bound)
        stats = waits[(concurrency, executor)]
        runs = max(stats.get("runs", 0.0), 1.0)
        lines.append(
            f"| `run_batch` {executor}, concurrency {concurrency} | {seconds:.2f} | "
            f"{args.runs / seconds:.1f} | {speed:.2f}x | {ideal:.1f}x | {speed / ideal:.2f} | "
            f"{speed / concurrency:.2f} | {stats.get('checkpoint_lock_s', 0.0) / runs * 1000:.1f} | "
            f"{stats.get('store_write_s', 0.0) / runs * 1000:.1f} | "
            f"{steal[('ours', concurrency, executor)]:.2f} |"
        )
    if args.floor:
        f_seq, f_cpu = min(floor_sequential)
        f_bound = cpus * f_seq / f_cpu
        lines += [
            "",
            "The LangGraph floor (`bench/floor.py`: the same graph steps, checkpointer and "
            "replay models, nothing of ours), measured in the same rounds: sequential "
            f"{f_seq:.2f} s wall, {f_cpu / args.runs * 1000:.0f} ms of CPU per run (a run of "
            f"ours: {t_cpu / args.runs * 1000:.0f} ms); CPU bound {f_bound:.1f}x.",
            "",
            "| floor configuration | wall time (s) | speed-up | ideal | of ideal | steal (s) "
            "| ours, of ideal |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for (concurrency, executor), seconds in floor_best.items():
            speed = f_seq / seconds
            ideal = min(concurrency, args.runs, f_bound)
            ours = t_seq / best[(concurrency, executor)] / min(concurrency, args.runs, cpu_bound)
            lines.append(
                f"| floor {executor}, concurrency {concurrency} | {seconds:.2f} | {speed:.2f}x | "
                f"{ideal:.1f}x | {speed / ideal:.2f} | "
                f"{steal[('floor', concurrency, executor)]:.2f} | {ours:.2f} |"
            )
    lines += [
        "",
        "`process`: `min(cores, c)` worker processes with the concurrency split between them "
        "as threads (2 x 8 at c = 16 on 2 cores).",
        "",
        "Reproduce: `python bench/bench_batch.py "
        f"--runs {args.runs} --latency-ms {args.latency_ms:g} --repeat {args.repeat} "
        f"--concurrency {' '.join(str(c) for c in args.concurrency)}"
        f"{'' if args.floor else ' --no-floor'}`.",
        "",
    ]
    text = "\n".join(lines)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
