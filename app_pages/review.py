"""Review: one pass at a time, the judge's verdicts beside your own labels.

Keys: the buttons carry Streamlit's native shortcuts (`st.button(shortcut=...)`, see
`REVIEW_SHORTCUTS`): S saves and moves to the next unlabelled pass, A agrees with the
judge and moves on, N skips to the next unlabelled pass, P goes back one. They are
single letters, which Streamlit ignores while the focus is in a text field, so typing a
note never triggers one. `?pass=<evaluation id>` opens one pass (the Agreement page links
its disagreements that way).
"""

from __future__ import annotations

import streamlit as st

from app_widgets.display import show_plain
from app_widgets.review import review_scope, reviewer_input
from app_widgets.run_detail import render_transcript
from app_widgets.store import STORE_ERRORS, get_store
from rubric_core.ui import (
    HUMAN_CHOICES,
    PENALTY_HINT,
    REVIEW_SHORTCUTS,
    ReviewQueue,
    chosen_labels,
    chosen_notes,
    judge_labels,
    md_escape,
    parse_id_param,
    penalty_names,
    review_caption,
    review_rows,
    status_badge,
)

store = get_store()
st.title("Review")
st.caption(
    "Label the judge's verdicts, one pass at a time: mark each criterion pass or fail as "
    "*you* judge it. Labels are kept with your name and can be changed; the Agreement page "
    "measures the judge against them."
)

scope_col, name_col = st.columns([3, 1], vertical_alignment="bottom")
with scope_col:
    scope = review_scope(store, key="review")
with name_col:
    reviewer = reviewer_input(key="review_reviewer")
if scope is None:
    st.stop()
version, filters = scope

# The queue is read a few ids at a time and its counts by COUNT queries: only the pass on
# screen is read with its criteria and labels.
queue = ReviewQueue(store, filters)
done = queue.done

wanted = parse_id_param(st.query_params.get("pass"))
current = wanted if wanted is not None else queue.next_unlabelled()
if current is None:
    current = queue.first()
if current is None:
    st.info(
        "No graded pass of this rubric version yet: grade some outputs on the Batch or Run "
        "page, or launch runs, then come back to label them.",
        icon=":material/rate_review:",
    )
    st.stop()
in_queue = queue.contains(current)
by_id = {
    int(i["evaluation_id"]): i
    for i in (
        store.labels.review_items(filters=filters, evaluation_ids=[current]) if in_queue else []
    )
}
if current not in by_id:
    # A pass linked from elsewhere (an Agreement disagreement, an earlier pass of a run).
    linked_run = parse_id_param(st.query_params.get("run"))
    if linked_run is not None:
        for other in store.labels.review_items(run_ids=[linked_run], final_only=False):
            by_id.setdefault(int(other["evaluation_id"]), other)
if current not in by_id:
    st.warning(
        f"Pass #{current} is not among these runs. Pick its rubric version above, or open "
        "it from the Agreement page."
    )
    st.stop()
item = by_id[current]
labels = item.get("labels") or {}
rows = review_rows(item["criteria"], labels, penalty_names(str(version.get("text") or "")))


def _go(evaluation_id: int | None) -> None:
    if evaluation_id is not None:
        st.query_params["pass"] = str(evaluation_id)


def _save(evaluation_id: int, *, agree: bool) -> None:
    """Store the marked labels (or the judge's verdicts), then open the next unlabelled pass."""
    name = str(st.session_state.get("review_reviewer") or "").strip()
    if not name:
        st.session_state["review_flash"] = ("error", "Type your name first: labels keep it.")
        return
    if agree:
        chosen = judge_labels(item["criteria"])
    else:
        chosen = chosen_labels(
            {
                row["name"]: st.session_state.get(f"review_{evaluation_id}_{index}")
                for index, row in enumerate(rows)
            }
        )
    notes = {
        row["name"]: str(st.session_state.get(f"review_{evaluation_id}_{index}_note") or "")
        for index, row in enumerate(rows)
    }
    if not chosen:
        st.session_state["review_flash"] = ("error", "Mark at least one criterion pass or fail.")
        return
    try:
        store.labels.save(
            evaluation_id, chosen, reviewer=name, notes=chosen_notes(notes, chosen) or None
        )
    except STORE_ERRORS as exc:
        st.session_state["review_flash"] = ("error", f"Not saved: {exc}")
        return
    now_done = set(done)
    if all(row["name"] in chosen or row["human"] is not None for row in rows):
        now_done.add(evaluation_id)
    st.session_state["review_flash"] = (
        "success",
        f"Saved {len(chosen)} label(s) on pass #{evaluation_id} as {name}.",
    )
    _go(queue.next_unlabelled(evaluation_id, now_done) or evaluation_id)


flash = st.session_state.pop("review_flash", None)
if flash:
    (st.success if flash[0] == "success" else st.error)(flash[1])

counts = store.labels.review_counts(filters=filters)
st.caption(
    review_caption(queue.position(current) if in_queue else 0, counts["passes"], counts["labelled"])
    + ("" if in_queue else " · this pass is outside the chosen runs")
)

request_col, draft_col = st.columns(2, gap="large")
with request_col:
    st.markdown(f"**Request** · run #{item['run_id']} · pass #{current}")
    show_plain(item.get("input"), height=220)
with draft_col:
    st.markdown(
        f"**Judged draft** · {status_badge(item.get('result'))} · "
        f"grader {md_escape(item.get('grader_model') or '?')}"
    )
    show_plain(item.get("draft"), height=220)
with st.expander("Transcript"):
    render_transcript(store, int(item["run_id"]))

st.subheader("Criteria")
for index, row in enumerate(rows):
    with st.container(border=True):
        text_col, choice_col, note_col = st.columns([4, 2, 3], vertical_alignment="center")
        with text_col:
            st.markdown(f"**{index + 1}. {md_escape(row['name'])}**")
            st.caption(
                f"Judge: {row['judge']}" + (f" — {md_escape(row['gap'])}" if row["gap"] else "")
            )
            if row["penalty"]:
                st.caption(PENALTY_HINT)
        key = f"review_{current}_{index}"
        if key not in st.session_state and row["human"] is not None:
            st.session_state[key] = row["human"]
        choice_col.radio(
            "Your verdict",
            HUMAN_CHOICES,
            index=None,
            key=key,
            horizontal=True,
            help=f"Labelled by {row['reviewer']}" if row["reviewer"] else None,
        )
        note_key = f"{key}_note"
        if note_key not in st.session_state and row["note"]:
            st.session_state[note_key] = row["note"]
        note_col.text_input("Note (optional)", key=note_key, placeholder="why, if it helps")

# (label, key, shortcut, callback, its arguments, needs a reviewer, help)
ACTIONS = [
    ("Save and next", "save", "save_next", _save, (current,), {"agree": False}, True, None),
    ("Agree with the judge", "agree", "agree_next", _save, (current,), {"agree": True}, True,
     "Label every criterion as the judge decided it (insufficient evidence is left to you)."),
    ("Next unlabelled", "skip", "skip", _go, (queue.next_unlabelled(current),), {}, False, None),
    ("Previous", "back", "previous", _go, (queue.previous(current),), {}, False, None),
]  # fmt: skip
for column, (label, key, shortcut, callback, args, kwargs, needs_name, tip) in zip(
    st.columns(len(ACTIONS)), ACTIONS, strict=True
):
    column.button(
        label,
        type="primary" if key == "save" else "secondary",
        key=f"review_{key}",
        shortcut=REVIEW_SHORTCUTS[shortcut],
        on_click=callback,
        args=args,
        kwargs=kwargs,
        disabled=needs_name and not reviewer,
        help=tip,
        width="stretch",
        wrap=True,
    )
if not reviewer:
    st.caption("Type your name above to save labels.")
st.caption(
    "Keys: **S** save and next · **A** agree with the judge · **N** next unlabelled · "
    "**P** previous (not while typing in a field)."
)
