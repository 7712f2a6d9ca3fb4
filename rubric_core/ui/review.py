"""The Review page's logic: the queue of passes, verdict words, the labels a reviewer chose.

A pass to review is one stored grading pass (`evaluation_id`); its labels map a criterion
to the person's verdict. The page shows one pass at a time and moves to the next
unlabelled one; everything it decides is computed here, without Streamlit.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from rubric_core.wording import criterion_mark, is_penalty

if TYPE_CHECKING:
    from rubric_core.store import RunFilters, Store

__all__ = [
    "HUMAN_CHOICES",
    "PENALTY_HINT",
    "REVIEW_SHORTCUTS",
    "ReviewQueue",
    "batch_options",
    "choice_for",
    "chosen_labels",
    "chosen_notes",
    "is_fully_labelled",
    "judge_labels",
    "labelled_ids",
    "next_unlabelled",
    "parse_id_param",
    "review_caption",
    "review_rows",
    "step",
    "verdict_word",
]

HUMAN_CHOICES: tuple[str, str] = ("pass", "fail")
"""What a reviewer may say of one criterion (no choice: not labelled)."""

REVIEW_SHORTCUTS: dict[str, str] = {
    "save_next": "S",
    "agree_next": "A",
    "skip": "N",
    "previous": "P",
}
"""Keyboard shortcuts of the Review page's buttons (`st.button(shortcut=...)`).

Single letters: Streamlit ignores them while the focus is in a text field, so typing a
note never triggers one. `C` and `R` are reserved by Streamlit."""


def verdict_word(passed: Any, *, insufficient: bool = False, penalty: bool = False) -> str:
    """A verdict as a word: `pass`, `fail`, `insufficient evidence`, or `not labelled`;
    a penalty's reads `absent ✓ (pass)` / `present ✗ (fail)` (`wording.criterion_mark`).

    Examples:
        >>> verdict_word(True), verdict_word(False), verdict_word(None)
        ('pass', 'fail', 'not labelled')
        >>> verdict_word(False, insufficient=True)
        'insufficient evidence'
        >>> verdict_word(True, penalty=True)
        'absent ✓ (pass)'
    """
    if insufficient:
        return "insufficient evidence"
    if passed is None:
        return "not labelled"
    word = "pass" if passed else "fail"
    return f"{criterion_mark(bool(passed), penalty=True)} ({word})" if penalty else word


PENALTY_HINT = (
    "A penalty: something the work must not do. Pass = it is absent; fail = it is present."
)
"""What the Review page says beside a penalty's verdict choice."""


def choice_for(value: Any) -> str | None:
    """The radio choice for a stored label: `"pass"`, `"fail"`, or `None` (unlabelled).

    Examples:
        >>> choice_for(True), choice_for(0), choice_for(None)
        ('pass', 'fail', None)
    """
    if value is None:
        return None
    return "pass" if bool(value) else "fail"


def chosen_labels(choices: Mapping[str, str | None]) -> dict[str, bool]:
    """The reviewer's radio choices as labels, leaving out criteria with no choice.

    Examples:
        >>> chosen_labels({"has a title": "pass", "cites a source": "fail", "short": None})
        {'has a title': True, 'cites a source': False}
    """
    return {name: choice == "pass" for name, choice in choices.items() if choice in HUMAN_CHOICES}


def is_fully_labelled(criteria: Iterable[str], labels: Mapping[str, Any]) -> bool:
    """Whether every criterion of a pass has a human label.

    Examples:
        >>> is_fully_labelled(["a", "b"], {"a": True})
        False
        >>> is_fully_labelled(["a", "b"], {"a": True, "b": False})
        True
    """
    return all(labels.get(name) is not None for name in criteria)


def next_unlabelled(
    queue: Sequence[int], labelled: Iterable[int], current: int | None = None
) -> int | None:
    """The first pass after `current` (wrapping round) not yet fully labelled.

    Args:
        queue: Pass ids in review order.
        labelled: The ids whose every criterion is labelled.
        current: Where the reviewer is; `None` starts at the beginning.

    Returns:
        That pass id, or `None` when every pass of the queue is labelled.

    Examples:
        >>> next_unlabelled([4, 5, 6, 7], {5}, current=4)
        6
        >>> next_unlabelled([4, 5, 6, 7], {4, 5, 7}, current=6)
        >>> next_unlabelled([4, 5, 6, 7], {6, 7}, current=6)
        4
        >>> next_unlabelled([4, 5], set())
        4
    """
    done = set(labelled)
    start = queue.index(current) + 1 if current in queue else 0
    for offset in range(len(queue)):
        candidate = queue[(start + offset) % len(queue)]
        if candidate not in done and candidate != current:
            return candidate
    return None


def step(queue: Sequence[int], current: int | None, delta: int) -> int | None:
    """The pass `delta` places from `current`, clamped to the queue.

    Examples:
        >>> step([4, 5, 6], 5, -1), step([4, 5, 6], 4, -1), step([4, 5, 6], 6, 1)
        (4, 4, 6)
        >>> step([], None, 1)
    """
    if not queue:
        return None
    index = queue.index(current) if current in queue else 0
    return queue[max(0, min(len(queue) - 1, index + delta))]


def review_caption(position: int, total: int, labelled: int) -> str:
    """Where the reviewer is: `"Pass 2 of 6 · 1 of 6 labelled"`.

    Examples:
        >>> review_caption(1, 6, 1)
        'Pass 2 of 6 · 1 of 6 labelled'
    """
    return f"Pass {position + 1} of {total} · {labelled} of {total} labelled"


def review_rows(
    criteria: Sequence[Mapping[str, Any]],
    labels: Mapping[str, Mapping[str, Any]],
    penalties: Collection[str] = (),
) -> list[dict[str, Any]]:
    """Per criterion of a pass: the judge's verdict and gap, and the person's label if any.

    A penalty (named in `penalties`, `rubric.penalty_names`, or a verdict with a negative
    `weight`) has `penalty: True` and its verdict reads `absent ✓` / `present ✗`.

    Args:
        criteria: The pass's verdicts `{name, passed, gap?, insufficient?}`.
        labels: Human labels by criterion: `{human_passed, reviewer?, note?}` (`Store.labels`
            rows; `label_note` as the export names it is read too).

    Examples:
        >>> rows = review_rows(
        ...     [{"name": "a", "passed": True}, {"name": "b", "passed": False, "gap": "add b"}],
        ...     {"b": {"human_passed": True, "reviewer": "ana"}},
        ... )
        >>> [(r["name"], r["judge"], r["gap"], r["human"], r["agrees"]) for r in rows]
        [('a', 'pass', '', None, None), ('b', 'fail', 'add b', 'pass', False)]
    """
    rows = []
    for criterion in criteria:
        name = str(criterion["name"])
        insufficient = bool(criterion.get("insufficient"))
        judged = None if insufficient else bool(criterion.get("passed"))
        penalty = name in penalties or is_penalty(criterion)
        label = labels.get(name) or {}
        human = label.get("human_passed")
        rows.append(
            {
                "name": name,
                "judge": verdict_word(judged, insufficient=insufficient, penalty=penalty),
                "penalty": penalty,
                "judge_passed": judged,
                "gap": str(criterion.get("gap") or ""),
                "human": choice_for(human),
                "reviewer": label.get("reviewer"),
                "note": label.get("label_note") or label.get("note") or "",
                "agrees": None if human is None or judged is None else bool(human) == judged,
            }
        )
    return rows


def parse_id_param(value: Any) -> int | None:
    """A positive id from a query parameter (`?pass=12`), or `None` for anything else.

    Examples:
        >>> parse_id_param("12"), parse_id_param(["7"]), parse_id_param("x"), parse_id_param("0")
        (12, 7, None, None)
    """
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    text = str(value or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def batch_options(runs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The distinct batch ids of some runs, in the order first seen (newest runs first).

    Examples:
        >>> batch_options([{"batch_id": "b2"}, {"batch_id": None}, {"batch_id": "b1"},
        ...                {"batch_id": "b2"}])
        ['b2', 'b1']
    """
    return list(dict.fromkeys(str(r["batch_id"]) for r in runs if r.get("batch_id")))


def judge_labels(criteria: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """The judge's decided verdicts as labels ("agree with the judge"); insufficient left out.

    Examples:
        >>> judge_labels([{"name": "a", "passed": True},
        ...               {"name": "b", "passed": False, "insufficient": True}])
        {'a': True}
    """
    return {str(c["name"]): bool(c.get("passed")) for c in criteria if not c.get("insufficient")}


def chosen_notes(notes: Mapping[str, str], labels: Mapping[str, bool]) -> dict[str, str]:
    """The non-empty notes of the criteria being labelled, stripped.

    Examples:
        >>> chosen_notes({"a": " ok ", "b": "", "c": "x"}, {"a": True, "b": False})
        {'a': 'ok'}
    """
    return {name: notes[name].strip() for name in labels if (notes.get(name) or "").strip()}


def labelled_ids(items: Iterable[Mapping[str, Any]]) -> set[int]:
    """The review items whose every judged criterion has a human label.

    Examples:
        >>> labelled_ids([
        ...     {"evaluation_id": 1, "criteria": [{"name": "a"}], "labels": {"a": {"human_passed": True}}},
        ...     {"evaluation_id": 2, "criteria": [{"name": "a"}], "labels": {}},
        ... ])
        {1}
    """
    done = set()
    for item in items:
        names = [str(c["name"]) for c in item.get("criteria") or []]
        labels = {
            name: (label.get("human_passed") if isinstance(label, Mapping) else label)
            for name, label in (item.get("labels") or {}).items()
        }
        if is_fully_labelled(names, labels):
            done.add(int(item["evaluation_id"]))
    return done


class ReviewQueue:
    """The Review page's queue of final, judged passes, read a few ids at a time.

    The same answers as `next_unlabelled`, `step` and `labelled_ids` over the whole list
    `Store.labels.review_items(filters=..., final_only=True)`, from `Store.labels.review_ids` pages and
    `Store.labels.review_counts`: nothing is read for the passes not on screen. `done` (the fully
    labelled passes) is read from the labels, which are few.
    """

    def __init__(self, store: Store, filters: RunFilters) -> None:
        self.store = store
        self.filters = filters

    @cached_property
    def done(self) -> set[int]:
        """The passes whose every criterion has a human label."""
        return set(self.store.labels.labelled_pass_ids(filters=self.filters))

    def _ids(self, **bounds: Any) -> list[int]:
        return self.store.labels.review_ids(filters=self.filters, **bounds)

    def first(self) -> int | None:
        """The queue's first pass, or `None` when it is empty."""
        ids = self._ids(limit=1)
        return ids[0] if ids else None

    def contains(self, evaluation_id: int) -> bool:
        """Whether the pass is in the queue."""
        return self._ids(after=evaluation_id - 1, limit=1) == [evaluation_id]

    def position(self, evaluation_id: int) -> int:
        """The index of a pass of the queue (how many come before it)."""
        return self.store.labels.review_counts(filters=self.filters, before=evaluation_id)["passes"]

    def next_unlabelled(
        self, current: int | None = None, done: Iterable[int] | None = None
    ) -> int | None:
        """`next_unlabelled(queue, done, current)`: the first pass after `current` (wrapping
        round) not fully labelled; `done` defaults to `self.done`."""
        labelled = self.done if done is None else set(done)
        enough = len(labelled) + 2  # more ids than can all be labelled
        if current is not None and self.contains(current):
            for bounds in ({"after": current}, {"before": current}):
                hit = next(
                    (i for i in self._ids(**bounds, limit=enough) if i not in labelled), None
                )
                if hit is not None:
                    return hit
            return None
        ids = self._ids(limit=enough)
        return next((i for i in ids if i not in labelled and i != current), None)

    def previous(self, current: int) -> int | None:
        """`step(queue, current, -1)`: the pass before `current`, clamped to the queue."""
        if not self.contains(current):
            return self.first()
        before = self._ids(before=current, limit=1, descending=True)
        return before[0] if before else current
