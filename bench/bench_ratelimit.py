"""Batches at a provider's rate limit: throughput as a fraction of the limit, and the 429 share.

The provider is `tests/support/fake_provider.py` in a process of its own: a loopback
OpenAI-compatible endpoint enforcing a token bucket of `--rpm` requests per minute (a
second's worth deep), answering 429 with `Retry-After` beyond it, and sending OpenAI's
`x-ratelimit-*` headers. Each run of a batch makes two requests (the agent's answer and
one grading; `openai-compatible:` models with no client retries, as the CLI builds them).

Per executor, three batches of the same inputs, in this order, the provider's buckets
refilled before each:

- `today`: no limiter, what a batch did before (an agent's 429 ends its run, a grader's
  is retried on its own backoff);
- `--rpm`: the limit given (`RateLimit(rpm=...)`);
- `learned`: nothing given, the limit learned from the headers (`RateLimit(learn=True)`);

and, against a second provider with no practical limit (1000 times as high), `capacity`:
what the executor itself reaches on this machine now, in the same unit (a fraction of the
limit). A batch cannot reach the limit when its capacity is below it (a loaded machine).

Figures: `throughput` = answered requests per minute over the provider's busy window
(first request to last answer), divided by the limit (the bucket's first second of burst
lets a short batch pass 1.0 slightly); `429 share` = refused / all requests the provider
saw; the runs by status. `uptime` is taken beside each batch.

Usage:
    python bench/bench_ratelimit.py                           # threads and processes
    python bench/bench_ratelimit.py --seconds 60 --rpm 600
    python bench/bench_ratelimit.py --executors ray --db postgresql://... --ray-address H:P

Ray needs a PostgreSQL store and the cluster (`.ci/postgres.sh`, `.ci/ray_cluster.sh`).
Writes a Markdown table to bench/results/ratelimit.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubric_core.batch import Job, RunInputs, run_batch
from rubric_core.providers.ratelimit import RateLimit
from rubric_core.runs import RunSpec
from rubric_core.store import Store

ROOT = Path(__file__).resolve().parents[1]
_RESULTS = ROOT / "bench" / "results" / "ratelimit.md"
RUBRIC = "- has a title\n- cites a source"


class Provider:
    """The fake provider in a subprocess: its base URL, its stats, a refill between batches."""

    def __init__(self, rpm: int, latency_s: float) -> None:
        command = [sys.executable, str(ROOT / "tests/support/fake_provider.py"), "--rpm", str(rpm)]
        command += ["--latency", str(latency_s), "--headers"]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None and self.process.stdin is not None
        self.base_url = self.process.stdout.readline().strip()

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.base_url + "/stats", timeout=10) as reply:
            stats: dict[str, Any] = json.loads(reply.read())
            return stats

    def reset(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("reset\n")
        self.process.stdin.flush()
        self.process.stdout.readline()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)


def _load() -> str:
    out = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    return out.strip().split("load average:")[-1].strip()


def measure(
    store: Store,
    provider: Provider,
    spec: RunSpec,
    inputs: list[str],
    limit: RateLimit | None,
    rpm: int,
    **kwargs: Any,
) -> dict[str, Any]:
    provider.reset()
    load_before = _load()
    started = time.perf_counter()
    summary = run_batch(store, Job(RunInputs(spec, tuple(inputs)), rate_limit=limit, **kwargs))
    wall = time.perf_counter() - started
    stats = provider.stats()
    busy = (stats["last"] or 0) - (stats["first"] or 0)
    seen = stats["ok"] + stats["throttled"]
    return {
        "throughput": (stats["ok"] / busy * 60 / rpm) if busy > 0 else 0.0,
        "share": stats["throttled"] / seen if seen else 0.0,
        "ok": stats["ok"],
        "throttled": stats["throttled"],
        "runs": dict(sorted(summary.by_status.items())),
        "wall_s": wall,
        "load": f"{load_before} / {_load()}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=int, default=600, help="the provider's limit")
    parser.add_argument("--seconds", type=float, default=30, help="batch length at the limit")
    parser.add_argument("--latency", type=float, default=0.05, help="the provider's reply time")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--executors", default="thread,process")
    parser.add_argument("--db", default=None, help="the store (default: a temporary SQLite)")
    parser.add_argument("--ray-address", default=os.environ.get("RUBRIC_STUDIO_RAY_ADDRESS"))
    parser.add_argument("--ray-task-cpus", type=float, default=0.25)
    parser.add_argument("--output", type=Path, default=_RESULTS)
    args = parser.parse_args()

    runs = max(4, int(args.seconds * args.rpm / 60 / 2))  # two requests per run
    provider = Provider(args.rpm, args.latency)
    unlimited = Provider(args.rpm * 1000, args.latency)
    rows: list[tuple[str, str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(args.db or str(Path(tmp) / "bench.db"))
        try:
            version_id = store.rubrics.save_version("bench", RUBRIC)["id"]
            spec = RunSpec(
                rubric_version_id=version_id,
                input="warm-up",
                agent_model="openai-compatible:bench",
                grader_model="openai-compatible:bench",
                base_url=provider.base_url,
                max_iterations=1,
            )
            for executor in args.executors.split(","):
                kwargs: dict[str, Any] = {"concurrency": args.concurrency, "executor": executor}
                if executor == "ray":
                    kwargs.update(ray_address=args.ray_address, ray_task_cpus=args.ray_task_cpus)
                # Warm-up: imports, worker processes or Ray workers, the checkpoint tables.
                warm = [f"warm-up {n}" for n in range(min(runs, args.concurrency))]
                measure(store, provider, spec, warm, RateLimit(rpm=args.rpm), args.rpm, **kwargs)
                for mode, limit in (
                    ("today (no limiter)", None),
                    (f"--rpm {args.rpm}", RateLimit(rpm=args.rpm)),
                    ("learned from headers", RateLimit(learn=True)),
                ):
                    inputs = [f"{executor} {mode} question {n}" for n in range(runs)]
                    result = measure(store, provider, spec, inputs, limit, args.rpm, **kwargs)
                    rows.append((executor, mode, result))
                    print(executor, mode, json.dumps(result), flush=True)
                inputs = [f"{executor} capacity question {n}" for n in range(runs)]
                open_spec = dataclasses.replace(spec, base_url=unlimited.base_url)
                result = measure(store, unlimited, open_spec, inputs, None, args.rpm, **kwargs)
                rows.append((executor, "capacity (no limit anywhere)", result))
                print(executor, "capacity", json.dumps(result), flush=True)
        finally:
            store.close()
            provider.close()
            unlimited.close()

    lines = [
        f"Rate-limited batches, {runs} runs (2 requests each) per batch at concurrency "
        f"{args.concurrency}; the provider allows {args.rpm} requests/min (a second's worth "
        f"deep), replies in {args.latency * 1000:g} ms; {platform.machine()}, "
        f"{os.cpu_count()} cores.",
        "",
        "| executor | requests paced by | throughput / limit | 429 share | answered | 429s "
        "| runs | wall s | load (before / after) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for executor, mode, r in rows:
        status = ", ".join(f"{n} {s}" for s, n in r["runs"].items())
        lines.append(
            f"| {executor} | {mode} | {r['throughput']:.2f} | {r['share']:.1%} | {r['ok']} "
            f"| {r['throttled']} | {status} | {r['wall_s']:.1f} | {r['load']} |"
        )
    text = "\n".join(lines) + "\n"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
