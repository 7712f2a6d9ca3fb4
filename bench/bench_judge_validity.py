"""Valid verdicts from a weak judge: SmolLM2-135M on llama.cpp grading tasks of known truth.

Only the judge is a model: every task's answer is scripted, and each task's rubric has
2-3 criteria whose true pass/fail is known. Each pass is one `grade_transcript` (the
grade-only path: `max_iterations=1`, no revision) of `RubricMiddleware(model=ChatOpenAI(...))`
against the project's llama.cpp server (`.ci/llm_server.sh start STATE`, then source STATE).

BEFORE is the code at `git merge-base HEAD main`, checked out into a temporary `git
worktree` that is removed at the end; AFTER is this tree. Each runs in a worker process of
its own (the tree first on `sys.path`), and the two grade the same task one after the
other, task by task, the side going first alternating, so both see the same load
(`os.getloadavg` is read at every pass).

A pass's verdict is valid when it is not `grader_error` and has exactly one verdict per
criterion under the rubric's names (a criterion the judge skipped is not a verdict).
Accuracy counts every criterion of every pass, a missing verdict as wrong.

    . .venv/bin/activate && .ci/llm_server.sh start /tmp/llm.env && set -a && . /tmp/llm.env
    python bench/bench_judge_validity.py --repeats 3 --budget-min 25
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
_RESULTS = _ROOT / "bench" / "results" / "judge_validity.md"
_CALL_TIMEOUT_S = 120.0
"""Longest single grader call (the client's timeout; a verdict took up to 88 s at load 12)."""
_PASS_BUDGET_S = 300.0
"""Longest pass, corrections included (where the middleware takes `grader_budget_s`)."""


@dataclass(frozen=True)
class Task:
    """An input, the scripted answer, and the rubric's criteria with their true verdicts."""

    input: str
    answer: str
    truth: dict[str, bool]

    @property
    def rubric(self) -> str:
        return "\n".join(f"- {name}" for name in self.truth)


TASKS: tuple[Task, ...] = (
    Task(
        "What is the capital of France?",
        "The capital of France is Paris.",
        {"Names Paris as the capital": True, "Mentions the population of Paris": False},
    ),
    Task(
        "What is 2 + 2? Show your working.",
        "2 + 2 = 5.",
        {"Gives the correct answer, 4": False, "Writes the sum as an equation": True},
    ),
    Task(
        "Translate 'hello' into Spanish.",
        "Hola.",
        {"Gives the Spanish word 'hola'": True, "Explains how to pronounce it": False},
    ),
    Task(
        "List three fruits.",
        "Apple, banana.",
        {"Lists exactly three items": False, "Every item listed is a fruit": True},
    ),
    Task(
        "Write a Python function that returns the square of a number.",
        "def square(x):\n    return x * x",
        {
            "Defines a function named square": True,
            "The function has a docstring": False,
            "Returns the number multiplied by itself": True,
        },
    ),
    Task(
        "Summarise: the meeting moved from Thursday to Friday at 3 pm.",
        "The meeting is now on Friday at 3 pm.",
        {"States the new day, Friday": True, "States the time, 3 pm": True},
    ),
    Task(
        "At what temperature does water boil at sea level, in Celsius?",
        "Water boils at 90 degrees Celsius at sea level.",
        {"States 100 degrees Celsius": False, "Mentions sea level": True},
    ),
    Task(
        "Write a haiku about autumn.",
        "Red leaves drift and fall\nCold wind hums through empty trees\nAutumn says goodbye",
        {
            "Has exactly three lines": True,
            "Mentions autumn or falling leaves": True,
            "Every line rhymes": False,
        },
    ),
)


# -- the worker: one tree's rubric_core, one pass per request line -------------------------


def _worker(tree: str) -> None:
    sys.path.insert(0, tree)
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_openai import ChatOpenAI

    import rubric_core
    from rubric_core.middleware import RubricMiddleware

    try:  # this tree: one pass is the pass pipeline's
        from rubric_core.pipeline import PassLimits, PassPipeline
    except ImportError:  # the tree before issue 30: the middleware graded one pass itself
        PassPipeline = None
    grader = ChatOpenAI(
        base_url=os.environ["RUBRIC_STUDIO_LLM_BASE_URL"],
        api_key="not-needed",
        model=os.environ.get("RUBRIC_STUDIO_LLM_MODEL") or "SmolLM2-135M-Instruct.Q4_1",
        temperature=0,
        timeout=_CALL_TIMEOUT_S,
        max_retries=0,
        max_tokens=1024,
    )
    if PassPipeline is not None:
        middleware: Any = PassPipeline.build(grader, limits=PassLimits(budget_s=_PASS_BUDGET_S))
    else:
        options: dict[str, Any] = {"model": grader, "max_iterations": 1}
        if "grader_budget_s" in inspect.signature(RubricMiddleware).parameters:
            options["grader_budget_s"] = _PASS_BUDGET_S
        middleware = RubricMiddleware(**options)
    print(json.dumps({"ready": str(Path(rubric_core.__file__).parents[1])}), flush=True)
    for line in sys.stdin:
        task = TASKS[json.loads(line)["task"]]
        load = os.getloadavg()[0]
        started = time.perf_counter()
        evaluation = middleware.grade_transcript(
            [HumanMessage(task.input), AIMessage(task.answer)], task.rubric
        )
        record = {
            "result": evaluation["result"],
            "criteria": [
                {"name": c["name"], "passed": c["passed"], "gap": c.get("gap", "")}
                for c in evaluation["criteria"]
            ],
            "requests": evaluation["grader_attempts"],
            "seconds": round(time.perf_counter() - started, 2),
            "load": round(load, 2),
            "explanation": evaluation["explanation"][:300],
        }
        print(json.dumps(record), flush=True)


# -- the driver ----------------------------------------------------------------------------


_SKIPPED_GAP = "Not graded: the grader skipped it."


def _score(task: Task, record: dict[str, Any]) -> dict[str, Any]:
    """Whether the pass's verdict is valid, and how many criteria it got right."""
    given = [c for c in record["criteria"] if c.get("gap") != _SKIPPED_GAP]
    names = sorted(c["name"] for c in given)
    valid = record["result"] != "grader_error" and names == sorted(task.truth)
    by_name = {c["name"]: c["passed"] for c in given}
    right = sum(by_name.get(name) is truth for name, truth in task.truth.items())
    return {**record, "valid": valid, "right": right, "criteria_total": len(task.truth)}


class Side:
    """One tree's worker process."""

    def __init__(self, label: str, tree: Path, log: Path) -> None:
        self.label = label
        self._log = log.open("w")
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(tree)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=tree,
        )
        hello = json.loads(self._readline())
        if Path(hello["ready"]).resolve() != tree.resolve():
            msg = f"{label} imported rubric_core from {hello['ready']}, not {tree}"
            raise RuntimeError(msg)
        self.records: list[dict[str, Any]] = []

    def _readline(self) -> str:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            msg = f"the {self.label} worker ended; see {self._log.name}"
            raise RuntimeError(msg)
        return line

    def grade(self, index: int) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"task": index}) + "\n")
        self._process.stdin.flush()
        record = _score(TASKS[index], json.loads(self._readline()))
        record["task"] = index
        self.records.append(record)
        return record

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._log.close()


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    passes = len(records)
    criteria = sum(r["criteria_total"] for r in records)
    return {
        "passes": passes,
        "valid": sum(r["valid"] for r in records),
        "grader_error": sum(r["result"] == "grader_error" for r in records),
        "right": sum(r["right"] for r in records),
        "criteria": criteria,
        "requests": sum(r["requests"] for r in records),
        "seconds_median": statistics.median(r["seconds"] for r in records) if records else 0,
        "seconds_total": sum(r["seconds"] for r in records),
    }


def _table(before: dict[str, Any], after: dict[str, Any]) -> str:
    def row(label: str, s: dict[str, Any]) -> str:
        n = max(s["passes"], 1)
        return (
            f"| {label} | {s['passes']} | {s['valid']} ({100 * s['valid'] / n:.0f} %) | "
            f"{s['grader_error']} | {s['right']}/{s['criteria']} "
            f"({100 * s['right'] / max(s['criteria'], 1):.0f} %) | "
            f"{s['requests'] / n:.2f} | {s['seconds_median']:.1f} | {s['seconds_total']:.0f} |"
        )

    return "\n".join(
        [
            "| code | passes | valid verdicts | grader_error | criteria right | requests / pass "
            "| median s / pass | total s |",
            "|---|---|---|---|---|---|---|---|",
            row("before", before),
            row("after", after),
        ]
    )


def _merge_base() -> str:
    return subprocess.run(
        ["git", "merge-base", "HEAD", "main"],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the 8 tasks (<= 3)")
    parser.add_argument("--budget-min", type=float, default=25.0, help="no new round after this")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker)
        return
    if not os.environ.get("RUBRIC_STUDIO_LLM_BASE_URL"):
        sys.exit(
            "RUBRIC_STUDIO_LLM_BASE_URL is unset: start .ci/llm_server.sh and source its state"
        )
    base = _merge_base()
    scratch = Path(tempfile.mkdtemp(prefix="bench_judge_"))
    before_tree = scratch / "before"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(before_tree), base],
        cwd=_ROOT,
        check=True,
        capture_output=True,
    )
    started = time.monotonic()
    sides: list[Side] = []
    try:
        sides = [
            Side("before", before_tree, scratch / "before.log"),
            Side("after", _ROOT, scratch / "after.log"),
        ]
        rounds = 0
        for repeat in range(min(args.repeats, 3)):
            if time.monotonic() - started > 60 * args.budget_min:
                break
            for index in range(len(TASKS)):
                if time.monotonic() - started > 60 * args.budget_min:
                    break  # both sides graded every task so far: the halves stay paired
                order = sides if (repeat * len(TASKS) + index) % 2 == 0 else sides[::-1]
                for side in order:
                    r = side.grade(index)
                    print(
                        f"round {repeat + 1} task {index + 1} {side.label:6} {r['result']:15} "
                        f"valid={r['valid']!s:5} right={r['right']}/{r['criteria_total']} "
                        f"requests={r['requests']} {r['seconds']:.1f}s load={r['load']}",
                        flush=True,
                    )
            rounds += 1
    finally:
        for side in sides:
            side.close()
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(before_tree)], cwd=_ROOT, check=False
        )
    before, after = (_summary(side.records) for side in sides)
    loads = [r["load"] for side in sides for r in side.records]
    report = [
        f"# Judge validity: SmolLM2-135M on llama.cpp, {len(TASKS)} tasks, "
        f"{len(sides[1].records)} passes per side ({rounds} rounds begun)",
        "",
        f"before = {base[:10]} (merge-base with main), after = this tree; "
        f"{platform.python_version()}, {os.cpu_count()} cores; "
        f"load (1 min) per pass: min {min(loads):.1f}, median {statistics.median(loads):.1f}, "
        f"max {max(loads):.1f}; wall {time.monotonic() - started:.0f} s",
        "",
        _table(before, after),
        "",
        "Per pass (task, code, result, valid, criteria right, requests, seconds, load):",
        "",
        *(
            f"- t{r['task'] + 1} {side.label}: {r['result']}, valid={r['valid']}, "
            f"{r['right']}/{r['criteria_total']}, {r['requests']} req, {r['seconds']} s, "
            f"load {r['load']}"
            for side in sides
            for r in side.records
        ),
    ]
    _RESULTS.parent.mkdir(parents=True, exist_ok=True)
    _RESULTS.write_text("\n".join(report) + "\n", encoding="utf-8")
    print("\n".join(report[:5]))


if __name__ == "__main__":
    main()
