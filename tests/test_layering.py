"""The layers of rubric_core, enforced: each module imports only from the layers below it.

The order is the one DEVELOPERS.md describes. Imports are read from the source (module
level and inside functions alike), so a lazy import cannot hide a dependency that points
the wrong way. The library never imports Streamlit, and nothing in it imports `ui`.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import rubric_core

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rubric_core"

# Lowest first. A module may import rubric_core modules of its own rank or below.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "extras"),
    ("schema",),
    # check_registry holds the names and argument rules of code checks (no running), so
    # the parser can validate `{lines == 3}` without importing `tools`; scoring reads
    # parsed criteria and verdicts only. Both are pure functions of rubric values.
    # cells: spreadsheet-cell rules (formula neutralising, CSV quoting), pure string functions.
    # model_check: the agent-middleware base that checks before each model call (LangChain only).
    ("check_registry", "rubric", "messages", "scoring", "cells", "model_check"),
    ("evaluate",),
    ("tools",),
    ("grader",),
    ("middleware", "attempt"),
    ("models",),
    ("store",),
    ("runs",),
    ("export",),
    ("ui",),
    ("cli", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}

# What each part may not import even though it sits above: the loop knows nothing of where
# its results are kept or how they are shown.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "middleware": ("store", "runs", "export", "ui", "cli"),
    "grader": ("store", "runs", "export", "ui", "cli", "middleware"),
    "runs": ("ui", "cli"),
    "store": ("runs", "ui", "cli", "middleware"),
    "cli": ("ui",),
}


def _top(module: str) -> str:
    """`rubric_core.store.sqlite` -> `store`; `rubric_core.rubric` -> `rubric`."""
    return module.split(".")[1]


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) == 1:
            continue  # rubric_core/__init__.py: the public surface re-exports every layer
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in names if name.startswith("rubric_core.")}


def test_every_library_module_has_a_layer() -> None:
    unknown = sorted({_top(m) for m in _modules()} - set(RANK))
    assert not unknown, f"give these parts of rubric_core a layer in LAYERS: {unknown}"


def test_imports_point_down_the_layers() -> None:
    wrong = []
    modules = _modules()
    for module, path in modules.items():
        part = _top(module)
        for imported in _imports(module, path):
            target = _top(imported)
            if target == part or target not in RANK:
                continue
            if RANK[target] > RANK[part] or target in FORBIDDEN.get(part, ()):
                wrong.append(f"{module} imports {imported}")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(wrong))


def test_nothing_in_the_library_imports_ui() -> None:
    users = sorted(
        module
        for module, path in _modules().items()
        if _top(module) != "ui" and any(_top(name) == "ui" for name in _imports(module, path))
    )
    assert users == [], f"rubric_core.ui is for the dashboard only, imported by {users}"


def test_no_module_is_a_grab_bag() -> None:
    # About 600 lines hold one concept; past 700 a module is two concepts or more.
    long = sorted(
        f"{path.relative_to(ROOT)} ({count} lines)"
        for path in PACKAGE.rglob("*.py")
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > 700
    )
    assert not long, f"split these modules along their concepts: {long}"


def test_no_top_level_pages_folder() -> None:
    # Streamlit 1.67 runs a deep-linked first request in legacy multipage mode when a
    # `pages/` folder sits beside the entry script, skipping app.py's st.navigation frame.
    assert not (ROOT / "pages").exists(), (
        "a top-level pages/ folder switches Streamlit into legacy multipage mode; "
        "page files belong in app_pages/"
    )
    assert (ROOT / "app_pages").is_dir()


def test_no_rubric_core_module_imports_streamlit() -> None:
    modules = sorted(
        info.name
        for info in pkgutil.walk_packages(rubric_core.__path__, prefix="rubric_core.")
        if not info.name.endswith("__main__")
    )
    assert "rubric_core.middleware" in modules and "rubric_core.ui.charts" in modules
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'streamlit'))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip() == "[]"


# The dashboard's seam: app.py, app_pages/ and app_widgets/ reach the library through its
# presentation layer, the store's public names and the errors, never through its insides.
DASHBOARD_ALLOWED = ("rubric_core.ui", "rubric_core.errors", "rubric_core.workbench")
DASHBOARD_ALLOWED_FOR_NOW = ("rubric_core.runs",)  # to go: service calls move to workbench
DASHBOARD_LINES = {"app_pages": 450, "app_widgets": 300, ".": 450}
"""Longest file of each dashboard folder (app.py counts as a page)."""


def _dashboard_files() -> list[Path]:
    return [
        ROOT / "app.py",
        *sorted((ROOT / "app_pages").glob("*.py")),
        *sorted((ROOT / "app_widgets").glob("*.py")),
    ]


def _all_imports(path: Path) -> set[str]:
    """What a file imports, lazy imports too: `module` of an import, `module.name` of a
    from-import (`from rubric_core import ui` is `rubric_core.ui`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _dashboard_may_import(name: str) -> bool:
    from rubric_core import store

    if name in ("rubric_core.store", *(f"rubric_core.store.{n}" for n in store.__all__)):
        return True
    return any(
        name == allowed or name.startswith(f"{allowed}.")
        for allowed in (*DASHBOARD_ALLOWED, *DASHBOARD_ALLOWED_FOR_NOW)
    )


def test_dashboard_reaches_the_library_through_its_seam() -> None:
    wrong = []
    for path in _dashboard_files():
        where = path.relative_to(ROOT)
        for name in sorted(_all_imports(path)):
            if name == "sqlite3" or name.startswith("sqlite3."):
                wrong.append(f"{where} imports {name} (the store owns the database)")
            elif (name == "rubric_core" or name.startswith("rubric_core.")) and not (
                _dashboard_may_import(name)
            ):
                wrong.append(f"{where} imports {name}: take it from a rubric_core.ui module")
        count = len(path.read_text(encoding="utf-8").splitlines())
        limit = DASHBOARD_LINES[path.parent.name if path.parent != ROOT else "."]
        if count > limit:
            wrong.append(f"{where} has {count} lines, over {limit}: split it along its concepts")
    assert not wrong, "the dashboard past its seam:\n" + "\n".join(wrong)
