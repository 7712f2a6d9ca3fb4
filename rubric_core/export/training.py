"""The revision loop as training data: SFT, preference and trajectory rows.

Rows come in the conversational shapes Hugging Face TRL reads:

- `sft`: one row per grading run, `{"messages": [user request, assistant draft]}`, the
  draft of the run's satisfied pass (with `include_unsatisfied`, the best-scoring pass of a
  run that never was satisfied; `metadata.satisfied` says which). `SFTTrainer` reads
  `messages`.
- `preference`: `{"prompt": [user], "chosen": [assistant], "rejected": [assistant]}`, one
  row per pair of passes of one grading run whose scores differ by at least `min_margin`,
  `chosen` the higher-scoring draft. `DPOTrainer` reads `prompt`, `chosen`, `rejected`.
- `trajectories`: one row per grading run: `messages` is the conversation's visible turns
  (the request, each draft, and the feedback the agent was sent after each
  `needs_revision` pass, rebuilt with the loop's own `revision_message`), and `passes`
  holds each pass's draft, result, score, verdicts (with gaps and any human label) and
  that feedback. Tool calls between the turns are not stored, so they are not here.

Every row carries `metadata` (run and grading run ids, rubric and version, models,
statuses, scores) beside the fields TRL reads. With `labels_only`, only passes a human
agreed with count: a pass with at least one human label, every label equal to the judge's
verdict. SFT and preference rows then use agreed passes only, and a trajectory is kept only
when each of its graded passes is agreed.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Generator, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, Literal

from rubric_core.export.columns import ExportError
from rubric_core.export.rows import StoredPass, _iso, read_passes
from rubric_core.extras import require
from rubric_core.summary import graded_by_machine

if TYPE_CHECKING:
    from rubric_core.store import RunFilters, Store

__all__ = [
    "PAIRINGS",
    "TRAINING_FORMATS",
    "TrainingOptions",
    "training_rows",
    "write_training",
]

TrainingFormat = Literal["sft", "preference", "trajectories"]
TRAINING_FORMATS: tuple[str, ...] = ("sft", "preference", "trajectories")
PAIRINGS: tuple[str, ...] = ("all", "best-worst")
"""Which pairs of a grading run's passes become preference rows: every pair whose scores
differ by at least the margin, or only the best against the worst."""

_PARQUET_BATCH = 500


class TrainingOptions:
    """How the training rows are chosen (validated when built)."""

    __slots__ = ("include_unsatisfied", "labels_only", "min_margin", "pairs")

    def __init__(
        self,
        *,
        min_margin: float = 0.1,
        labels_only: bool = False,
        include_unsatisfied: bool = False,
        pairs: str = "all",
    ) -> None:
        if (
            isinstance(min_margin, bool)
            or not isinstance(min_margin, int | float)
            or not math.isfinite(min_margin)
            or min_margin <= 0
        ):
            msg = f"min_margin must be a number above 0 (scores are 0 to 1), not {min_margin!r}"
            raise ExportError(msg)
        if pairs not in PAIRINGS:
            msg = f"unknown pairing {pairs!r}; choose one of {', '.join(PAIRINGS)}"
            raise ExportError(msg)
        self.min_margin = float(min_margin)
        self.labels_only = bool(labels_only)
        self.include_unsatisfied = bool(include_unsatisfied)
        self.pairs = pairs


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def _verdicts(stored: StoredPass) -> list[dict[str, Any]]:
    """A pass's verdicts as dicts, each with its human label (None when unlabelled)."""
    out = []
    for _, name, passed, gap, weight, checked_by, insufficient in stored.verdicts:
        label = stored.labels.get(name)
        out.append(
            {
                "criterion": name,
                "passed": bool(passed),
                "gap": gap or "",
                "weight": float(weight) if weight is not None else 1.0,
                "checked_by": checked_by or "grader",
                "insufficient": bool(insufficient),
                "human_passed": None if label is None or label[0] is None else bool(label[0]),
            }
        )
    return out


def _agreed(stored: StoredPass) -> bool:
    """A human labelled this pass, no person graded it (`summary.graded_by_machine`: a
    person's own pass agrees with their labels by construction) and every label matches."""
    if not graded_by_machine(stored.row[5]):
        return False
    judged = {verdict[1]: bool(verdict[2]) for verdict in stored.verdicts}
    marks = [(name, label[0]) for name, label in stored.labels.items() if label[0] is not None]
    return bool(marks) and all(judged.get(name) == bool(human) for name, human in marks)


def _feedback(
    stored: StoredPass, earlier: list[StoredPass], verdicts: list[dict[str, Any]]
) -> str | None:
    """The feedback message the agent was sent after this pass (None when none was)."""
    if stored.row[9] != "needs_revision":
        return None
    from rubric_core.messages import content_text
    from rubric_core.pipeline import revision_message
    from rubric_core.scoring import regressions

    criteria = [{"name": v["criterion"], "passed": v["passed"], "gap": v["gap"]} for v in verdicts]
    previous = [[{"name": v[1], "passed": bool(v[2])} for v in item.verdicts] for item in earlier]
    evaluation: Any = {
        "iteration": stored.row[7],
        "explanation": stored.row[10] or "",
        "criteria": criteria,
        "regressions": regressions(previous, criteria),
    }
    return content_text(revision_message(evaluation).content)


def _metadata(first: StoredPass) -> dict[str, Any]:
    row = first.row
    return {
        "run_id": row[0],
        "grading_run_id": row[6],
        "rubric": row[1],
        "rubric_version": row[2],
        "agent_model": row[4],
        "grader_model": row[5],
        "run_status": row[17],
    }


def _grading_runs(passes: Iterable[StoredPass]) -> Iterator[list[StoredPass]]:
    """The passes of each grading run together, oldest first (the read's own order)."""
    for _, group in itertools.groupby(passes, key=lambda p: (p.row[0], p.row[6])):
        yield list(group)


def _graded(passes: list[StoredPass]) -> list[StoredPass]:
    """Passes that reached a verdict (a `grader_error` pass has no draft judgement)."""
    return [p for p in passes if p.row[8] != "grader_error" and p.verdicts]


def _prompt(passes: list[StoredPass], system: str | None) -> list[dict[str, str]]:
    """The request as chat messages: the agent's system prompt (when the run had one) and
    the user's input."""
    head = [{"role": "system", "content": system}] if system else []
    return [*head, _user(passes[0].row[3] or "")]


def _sft(
    passes: list[StoredPass], options: TrainingOptions, system: str | None
) -> Iterator[dict[str, Any]]:
    graded = _graded(passes)
    usable = [p for p in graded if _agreed(p)] if options.labels_only else graded
    satisfied = [p for p in usable if p.row[8] == "satisfied"]
    if satisfied:
        chosen = satisfied[-1]
    elif options.include_unsatisfied:
        scored = [p for p in usable if p.row[15] is not None]
        if not scored:
            return
        chosen = max(scored, key=lambda p: (p.row[15], p.row[7]))
    else:
        return
    yield {
        "messages": [*_prompt(passes, system), _assistant(chosen.row[18] or "")],
        "metadata": {
            **_metadata(passes[0]),
            "iteration": chosen.row[7],
            "result": chosen.row[8],
            "score": chosen.row[15],
            "satisfied": chosen.row[8] == "satisfied",
        },
    }


def _preference(
    passes: list[StoredPass], options: TrainingOptions, system: str | None
) -> Iterator[dict[str, Any]]:
    graded = [p for p in _graded(passes) if p.row[15] is not None]
    if options.labels_only:
        graded = [p for p in graded if _agreed(p)]
    if len(graded) < 2:
        return
    if options.pairs == "best-worst":
        best = max(graded, key=lambda p: (p.row[15], p.row[7]))
        worst = min(graded, key=lambda p: (p.row[15], -p.row[7]))
        pairs = [(best, worst)]
    else:
        pairs = [
            (a, b) if a.row[15] >= b.row[15] else (b, a)
            for a, b in itertools.combinations(graded, 2)
        ]
    meta = _metadata(passes[0])
    for chosen, rejected in pairs:
        margin = chosen.row[15] - rejected.row[15]
        if margin < options.min_margin - 1e-12 or chosen.row[18] == rejected.row[18]:
            continue
        yield {
            "prompt": _prompt(passes, system),
            "chosen": [_assistant(chosen.row[18] or "")],
            "rejected": [_assistant(rejected.row[18] or "")],
            "score_chosen": chosen.row[15],
            "score_rejected": rejected.row[15],
            "metadata": {
                **meta,
                "chosen_iteration": chosen.row[7],
                "rejected_iteration": rejected.row[7],
                "margin": round(margin, 12),
            },
        }


def _trajectory(
    passes: list[StoredPass], options: TrainingOptions, system: str | None
) -> Iterator[dict[str, Any]]:
    graded = _graded(passes)
    if options.labels_only and not (graded and all(_agreed(p) for p in graded)):
        return
    prompt = _prompt(passes, system)
    messages = list(prompt)
    steps = []
    for index, stored in enumerate(passes):
        row = stored.row
        verdicts = _verdicts(stored)
        feedback = _feedback(stored, passes[:index], verdicts)
        messages.append(_assistant(row[18] or ""))
        if feedback is not None:
            messages.append(_user(feedback))
        steps.append(
            {
                "iteration": row[7],
                "draft": row[18] or "",
                "result": row[8],
                "status": row[9],
                "score": row[15],
                "explanation": row[10] or "",
                "started_at": _iso(row[14]),
                "verdicts": verdicts,
                "feedback": feedback,
            }
        )
    final = passes[-1].row
    yield {
        "prompt": prompt,
        "messages": messages,
        "passes": steps,
        "status": final[9],
        "final_score": final[15],
        "metadata": {**_metadata(passes[0]), "passes": len(passes)},
    }


_BUILDERS = {"sft": _sft, "preference": _preference, "trajectories": _trajectory}


def training_rows(
    store: Store,
    kind: TrainingFormat | str,
    filters: RunFilters,
    options: TrainingOptions | None = None,
) -> Generator[dict[str, Any], None, None]:
    """Stream the training rows of one kind for the runs `filters` selects, oldest run first.

    Memory holds one grading run's passes at a time.

    Raises:
        ExportError: An unknown kind.
    """
    build = _BUILDERS.get(kind)
    if build is None:
        msg = f"unknown training format {kind!r}; choose one of {', '.join(TRAINING_FORMATS)}"
        raise ExportError(msg)
    chosen = options or TrainingOptions()
    passes = read_passes(store, filters)
    system_prompts: dict[Any, str | None] = {}
    try:
        for group in _grading_runs(passes):
            run_id = group[0].row[0]
            if run_id not in system_prompts:
                system_prompts.clear()  # a run's grading runs are read together
                system_prompts[run_id] = store.runs.get(run_id).get("agent_system_prompt")
            yield from build(group, chosen, system_prompts[run_id])
    finally:
        passes.close()  # closes the read connection at once


def write_training(
    store: Store,
    fp: IO[bytes],
    kind: TrainingFormat | str,
    filters: RunFilters,
    options: TrainingOptions | None = None,
    *,
    parquet: bool = False,
) -> int:
    """Write training rows to a binary file as JSON Lines, or Parquet; returns rows written.

    Parquet needs pyarrow (`pip install 'rubric-studio[parquet]'`); nested fields are kept
    as lists of structs, so `datasets.load_dataset("parquet", ...)` reads the same rows.
    """
    rows = training_rows(store, kind, filters, options)
    if parquet:
        return _write_parquet(fp, kind, rows)
    count = 0
    for row in rows:
        fp.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
        count += 1
    return count


def _schema(kind: str) -> Any:
    """The Parquet schema of one kind of row (explicit: a first batch of nulls fixes nothing)."""
    import pyarrow as pa

    message = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
    base = [
        ("run_id", pa.int64()),
        ("grading_run_id", pa.string()),
        ("rubric", pa.string()),
        ("rubric_version", pa.int64()),
        ("agent_model", pa.string()),
        ("grader_model", pa.string()),
        ("run_status", pa.string()),
    ]
    if kind == "sft":
        meta = [
            *base,
            ("iteration", pa.int64()),
            ("result", pa.string()),
            ("score", pa.float64()),
            ("satisfied", pa.bool_()),
        ]
        return pa.schema([("messages", message), ("metadata", pa.struct(meta))])
    if kind == "preference":
        meta = [
            *base,
            ("chosen_iteration", pa.int64()),
            ("rejected_iteration", pa.int64()),
            ("margin", pa.float64()),
        ]
        return pa.schema(
            [
                ("prompt", message),
                ("chosen", message),
                ("rejected", message),
                ("score_chosen", pa.float64()),
                ("score_rejected", pa.float64()),
                ("metadata", pa.struct(meta)),
            ]
        )
    verdict = pa.struct(
        [
            ("criterion", pa.string()),
            ("passed", pa.bool_()),
            ("gap", pa.string()),
            ("weight", pa.float64()),
            ("checked_by", pa.string()),
            ("insufficient", pa.bool_()),
            ("human_passed", pa.bool_()),
        ]
    )
    step = pa.struct(
        [
            ("iteration", pa.int64()),
            ("draft", pa.string()),
            ("result", pa.string()),
            ("status", pa.string()),
            ("score", pa.float64()),
            ("explanation", pa.string()),
            ("started_at", pa.string()),
            ("verdicts", pa.list_(verdict)),
            ("feedback", pa.string()),
        ]
    )
    return pa.schema(
        [
            ("prompt", message),
            ("messages", message),
            ("passes", pa.list_(step)),
            ("status", pa.string()),
            ("final_score", pa.float64()),
            ("metadata", pa.struct([*base, ("passes", pa.int64())])),
        ]
    )


def _write_parquet(fp: IO[bytes], kind: str, rows: Iterator[dict[str, Any]]) -> int:
    require("pyarrow", "parquet", feature="Parquet training exports")
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema(kind)
    count = 0
    with pq.ParquetWriter(fp, schema) as writer:
        while batch := list(itertools.islice(rows, _PARQUET_BATCH)):
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count
