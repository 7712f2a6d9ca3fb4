"""`python -m rubric_core report`: one self-contained HTML file, every stored string escaped."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from click.testing import CliRunner

from rubric_core.cli import cli
from rubric_core.providers import load_scenario
from rubric_core.report.html import report_html
from rubric_core.store import Store
from tests.support.jobs import grade_of

SCRIPT = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
SCENARIO = "needs_revision_then_satisfied"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_data(self, data):
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None


def _hostile_batch(tmp_path) -> tuple[Store, str]:
    store = Store(tmp_path / "r.db")
    store.rubrics.save_version(
        f"poems {SCRIPT}", f"- Three lines {IMG} {{lines == 3}}\n- Mentions rain {{regex: rain}}"
    )
    [version] = store.rubrics.versions(f"poems {SCRIPT}")
    rows = [
        {"input": f"Write {SCRIPT}", "output": f"a\nb\nrain {IMG}", "labels": {}},
        {"input": f"</details></td></tr></table>{IMG}", "output": SCRIPT, "labels": {}},
        {"input": '<img src="http://example.invalid/x.png">', "output": "a\nb\nrain", "labels": {}},
    ]
    summary = grade_of(
        store,
        rows,
        rubric_version_id=version["id"],
        grader_model="checks-only",
        grader_llm_factory=lambda: None,
    )
    return store, summary["batch_id"]


def test_a_hostile_rubric_name_criterion_input_and_draft_stay_text(tmp_path):
    store, batch_id = _hostile_batch(tmp_path)
    with store:
        text = report_html(store, batch_id=batch_id)
    parser = _Tags()
    parser.feed(text)
    # No element came from stored text: no image, no handler attribute, only our scripts.
    assert not [t for t, _ in parser.tags if t in ("img", "iframe", "object", "embed", "link")]
    assert not [(t, a) for t, attrs in parser.tags for a in attrs if a.startswith("on")]
    figures = [body for attrs, body in parser.scripts if attrs.get("type") == "application/json"]
    code = [body for attrs, body in parser.scripts if attrs.get("type") != "application/json"]
    assert len(code) == 2  # plotly.js and the few lines that draw the charts
    assert figures and all(json.loads(body) for body in figures)
    assert not any("alert(1)" in body or "alert(2)" in body for body in code)
    assert SCRIPT not in text and "<img" not in text
    assert "poems &lt;script&gt;alert(1)&lt;/script&gt;" in text  # the rubric's name, as text
    assert "rain &lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in text  # a draft, as text
    # Nothing is fetched from anywhere: the policy forbids it and no address is named.
    assert "default-src 'none'" in text
    assert not [v for _, attrs in parser.tags for v in attrs.values() if v and "http" in v]
    assert "&lt;img src=&#34;http://example.invalid/x.png&#34;&gt;" in text


def test_report_of_a_batch_names_its_figures_and_inputs(tmp_path):
    db, output = tmp_path / "r.db", tmp_path / "out" / "report.html"
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(json.dumps({"input": load_scenario(SCENARIO)["input"]}) + "\n")
    runner = CliRunner()
    args = ["--db", str(db)]
    ran = runner.invoke(cli, ["batch", "--scenario", SCENARIO, "--input-file", str(inputs), *args])
    assert ran.exit_code == 0, ran.output
    with Store(db) as store:
        [batch] = store.runs.batches()
        [run] = store.runs.of_batch(batch["batch_id"])
    result = runner.invoke(
        cli, ["report", "--batch", batch["batch_id"], "--output", str(output), *args]
    )
    assert result.exit_code == 0, result.output
    html = output.read_text()
    assert html.count("Plotly.newPlot") == 1 and html.count("<script>") == 2
    assert "Per-criterion pass rate over each run&#39;s final pass" in html
    for figure in (
        "Satisfied<b>100.0%</b>",
        "Mean score<b>1.00</b>",
        "Passes to satisfied (mean)<b>2.00</b>",
    ):
        assert figure in html
    assert "States the release date" in html and "Add the release date, 3 March" in html
    assert "No agreement figures: no human labels on these passes." in html
    one = runner.invoke(cli, ["report", "--run", str(run["id"]), "--output", str(output), *args])
    assert one.exit_code == 0, one.output
    assert f"<h1>Run {run['id']}</h1>" in output.read_text()


def test_report_needs_exactly_one_subject(tmp_path):
    result = CliRunner().invoke(
        cli, ["report", "--output", str(tmp_path / "r.html"), "--db", str(tmp_path / "r.db")]
    )
    assert result.exit_code == 2
    assert "give exactly one of a batch, an experiment or a run" in result.output
    assert "Traceback" not in result.output


def test_report_of_an_experiment_against_another(tmp_path):
    db, output = tmp_path / "r.db", tmp_path / "compare.html"
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text(json.dumps({"input": load_scenario(SCENARIO)["input"]}) + "\n")
    runner, args = CliRunner(), ["--db", str(db)]
    assert (
        runner.invoke(
            cli, ["batch", "--scenario", SCENARIO, "--input-file", str(inputs), *args]
        ).exit_code
        == 0
    )
    with Store(db) as store:
        [batch] = store.runs.batches()
    for _ in range(2):
        regrade = ["regrade", "--batch", batch["batch_id"], "--grader", f"replay:{SCENARIO}"]
        assert runner.invoke(cli, [*regrade, *args]).exit_code == 0
    with Store(db) as store:
        b, a = (e["id"] for e in store.experiments.find())
    result = runner.invoke(
        cli, ["report", "--experiment", str(a), "--against", str(b), "--output", str(output), *args]
    )
    assert result.exit_code == 0, result.output
    html = output.read_text()
    assert f"<h1>Experiment {a}</h1>" in html
    assert f"Compared with experiment {b}" in html and "A pass rate" in html
    assert f"Agreement with experiment {b}" in html
    assert "each re-graded source pass once" in html
    bad = runner.invoke(
        cli, ["report", "--batch", "x", "--against", "1", "--output", str(output), *args]
    )
    assert bad.exit_code == 2 and "--against compares two experiments" in bad.output


def test_report_shows_agreement_where_there_are_labels(tmp_path):
    from tests.report.test_gate import _labelled_batch

    db = tmp_path / "g.db"
    batch_id = _labelled_batch(db, tmp_path)
    with Store(db) as store:
        html = report_html(store, batch_id=batch_id, item_charts=False)
    assert "Labelled verdicts<b>4</b>" in html and "Cohen&#39;s kappa<b>0.500</b>" in html
    assert "Agreement<b>75.0%</b>" in html
    # Per criterion, then overall, with the confusion counts (judge as predictor).
    assert "<th>judge pass / human fail</th>" in html
    assert (
        "<td>Three lines</td><td>4</td><td>75.0%</td><td>0.500</td><td>1</td><td>1</td><td>0</td><td>2</td>"
        in html
    )
    assert html.count("data-fig=") == 2  # the summary's two charts, no input's


def test_report_and_gate_files_get_a_new_files_mode_and_a_fifo_is_written_in_place(tmp_path):
    """Written by the one output helper: not a 0600 temporary renamed into place, and a FIFO
    stays a FIFO (issue 22 item 1's rule, for the report and the gate's files too)."""
    import os
    import stat
    import threading

    from click.testing import CliRunner

    from rubric_core.cli import cli

    store, batch_id = _hostile_batch(tmp_path)
    store.close()
    db = str(tmp_path / "r.db")
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    expected = stat.S_IMODE(plain.stat().st_mode)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        cli, ["report", "--batch", batch_id, "--output", str(out), "--db", db]
    )
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(out.stat().st_mode) == expected
    junit = tmp_path / "results.xml"
    result = CliRunner().invoke(
        cli, ["gate", "--batch", batch_id, "--junit", str(junit), "--db", db]
    )
    assert result.exit_code in (0, 1), result.output
    assert stat.S_IMODE(junit.stat().st_mode) == expected
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = CliRunner().invoke(
        cli, ["report", "--batch", batch_id, "--output", str(fifo), "--db", db]
    )
    reader.join(60)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(fifo.stat().st_mode) and got and got[0].startswith(b"<!DOCTYPE html")
