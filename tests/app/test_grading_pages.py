"""Issue 21 on the pages (AppTest): checks-only rubrics launch with "no grader: checks only",
a replay grader for another rubric is refused in the library's words, and the person
grader's form shows the code-checked criteria decided and asks only about the others."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from rubric_core.store import Store
from tests.support.pages import APP, RUN_TIMEOUT_S
from tests.support.pages import no_exception as _ok
from tests.support.pages import open_page as _page

CHECKS_ONLY = "- Short {words 1..60}\n- Calm {no-regex: !}\n- Names the version {regex: v\\d+}"
MIXED = CHECKS_ONLY + "\n- [-2] Invents a price\n- Friendly tone"


def _app(db_path: Path, text: str, name: str = "notes") -> AppTest:
    with Store(db_path) as store:
        store.rubrics.save_version(name, text)
    return AppTest.from_file(str(APP), default_timeout=RUN_TIMEOUT_S).run()


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def test_run_page_offers_no_grader_for_a_checks_only_rubric_and_launches(db_path: Path) -> None:
    from app_widgets.session import run_registry

    at = _page(_app(db_path, CHECKS_ONLY), "run")
    _ok(at)
    source = at.radio(key="run_grader_source")
    assert source.options[0] == "No grader: checks only"
    assert source.value == "checks"
    at.text_area(key="run_input").input("Write a release note")
    at.number_input(key="run_max_iterations").set_value(1)
    at.button(key="run_launch").click().run()
    _ok(at)
    assert not any("blocked" in e for e in _errors(at)), _errors(at)
    handle = run_registry().run(at.session_state["run_watch"])
    assert handle is not None and handle.wait(RUN_TIMEOUT_S)
    with Store(db_path) as store:
        assert store.runs.get(handle.run_id)["grader_model"] == "checks"


def test_run_page_does_not_offer_no_grader_for_a_judged_criterion(db_path: Path) -> None:
    at = _page(_app(db_path, MIXED), "run")
    _ok(at)
    assert "checks" not in at.radio(key="run_grader_source").options


def test_batch_page_launches_a_checks_only_rubric_with_no_grader(db_path: Path) -> None:
    at = _page(_app(db_path, CHECKS_ONLY), "batch")
    at.file_uploader(key="batch_upload").upload(
        "in.csv", b"input\nWrite a note\nWrite another\n", "text/csv"
    )
    at.run()
    _ok(at)
    assert at.radio(key="batch_grader_source").value == "checks"
    assert not any("grader_error" in e for e in _errors(at)), _errors(at)
    assert not at.button(key="batch_launch").disabled


def test_run_page_refuses_a_replay_grader_for_another_rubric_in_the_librarys_words(
    db_path: Path,
) -> None:
    at = _page(_app(db_path, MIXED), "run")
    at.radio(key="run_grader_source").set_value("replay").run()
    at.selectbox(key="run_grader_scenario").set_value("haiku").run()
    _ok(at)
    assert any("replay grader 'haiku'" in e and "Use instead" in e for e in _errors(at))


def test_person_grader_shows_checks_decided_and_asks_only_the_judged(db_path: Path) -> None:
    at = _app(db_path, MIXED)
    _page(at, "run")
    at.toggle(key="run_graded").set_value(True).run()
    at.text_area(key="grade_one_input").input("Write a release note")
    at.text_area(key="grade_one_output").input("Great release!")
    at.text_input(key="grade_one_reviewer").input("ana").run()
    _ok(at)
    keys = {r.key for r in at.radio}
    assert {"grade_one_3", "grade_one_4"} <= keys
    assert not {"grade_one_0", "grade_one_1", "grade_one_2"} & keys  # code decides those
    shown = " ".join(m.value for m in at.markdown)
    assert "decided by code: fail ✗" in shown and "decided by code: pass ✓" in shown
    evidence = [c.value for c in at.caption if c.value.startswith("Check `{no-regex: !}`: ")]
    assert evidence and len(evidence[0]) > len("Check `{no-regex: !}`: ")  # the check's output
    penalty = at.radio(key="grade_one_3")
    assert penalty.options == ["absent ✓", "present ✗", "insufficient"]
    assert any("absent ✓ = it does not" in c.value for c in at.caption)
    penalty.set_value("absent ✓")
    at.radio(key="grade_one_4").set_value("pass")
    at.button(key="grade_one_record").click().run()
    _ok(at)
    assert not _errors(at), _errors(at)
    run_id = at.session_state["grade_one_last"]
    with Store(db_path) as store:
        run = store.runs.get(run_id)
        (evaluation,) = store.passes.of_run(run_id)
    assert run["status"] == "needs_revision"  # two checks fail, whatever the person said
    checked = {c["name"]: c.get("checked_by") for c in evaluation["criteria"]}
    assert checked == {
        "Short": "code", "Calm": "code", "Names the version": "code",
        "Invents a price": None, "Friendly tone": None,
    }  # fmt: skip
