"""Generate a large synthetic store (default 100,000 passes, 1,000,000 criterion rows) for benchmarks."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlite_utils import Database

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubric_core.store import Store

AGENT_MODELS = ("openai:gpt-4.1-mini", "anthropic:claude-sonnet-4", "ollama:qwen3:8b")
GRADER_MODELS = ("openai:gpt-4.1", "anthropic:claude-opus-4")
_FINAL_STATUSES = ("satisfied", "failed", "grader_error", "max_iterations_reached", "interrupted")
_BATCH_ROWS = 20_000
_SPAN_DAYS = 90


def _iso(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.UTC).isoformat(timespec="microseconds")


def _chunks(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def generate(
    path: str | Path,
    *,
    runs: int = 20_000,
    passes: int = 5,
    criteria: int = 10,
    rubrics: int = 10,
    versions: int = 2,
    messages: int = 6,
    seed: int = 0,
    overwrite: bool = True,
) -> Path:
    """Create a store at `path` holding `runs * passes` passes of `criteria` verdicts each.

    The schema comes from the Store's own migrations; rows are bulk-inserted with
    sqlite-utils in one transaction per table batch. Runs spread over the last
    90 days, across `rubrics * versions` rubric versions, three agent models and
    two grader models; each run has `messages` transcript messages.

    Returns:
        The path of the generated database.
    """
    path = Path(path)
    if path.exists():
        if not overwrite:
            return path
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    Store(path).close()  # migrations
    rng = random.Random(seed)
    db = Database(path)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("PRAGMA cache_size = -200000")
    now = time.time()
    start = now - _SPAN_DAYS * 86_400

    version_ids: list[tuple[int, int, list[str]]] = []
    with db.atomic():
        for r in range(rubrics):
            created = _iso(start)
            rubric_id = r + 1
            db["rubrics"].insert(
                {
                    "id": rubric_id,
                    "name": f"rubric-{r:02d}",
                    "created_at": created,
                    "updated_at": created,
                }
            )
            db["rubric_tags"].insert({"rubric_id": rubric_id, "tag": ("code", "writing")[r % 2]})
            for v in range(versions):
                names = [f"criterion {c + 1} of rubric {r} v{v + 1}" for c in range(criteria)]
                version_id = r * versions + v + 1
                db["rubric_versions"].insert(
                    {
                        "id": version_id,
                        "rubric_id": rubric_id,
                        "version": v + 1,
                        "text": "\n".join(f"- {n}" for n in names),
                        "criteria": json.dumps(names),
                        "note": "",
                        "created_at": created,
                    }
                )
                version_ids.append((version_id, rubric_id, names))

    pass_rate = [rng.uniform(0.3, 0.95) for _ in range(criteria)]
    step = (now - start) / max(runs, 1)

    def run_rows() -> Iterator[dict[str, Any]]:
        for i in range(runs):
            version_id, rubric_id, _ = version_ids[rng.randrange(len(version_ids))]
            started = start + i * step
            duration = passes * 4.0 + rng.random()
            yield {
                "id": i + 1,
                "rubric_id": rubric_id,
                "rubric_version_id": version_id,
                "input": f"Task {i}: write something that meets the rubric.",
                "agent_model": AGENT_MODELS[i % len(AGENT_MODELS)],
                "grader_model": GRADER_MODELS[i % len(GRADER_MODELS)],
                "grader_tools": '["text_stats"]',
                "max_iterations": passes,
                "agent_kind": "deep" if i % 4 == 0 else "basic",
                "thread_id": f"thread-{i}",
                "batch_id": f"batch-{i // 1000}",
                "status": _FINAL_STATUSES[rng.randrange(len(_FINAL_STATUSES))],
                "iterations": passes,
                "last_result": "needs_revision",
                "started_at": _iso(started),
                "finished_at": _iso(started + duration),
                "duration_s": duration,
                "final_output": f"Final answer of run {i}.",
                "agent_input_tokens": rng.randrange(500, 5000),
                "agent_output_tokens": rng.randrange(100, 1000),
                "grader_input_tokens": passes * 800,
                "grader_output_tokens": passes * 120,
                "pid": 1,
                "host": "generator",
            }

    def evaluation_rows() -> Iterator[dict[str, Any]]:
        for i in range(runs):
            started = start + i * step
            for p in range(passes):
                yield {
                    "id": i * passes + p + 1,
                    "run_id": i + 1,
                    "grading_run_id": f"grading-{i}",
                    "iteration": p,
                    "result": "satisfied" if p == passes - 1 and i % 2 else "needs_revision",
                    "status": "needs_revision",
                    "explanation": f"Pass {p}: some criteria still fail.",
                    "draft": f"Draft {p} of run {i}.",
                    "started_at": started + p * 4.0,
                    "duration_s": 1.5,
                    "grader_attempts": 1,
                    "grader_input_tokens": 800,
                    "grader_output_tokens": 120,
                    "recorded_at": _iso(started + p * 4.0 + 1.5),
                }

    run_versions = [0] * runs

    def criterion_rows() -> Iterator[dict[str, Any]]:
        for i in range(runs):
            names = version_ids[run_versions[i] - 1][2]
            for p in range(passes):
                evaluation_id = i * passes + p + 1
                for c, name in enumerate(names):
                    passed = rng.random() < pass_rate[c]
                    yield {
                        "evaluation_id": evaluation_id,
                        "position": c,
                        "run_id": i + 1,
                        "criterion": name,
                        "passed": int(passed),
                        "gap": None if passed else f"Fix {name}.",
                    }

    def message_rows() -> Iterator[dict[str, Any]]:
        roles = ("system", "human", "ai", "tool", "ai", "human")
        for i in range(runs):
            for m in range(messages):
                role = roles[m % len(roles)]
                yield {
                    "run_id": i + 1,
                    "position": m,
                    "role": role,
                    "name": "rubric_grader" if m == 5 else None,
                    "content": f"Message {m} of run {i}.",
                    "is_grader": int(m == 5),
                    "tool_calls": "[]",
                    "tool_call_id": "call-1" if role == "tool" else None,
                }

    def insert(table: str, rows: Iterator[dict[str, Any]]) -> None:
        for batch in _chunks(rows, _BATCH_ROWS):
            with db.atomic():
                db[table].insert_all(batch, batch_size=2_000, alter=False)

    runs_iter = run_rows()

    def recording_runs() -> Iterator[dict[str, Any]]:
        for row in runs_iter:
            run_versions[row["id"] - 1] = row["rubric_version_id"]
            yield row

    insert("runs", recording_runs())
    insert("evaluations", evaluation_rows())
    insert("criterion_results", criterion_rows())
    insert("transcript_messages", message_rows())
    db.execute("ANALYZE")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line: `python bench/generate_store.py bench/.data/store.db --runs 20000`."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", type=Path, help="database file to (re)create")
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=5, help="grading passes per run")
    parser.add_argument("--criteria", type=int, default=10, help="criteria per rubric")
    parser.add_argument("--rubrics", type=int, default=10)
    parser.add_argument("--versions", type=int, default=2, help="versions per rubric")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("runs", "passes", "criteria", "rubrics", "versions"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    began = time.perf_counter()
    generate(
        args.path,
        runs=args.runs,
        passes=args.passes,
        criteria=args.criteria,
        rubrics=args.rubrics,
        versions=args.versions,
        seed=args.seed,
    )
    evaluations = args.runs * args.passes
    print(
        f"{args.path}: {args.runs:,} runs, {evaluations:,} passes, "
        f"{evaluations * args.criteria:,} criterion rows in {time.perf_counter() - began:.1f}s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
