"""The CI gate: a batch's or an experiment's figures held to thresholds, with JUnit XML and
a Markdown summary for the pull request.

`gate_checks` turns `report.figures.Figures` (and a baseline's) into one `Check` per
threshold; `junit_xml` writes one test case per threshold (a failure when not met) and one
per input (its outcome and gaps as properties and output, never a failure: the JUnit file
fails exactly when the gate does); `markdown_summary` is the pull-request comment.
Nothing here needs an extra: the gate runs on the core install (kappa needs scikit-learn).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rubric_core.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rubric_core.report.figures import Figures, Item

__all__ = [
    "Check",
    "gate_checks",
    "gate_json",
    "junit_xml",
    "markdown_summary",
    "parse_criterion_minimum",
]

_EPSILON = 1e-9  # a rate equal to its threshold passes, whatever the float rounding


@dataclass(frozen=True)
class Check:
    """One threshold and whether the figures met it."""

    name: str
    """`min-satisfied`, `min-criterion: Cites the date`, `max-drop: satisfied rate`..."""
    passed: bool
    message: str
    """What was measured against what: `satisfied 85.0% < 90.0%`."""
    regressed: tuple[str, ...] = ()
    """For the baseline check: the criteria whose pass rate dropped too far."""


def parse_criterion_minimum(text: str) -> tuple[str, float]:
    """`"Cites the date=0.95"` -> `("Cites the date", 0.95)`; the last `=` splits.

    Examples:
        >>> parse_criterion_minimum("Cites the date = 0.95")
        ('Cites the date', 0.95)
        >>> parse_criterion_minimum("no threshold")
        Traceback (most recent call last):
        ...
        rubric_core.errors.InputError: --min-criterion 'no threshold': write NAME=RATE, as "Cites the date=0.95"
    """
    name, sep, value = text.rpartition("=")
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not sep or not name.strip() or not 0.0 <= rate <= 1.0:
        msg = f'--min-criterion {text!r}: write NAME=RATE, as "Cites the date=0.95"'
        raise InputError(msg)
    return name.strip(), rate


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _minimum(name: str, label: str, value: float | None, threshold: float, fmt=_pct) -> Check:
    if value is None:
        return Check(name, False, f"{label}: none measured, needs at least {fmt(threshold)}")
    ok = value + _EPSILON >= threshold
    sign = ">=" if ok else "<"
    return Check(name, ok, f"{label} {fmt(value)} {sign} {fmt(threshold)}")


def _kappa(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _drops(figures: Figures, baseline: Figures, max_drop: float) -> list[Check]:
    checks = []
    for label, now, before, fmt in (
        ("satisfied rate", figures.satisfied_rate, baseline.satisfied_rate, _pct),
        ("mean score", figures.mean_score, baseline.mean_score, lambda v: f"{v:.3f}"),
    ):
        if now is None or before is None:
            continue
        ok = now + _EPSILON >= before - max_drop
        checks.append(
            Check(
                f"max-drop: {label}",
                ok,
                f"{label} {fmt(now)} against {fmt(before)} in {baseline.title} "
                f"(allowed drop {max_drop:g})",
            )
        )
    regressed, lines = [], []
    for row in figures.criterion_rates:
        before = baseline.rate_of(str(row["criterion"]))
        if before is None:
            continue
        now = float(row["pass_rate"])
        if now + _EPSILON < before - max_drop:
            regressed.append(str(row["criterion"]))
            lines.append(f"{row['criterion']}: {_pct(before)} -> {_pct(now)}")
    message = (
        f"regressed criteria against {baseline.title}: " + "; ".join(lines)
        if regressed
        else f"no criterion's pass rate dropped more than {max_drop:g} below {baseline.title}"
    )
    checks.append(Check("max-drop: criteria", not regressed, message, tuple(regressed)))
    return checks


def gate_checks(
    figures: Figures,
    *,
    min_satisfied: float | None = None,
    min_score: float | None = None,
    min_kappa: float | None = None,
    min_criterion: Mapping[str, float] | None = None,
    baseline: Figures | None = None,
    max_drop: float = 0.0,
) -> list[Check]:
    """One `Check` per threshold given, in the order of the options.

    Raises:
        InputError: A `min_criterion` names no criterion of the figures.
    """
    checks = []
    if min_satisfied is not None:
        checks.append(_minimum("min-satisfied", "satisfied", figures.satisfied_rate, min_satisfied))
    if min_score is not None:
        checks.append(_minimum("min-score", "mean score", figures.mean_score, min_score, _kappa))
    if min_kappa is not None:
        kappa = figures.agreement["overall"]["kappa"] if figures.agreement else None
        check = _minimum("min-kappa", "Cohen's kappa", kappa, min_kappa, _kappa)
        if figures.agreement is None:
            check = Check(check.name, False, f"{check.message} ({figures.agreement_note})")
        checks.append(check)
    for name, threshold in (min_criterion or {}).items():
        rate = figures.rate_of(name)
        if rate is None:
            known = "; ".join(str(r["criterion"]) for r in figures.criterion_rates) or "none"
            msg = (
                f"--min-criterion {name!r}: no such criterion in {figures.title} (judged: {known})"
            )
            raise InputError(msg)
        checks.append(_minimum(f"min-criterion: {name}", name, rate, threshold))
    if baseline is not None:
        checks += _drops(figures, baseline, max_drop)
    return checks


def gate_json(figures: Figures, checks: list[Check]) -> dict[str, object]:
    """The figures and the checks as one JSON-ready object (`gate --json`)."""
    return {
        "title": figures.title,
        "kind": figures.kind,
        "ident": figures.ident,
        "rubric": {"name": figures.rubric["name"], "version": figures.rubric["version"]},
        "total": figures.total,
        "finished": figures.finished,
        "by_status": dict(figures.by_status),
        "grader_kinds": dict(figures.grader_kinds),
        "satisfied_rate": figures.satisfied_rate,
        "mean_score": figures.mean_score,
        "mean_basis": figures.mean_basis,
        "scores": list(figures.scores),
        "criterion_pass_rates": list(figures.criterion_rates),
        "pass_rate_rule": figures.final_pass_rule,
        "passed": all(c.passed for c in checks),
        "checks": [
            {
                "name": c.name,
                "passed": c.passed,
                "message": c.message,
                "regressed": list(c.regressed),
            }
            for c in checks
        ],
    }


def _input_name(number: int, text: str) -> str:
    first = " ".join(text.split())
    return f"input {number}: {first[:80]}{'…' if len(first) > 80 else ''}"


# What XML 1.0 cannot hold (NUL and most C0 controls, lone surrogates, U+FFFE/U+FFFF); the
# store keeps any text, so a stored gap or input may hold them.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: object) -> str:
    r"""Text an XML parser accepts: characters XML 1.0 forbids become U+FFFD.

    Examples:
        >>> _xml("a\x00b\x1bc\n")
        'a�b�c\n'
    """
    return _NOT_XML.sub("\ufffd", str(text))


def _reasons(item: Item) -> str:
    """Why an input failed: its final gaps, else the final pass's explanation; its error."""
    lines = [f"- {name}: {gap}" for name, gap in item.gaps]
    if not lines and item.passes and item.passes[-1].get("explanation"):
        lines.append(f"explanation: {item.passes[-1]['explanation']}")
    if item.error:
        lines.append(f"error: {item.error}")
    return "\n".join(lines) or "(no gap given)"


def junit_xml(figures: Figures, checks: list[Check]) -> bytes:
    """JUnit XML that fails exactly when the gate fails: a suite of the thresholds (one case
    each, a failure when not met) and one of the inputs, each a passing case whose
    `system-out` tells its outcome (an input that did not end satisfied has its gaps there
    and an `outcome` property): an input falls short only through a threshold, as the gate
    decides. Read by GitHub, GitLab and Jenkins."""
    root = ET.Element("testsuites", name=_xml(f"rubric_core gate: {figures.title}"))
    thresholds = ET.SubElement(root, "testsuite", name=_xml(f"{figures.title} thresholds"))
    for check in checks:
        case = ET.SubElement(
            thresholds, "testcase", classname="rubric_core.gate.thresholds", name=_xml(check.name)
        )
        message = _xml(check.message)
        if not check.passed:
            ET.SubElement(case, "failure", message=message).text = message
        else:
            ET.SubElement(case, "system-out").text = message
    failed = sum(not c.passed for c in checks)
    thresholds.set("tests", str(len(checks)))
    thresholds.set("failures", str(failed))
    inputs = ET.SubElement(root, "testsuite", name=_xml(f"{figures.title} inputs"))
    counted = ET.SubElement(ET.SubElement(inputs, "properties"), "property", name="not_satisfied")
    not_satisfied = 0
    for number, item in enumerate(figures.items, start=1):
        case = ET.SubElement(
            inputs,
            "testcase",
            classname=f"rubric_core.gate.{figures.kind}",
            name=_xml(_input_name(number, item.input)),
        )
        properties = ET.SubElement(case, "properties")
        ET.SubElement(properties, "property", name="outcome", value=_xml(item.status))
        ET.SubElement(properties, "property", name="run", value=str(item.run_id))
        text = f"{item.status} (run {item.run_id})"
        if item.status != "satisfied":
            not_satisfied += 1
            text += "\n" + _reasons(item)
        ET.SubElement(case, "system-out").text = _xml(text)
    inputs.set("tests", str(len(figures.items)))
    inputs.set("failures", "0")
    counted.set("value", str(not_satisfied))
    root.set("tests", str(len(figures.items) + len(checks)))
    root.set("failures", str(failed))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _cell(text: object) -> str:
    """Text for a Markdown table cell: one line, pipes and HTML made literal.

    Examples:
        >>> _cell("a | <b>\\nc")
        'a \\\\| &lt;b&gt; c'
    """
    flat = " ".join(str(text).split())
    return flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


FAILING_INPUTS_SHOWN = 20


def markdown_summary(figures: Figures, checks: list[Check]) -> str:
    """The gate's result for a pull-request comment: verdict, thresholds, rates, failures."""
    ok = all(c.passed for c in checks)
    rubric = figures.rubric
    lines = [
        f"## {'✅ Rubric gate passed' if ok else '❌ Rubric gate failed'}: {_cell(figures.title)}",
        "",
        f"Rubric **{_cell(rubric['name'])}** v{rubric['version']} · {figures.total} "
        f"{'gradings' if figures.kind == 'experiment' else 'runs'} · satisfied "
        f"{_pct(figures.satisfied_rate)} · mean score "
        f"{'n/a' if figures.mean_score is None else f'{figures.mean_score:.3f}'}",
        "",
    ]
    if figures.mean_basis:
        lines += [f"Mean score: {_cell(figures.mean_basis)}.", ""]
    if checks:
        lines += ["| threshold | result | measured |", "|---|---|---|"]
        lines += [
            f"| {_cell(c.name)} | {'pass' if c.passed else '**fail**'} | {_cell(c.message)} |"
            for c in checks
        ]
        lines.append("")
    else:
        lines += ["No threshold given: nothing to fail on.", ""]
    lines += [
        f"Pass rate per criterion ({_cell(figures.final_pass_rule)}):",
        "",
        "| criterion | passed | pass rate |",
        "|---|---|---|",
    ]
    lines += [
        f"| {_cell(r['criterion'])} | {r['passed']}/{r['total']} | {_pct(r['pass_rate'])} |"
        for r in figures.criterion_rates
    ]
    failing = [(n, i) for n, i in enumerate(figures.items, start=1) if i.status != "satisfied"]
    if failing:
        lines += ["", f"Inputs not satisfied: {len(failing)} of {len(figures.items)}", ""]
        for number, item in failing[:FAILING_INPUTS_SHOWN]:
            gaps = "; ".join(_reasons(item).removeprefix("- ").split("\n- "))
            lines.append(
                f"- {_cell(_input_name(number, item.input))} ({item.status}): {_cell(gaps)}"
            )
        if len(failing) > FAILING_INPUTS_SHOWN:
            lines.append(f"- … and {len(failing) - FAILING_INPUTS_SHOWN} more")
    return "\n".join(lines) + "\n"
