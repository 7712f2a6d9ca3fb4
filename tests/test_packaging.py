"""The distribution: its extras, the core install, and a feature whose extra is missing.

The fast tests read `pyproject.toml` and `requirements.txt` and block a module in a child
interpreter (`sys.modules[name] = None`) to see the `MissingExtra` message. The tests
marked `packaging` build the wheel from a copy of the sources, install it without extras
into a fresh venv (its dependencies come from PyPI, through pip's cache) and use the
library there; the venv is built once per session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import venv
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from packaging.requirements import Requirement

from rubric_core.extras import EXTRAS, MissingExtra, require

REPO = Path(__file__).resolve().parents[1]

HEAVY = ("streamlit", "ray", "psycopg", "psycopg_pool", "sklearn", "plotly", "pandas")
"""Top-level modules the core install must neither install nor import."""

NOT_IN_CORE = ("streamlit", "ray", "psycopg", "scikit-learn", "plotly", "pandas", "pytest")
"""Distributions `pip install rubric-studio` must not bring."""


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _run(args: list[str], *, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `args` outside any venv this session has on (no `PYTHONPATH`, no `VIRTUAL_ENV`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        args, capture_output=True, text=True, cwd=cwd, env=env, timeout=480, check=False
    )
    if ok:
        assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _child(code: str, *, python: str = sys.executable, cwd: Path = REPO) -> dict[str, Any]:
    """Run `code` in a fresh interpreter; it prints one JSON object, returned here."""
    done = _run([python, "-c", textwrap.dedent(code)], cwd=cwd)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# --------------------------------------------------------------------------- extras.require


def test_require_names_the_extra_and_the_pip_command() -> None:
    with pytest.raises(MissingExtra) as caught:
        require("no_such_module_here.sub", "workbench")
    error = caught.value
    assert str(error) == (
        "no_such_module_here.sub is not installed, and agreement statistics (Cohen's kappa) "
        "need it: pip install 'rubric-studio[workbench]'"
    )
    assert (error.module, error.extra) == ("no_such_module_here.sub", "workbench")
    # One exception for both audiences: the library's base and what `import` raises.
    assert isinstance(error, ImportError)
    assert require("json", "sandbox").__name__ == "json"


def test_require_refuses_an_unknown_extra() -> None:
    with pytest.raises(ValueError, match="unknown extra 'rays'; known: dashboard, workbench"):
        require("json", "rays")


def test_require_shows_a_broken_installed_extra_as_it_is(tmp_path: Path, monkeypatch) -> None:
    # The extra's package is there but imports something missing: that is the fault shown.
    (tmp_path / "half_installed.py").write_text("import no_such_dependency_of_it\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as caught:
        require("half_installed", "ray")
    assert not isinstance(caught.value, MissingExtra)
    assert caught.value.name == "no_such_dependency_of_it"


# --------------------------------------------------------------------------- declarations


def test_every_extra_is_declared_and_all_holds_the_others() -> None:
    declared = _pyproject()["project"]["optional-dependencies"]
    assert set(declared) == set(EXTRAS)
    (everything,) = declared["all"]
    assert Requirement(everything).name == "rubric-studio"
    assert Requirement(everything).extras == set(EXTRAS) - {"all"}


def test_the_core_dependencies_leave_the_optional_parts_out() -> None:
    core = {Requirement(r).name for r in _pyproject()["project"]["dependencies"]}
    assert core >= {
        "langchain",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "sqlite-utils",
        "jsonschema",
        "tenacity",
        "click",
        "tqdm",
    }
    optional = {
        Requirement(r).name
        for name, reqs in _pyproject()["project"]["optional-dependencies"].items()
        if name != "all"
        for r in reqs
    }
    assert not core & optional
    assert not core & set(NOT_IN_CORE)


def test_requirements_txt_pins_every_declared_dependency_within_its_range() -> None:
    lines = [
        line.strip()
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[0] == "-e .[all]"
    pins = {Requirement(line).name: Requirement(line) for line in lines[1:]}
    assert all(str(pin.specifier).startswith("==") for pin in pins.values())
    project = _pyproject()["project"]
    declared = [Requirement(r) for r in project["dependencies"]]
    declared += [
        Requirement(r)
        for name, reqs in project["optional-dependencies"].items()
        if name != "all"
        for r in reqs
    ]
    unpinned_on_purpose = {"pydantic", "typing-extensions"}  # langchain-core's choice
    for requirement in declared:
        if requirement.name in unpinned_on_purpose:
            continue
        pin = pins.get(requirement.name)
        assert pin is not None, f"requirements.txt pins no {requirement.name}"
        version = str(pin.specifier).removeprefix("==")
        assert requirement.specifier.contains(version), f"{pin} is outside {requirement}"


def test_the_scenarios_are_package_data_wherever_they_live() -> None:
    globs = _pyproject()["tool"]["setuptools"]["package-data"]["rubric_core"]
    assert "**/*.json" in globs


def test_the_packaging_marker_is_registered_and_not_deselected() -> None:
    options = _pyproject()["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("packaging:") for m in options["markers"])
    assert "packaging" not in options["addopts"]


# --------------------------------------------------------------------------- in this venv


def test_importing_the_library_loads_no_optional_part() -> None:
    found = _child(
        f"""
        import json, sys
        import rubric_core
        from rubric_core import RubricMiddleware
        print(json.dumps({{"loaded": sorted(m for m in {HEAVY!r} if m in sys.modules)}}))
        """
    )
    assert found["loaded"] == []


_BLOCK = """
import json, sys
for name in {blocked!r}:
    sys.modules[name] = None  # `import name` now fails as if it were not installed
"""


def test_a_missing_extra_is_named_by_each_guarded_feature() -> None:
    blocked = ("sklearn", "psycopg", "psycopg_pool", "plotly", "deepagents", "langchain_openai")
    code = _BLOCK.format(blocked=blocked) + textwrap.dedent(
        """
        from rubric_core.extras import MissingExtra
        said = {}

        def attempt(label, call):
            try:
                call()
            except Exception as exc:
                said[label] = [type(exc).__name__, str(exc)]

        from rubric_core.evaluate import agreement_report, pair_up
        judge = {i: {"c": i % 2 == 0} for i in range(4)}
        human = {i: {"c": i < 2} for i in range(4)}
        attempt("kappa", lambda: agreement_report(pair_up(judge, human)))
        from rubric_core.store import Store
        attempt("postgres", lambda: Store("postgresql://rubric@127.0.0.1:1/studio"))
        from rubric_core.runs.checkpoints import _open_postgres
        attempt("checkpoints", lambda: _open_postgres("postgresql://rubric@127.0.0.1:1/x"))
        attempt("ui", lambda: __import__("rubric_core.ui"))
        from rubric_core.providers import resolve_model
        attempt(
            "compatible",
            lambda: resolve_model("openai-compatible:m", base_url="http://127.0.0.1:1/v1"),
        )
        print(json.dumps(said))
        """
    )
    said = _child(code)
    expected = {
        "kappa": ("MissingExtra", "workbench"),
        "postgres": ("MissingExtra", "postgres"),
        "checkpoints": ("MissingExtra", "postgres"),
        "ui": ("MissingExtra", "dashboard"),
        "compatible": ("ModelSpecError", "openai"),
    }
    for label, (kind, extra) in expected.items():
        assert label in said, f"{label}: nothing was raised"
        assert said[label][0] == kind, said[label]
        assert f"pip install 'rubric-studio[{extra}]'" in said[label][1], said[label]


def test_the_sandbox_runner_names_its_extra_without_pytest(monkeypatch) -> None:
    from rubric_core.tools import test_runner

    monkeypatch.setattr(test_runner.importlib.util, "find_spec", lambda name: None)
    result = test_runner.run_pytest("x = 1", "def test_x(): pass")
    assert result.status == "ERROR"
    assert result.text.startswith("ERROR: pytest is not installed")
    assert "pip install 'rubric-studio[sandbox]'" in result.text


def test_cli_batch_on_ray_without_the_extra_is_one_error_line(tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text('{"input": "Write a haiku about rain."}\n')
    code = _BLOCK.format(blocked=("ray",)) + textwrap.dedent(
        f"""
        from click.testing import CliRunner
        from rubric_core.cli import cli
        args = ["batch", "--scenario", "haiku", "--input-file", {str(inputs)!r},
                "--db", {str(tmp_path / "studio.db")!r},
                "--executor", "ray", "--ray-address", "127.0.0.1:1"]
        result = CliRunner().invoke(cli, args)
        print(json.dumps({{"code": result.exit_code, "output": result.output,
                          "raised": repr(result.exception)}}))
        """
    )
    said = _child(code)
    assert said["code"] == 2, said
    assert "Error: ray is not installed" in said["output"]
    assert "pip install 'rubric-studio[ray]'" in said["output"]
    assert "Traceback" not in said["output"]


# --------------------------------------------------------------------------- the core install


class CoreInstall(NamedTuple):
    """The venv `core_venv` made: its interpreter, the wheel installed, their folder."""

    python: str
    wheel: Path
    root: Path


@pytest.fixture(scope="session")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> CoreInstall:
    """A fresh venv holding the wheel built from this checkout, without extras.

    The sources are copied first so the build writes nothing into the checkout.
    """
    root = tmp_path_factory.mktemp("core-install")
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "rubric_core",
        source / "rubric_core",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    wheels = root / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "wheel", "--no-deps", "--quiet", str(source), "-w", str(wheels)], cwd=root)
    (wheel,) = wheels.glob("rubric_studio-*.whl")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    vpip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    _run([*vpip, "install", "--quiet", str(wheel)], cwd=root)
    return CoreInstall(str(python), wheel, root)


@pytest.mark.packaging
@pytest.mark.timeout(900)  # the first test builds the venv: about 20 s with pip's cache warm
class TestCoreInstall:
    """`pip install rubric-studio` (the wheel, no extras) in a fresh venv."""

    def test_the_wheel_carries_the_library_and_its_scenarios(self, core_venv: CoreInstall) -> None:
        names = zipfile.ZipFile(core_venv.wheel).namelist()
        assert "rubric_core/__init__.py" in names
        assert "rubric_core/scenarios/haiku.json" in names
        assert not [n for n in names if n.startswith(("tests/", "app_pages/", "bench/"))]
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        text = zipfile.ZipFile(core_venv.wheel).read(metadata).decode()
        assert "Provides-Extra: ray" in text and "Provides-Extra: all" in text

    def test_it_imports_the_middleware_and_nothing_optional(self, core_venv: CoreInstall) -> None:
        python, root = core_venv.python, core_venv.root
        found = _child(
            f"""
            import json, sys
            import rubric_core
            from rubric_core import RubricMiddleware
            print(json.dumps({{
                "file": rubric_core.__file__,
                "middleware": RubricMiddleware.__name__,
                "loaded": sorted(m for m in {HEAVY!r} if m in sys.modules),
            }}))
            """,
            python=python,
            cwd=root,
        )
        assert found["middleware"] == "RubricMiddleware"
        assert "site-packages" in found["file"], found["file"]  # the wheel, not this checkout
        assert found["loaded"] == []
        shown = _run([python, "-m", "pip", "show", *NOT_IN_CORE], cwd=root, ok=False)
        assert shown.returncode != 0 and "Name:" not in shown.stdout, shown.stdout
        assert all(name in shown.stderr for name in NOT_IN_CORE), shown.stderr

    def test_it_runs_the_cli_and_names_missing_extras(self, core_venv: CoreInstall) -> None:
        python, root = core_venv.python, core_venv.root
        helped = _run([python, "-m", "rubric_core", "--help"], cwd=root)
        assert "Rubric Studio" in helped.stdout
        db = str(root / "studio.db")
        # A whole replay run on the core set: agent, grader, SQLite store and checkpointer.
        ran = _run(
            [python, "-m", "rubric_core", "run", "--scenario", "haiku", "--db", db], cwd=root
        )
        assert "satisfied" in ran.stdout
        inputs = root / "inputs.jsonl"
        inputs.write_text('{"input": "Write a haiku about rain."}\n')
        batch = [python, "-m", "rubric_core", "batch", "--scenario", "haiku", "--db", db]
        batch += ["--input-file", str(inputs), "--executor", "ray", "--ray-address", "127.0.0.1:1"]
        on_ray = _run(batch, cwd=root, ok=False)
        assert on_ray.returncode == 2, on_ray.stderr
        assert "pip install 'rubric-studio[ray]'" in on_ray.stderr
        assert "Traceback" not in on_ray.stderr
        said = _child(
            """
            import json
            from rubric_core.evaluate import agreement_report, pair_up
            from rubric_core.extras import MissingExtra
            from rubric_core.store import Store
            said = {}
            judge = {i: {"c": i % 2 == 0} for i in range(4)}
            human = {i: {"c": i < 2} for i in range(4)}
            for label, call in (
                ("kappa", lambda: agreement_report(pair_up(judge, human))),
                ("postgres", lambda: Store("postgresql://rubric@127.0.0.1:1/studio")),
            ):
                try:
                    call()
                except MissingExtra as exc:
                    said[label] = str(exc)
            print(json.dumps(said))
            """,
            python=python,
            cwd=root,
        )
        assert "pip install 'rubric-studio[workbench]'" in said["kappa"]
        assert "pip install 'rubric-studio[postgres]'" in said["postgres"]
