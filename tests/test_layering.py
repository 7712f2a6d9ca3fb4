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
    # config: every environment variable, read at call time; only errors below it.
    # outputs: writing a user-named path (atomic for a file, in place for a device or FIFO).
    ("errors", "extras", "config", "outputs"),
    # limits: the caps on stored free text, and cutting and quoting within them.
    ("schema", "limits"),
    # check_registry holds the names and argument rules of code checks (no running), so
    # the parser can validate `{lines == 3}` without importing `tools`; scoring reads
    # parsed criteria and verdicts only. Both are pure functions of rubric values.
    # cells: spreadsheet-cell rules (formula neutralising, CSV quoting), pure string functions.
    # model_check: the agent-middleware base that checks before each model call (LangChain only).
    # tables: reading CSV / JSON Lines files (encodings, strict quoting, header names).
    # wording: what statuses and verdicts mean in words (status sentences, verdict marks).
    (
        "check_registry",
        "rubric",
        "messages",
        "scoring",
        "cells",
        "model_check",
        "tables",
        "wording",
    ),
    ("evaluate",),
    ("tools",),
    # providers: the registry of model specs and each provider's quirks (client settings,
    # cache markers, the verdict schema's dialect); below the grader, which follows them.
    ("providers",),
    ("grader",),
    # pipeline: one grading pass (checks, judges, derive, score, the record), which the
    # loop, grade-only runs, re-grading and the person grader all call.
    ("pipeline",),
    ("middleware", "attempt"),
    ("store",),
    # summary: every figure of a batch or an experiment, read from the store once; the
    # pages' models, the CLI, the report, the gate and the exports all read it.
    ("summary",),
    ("runs",),
    ("batch",),
    ("workbench",),
    ("export",),
    ("ui",),
    # report: results that leave the studio (the HTML report draws the pages' own charts,
    # so it sits on `ui`; the CI gate beside it needs nothing above `workbench`).
    ("report",),
    ("cli", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}

# What each part may not import even though it sits above: the loop knows nothing of where
# its results are kept or how they are shown.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "middleware": ("store", "runs", "batch", "workbench", "export", "ui", "cli"),
    "grader": (
        "store",
        "runs",
        "batch",
        "workbench",
        "export",
        "ui",
        "cli",
        "pipeline",
        "middleware",
    ),
    "pipeline": ("store", "runs", "batch", "workbench", "export", "ui", "cli", "middleware"),
    "runs": ("ui", "cli"),
    "batch": ("ui", "cli"),
    "workbench": ("ui", "cli"),
    "store": ("runs", "batch", "workbench", "ui", "cli", "middleware"),
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
        if _top(module) not in ("ui", "report")
        and any(_top(name) == "ui" for name in _imports(module, path))
    )
    assert users == [], (
        f"rubric_core.ui is for the dashboard and the report only, imported by {users}"
    )


# A module past this many lines is usually more than one concept. The ones that are long and
# still one concept are named here with that concept; any other long module fails the test
# below, which lists its top-level definitions so the split can follow them.
SOFT_LIMIT = 450
LONG_BUT_ONE_CONCEPT: dict[str, str] = {
    "rubric_core/tools/sandbox.py": "the bubblewrap sandbox of run_test_suite and its limits",
    "rubric_core/rubric.py": "parsing and validating a rubric's text",
    "rubric_core/ui/charts.py": "the plotly figures of the pages",
    "rubric_core/grader/subagent.py": "the Grader that runs one pass, a sub-agent with tools",
    "rubric_core/workbench/grade.py": "grade-only runs: given outputs graded without an agent",
    "rubric_core/cli/running.py": "the run, batch and resume commands",
    "rubric_core/store/queries/runs.py": "the queries of the run aggregate (runs, owners, batches)",
    "rubric_core/store/queries/labels.py": "the queries of human labels and the review queues",
}


def _concepts(path: Path) -> list[str]:
    """The top-level classes and functions of a module, with their first docstring line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = (ast.get_docstring(node) or "").strip().splitlines()
            lines = node.end_lineno - node.lineno + 1 if node.end_lineno else 0
            found.append(f"    {node.name} ({lines} lines){': ' + doc[0] if doc else ''}")
    return found


def test_long_modules_are_one_named_concept() -> None:
    too_long, stale = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(ROOT))
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > SOFT_LIMIT and name not in LONG_BUT_ONE_CONCEPT:
            too_long.append(f"{name} ({count} lines) holds:\n" + "\n".join(_concepts(path)))
        elif count <= SOFT_LIMIT and name in LONG_BUT_ONE_CONCEPT:
            stale.append(name)
    assert not too_long, (
        f"past {SOFT_LIMIT} lines: split along these concepts, or name the one concept in "
        "LONG_BUT_ONE_CONCEPT:\n" + "\n".join(too_long)
    )
    assert not stale, f"no longer long, take them out of LONG_BUT_ONE_CONCEPT: {stale}"


# The order inside the feature packages: a module imports only the siblings before it.
PACKAGE_ORDER: dict[str, tuple[str, ...]] = {
    "runs": (
        "spec",
        "agents",
        "shared",
        "validate",
        "checkpoints",
        "recording",
        "handle",
        "prepare",
        "execute",
        "resume",
    ),
    "batch": (
        "job",
        "common",
        "summary",
        "limits",
        "worker",
        "threads",
        "processes",
        "ray_pool",
        "ray_cluster",
        "run",
    ),
    "workbench": ("datasets", "grade", "regrade", "background", "agreement"),
}


def test_feature_packages_keep_their_order() -> None:
    modules = _modules()
    wrong, unknown = [], []
    for package, order in PACKAGE_ORDER.items():
        present = {m.split(".")[2] for m in modules if m.count(".") >= 2 and _top(m) == package}
        unknown += [f"{package}.{name}" for name in sorted(present - set(order))]
        for module, path in modules.items():
            if _top(module) != package or module.count(".") < 2:
                continue
            own = order.index(module.split(".")[2]) if module.split(".")[2] in order else -1
            for imported in _imports(module, path):
                parts = imported.split(".")
                if len(parts) < 3 or parts[1] != package or parts[2] not in order:
                    continue
                if parts[2] != module.split(".")[2] and order.index(parts[2]) > own:
                    wrong.append(f"{module} imports {imported}")
    assert not unknown, f"give these modules a place in PACKAGE_ORDER: {unknown}"
    assert not wrong, "imports against the package order:\n" + "\n".join(sorted(set(wrong)))


def _module_graph() -> dict[str, set[str]]:
    """Module -> the rubric_core modules it imports (lazy ones too).

    `from pkg import name` points at `pkg.name` when that is a module, else at `pkg`; a
    dotted name that is no module (`pkg.mod.attr`) points at the module that holds it.
    """
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name not in modules and name.count(".") > 1:
            name = name.rsplit(".", 1)[0]
        return name if name in modules else None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*base, node.module] if node.module else base)
                else:
                    source = node.module or ""
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    targets.add(sub if sub in modules else resolve(source))
        graph[module] = {t for t in targets if t and t != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycles_finds_a_circle_hidden_by_a_lazy_import() -> None:
    # The detector itself: a -> b at module level and b -> a inside a function is a circle.
    graph = {"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.a"}}
    assert _cycles(graph) == [["p.a", "p.b"]]


def test_no_import_circles_in_the_library() -> None:
    # Inside a package and across them: a package's __init__ counts as a module of its own,
    # so a submodule that imports from its package while the package imports it is a circle.
    circles = _cycles(_module_graph())
    assert circles == [], "import circles (lazy imports included):\n" + "\n".join(
        " <-> ".join(circle) for circle in circles
    )


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
DASHBOARD_ALLOWED = (
    "rubric_core.ui",
    "rubric_core.errors",
    "rubric_core.workbench",
    "rubric_core.report",
)
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
    return any(name == allowed or name.startswith(f"{allowed}.") for allowed in DASHBOARD_ALLOWED)


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


def test_page_scripts_hold_no_floating_strings() -> None:
    # Streamlit's magic writes a script's bare expressions to the page, so a string after an
    # assignment (an attribute docstring in a module) shows up as text at the top of a page.
    floating = []
    for path in [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py"))]:
        body = ast.parse(path.read_text(encoding="utf-8")).body
        floating += [
            f"{path.relative_to(ROOT)}:{node.lineno}"
            for node in body[1:]  # the first may be the script's docstring, which is not drawn
            if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ]
    assert floating == [], f"strings Streamlit would draw on the page (use a comment): {floating}"
