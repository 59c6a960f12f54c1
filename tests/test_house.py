"""The package's shape, read from its source (docs/design.md, which way the imports run): no
import circle, no module over 450 lines, no function over 60. Imports made inside a function
count as much as those at the top: each is an arrow a reader has to follow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hvd_linreg"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
# The modules directly in hvd_linreg/ (__init__ and __main__ included): the command line, the
# settings, the recipes, the library and the report; everything else is in a package
MAX_TOP_LEVEL_MODULES = 12
# The one import that runs back up: `hvd_linreg.fit` is the package's lazy export of the library.
LAZY_EXPORTS = {("hvd_linreg", "hvd_linreg.library")}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The package's modules that module `name` imports, anywhere in it: `from a.b import c`
    is a.b.c where that is a module, else a.b."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return {m for m in found if m in MODULES and m != name and (name, m) not in LAZY_EXPORTS}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_circle():
    graph = {name: imports_of(name) for name in MODULES}
    assert circles(graph) == []


def room(name: str) -> str:
    """A module's room: the folder it is in under the package (hvd_linreg.solvers for
    hvd_linreg.solvers.irls), or the module itself at the package's top."""
    parts = name.split(".")
    folder = ".".join(parts[:2])
    return folder if len(parts) > 2 or (folder != name and folder in MODULES) else name


def test_the_folders_have_no_import_circle():
    """Each folder taken as one room: its modules import others' and are imported by them,
    but never in a loop of folders (solvers -> scoring -> solvers would be one)."""
    graph: dict[str, set[str]] = {}
    for name in MODULES:
        graph.setdefault(room(name), set()).update(
            room(m) for m in imports_of(name) if room(m) != room(name)
        )
    for targets in list(graph.values()):
        for t in targets:
            graph.setdefault(t, set())
    assert circles(graph) == []


def test_an_import_circle_is_found():
    """The check itself: a circle of three and a module on its own."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_450_lines(name):
    assert len(MODULES[name].read_text().splitlines()) <= MAX_MODULE_LINES


def test_no_function_is_over_60_lines():
    long = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


def test_only_the_solvers_and_families_read_a_familys_solver():
    """Which exact solver fits a family (Family.SOLVER) is the solvers' business and the
    families'; the recipe, the report and the API ask Family.exact and Family.as_fitted."""
    readers = [
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        if not name.startswith(("hvd_linreg.solvers", "hvd_linreg.families"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "SOLVER"
    ]
    assert readers == []


def test_the_package_shows_its_rooms():
    """At most MAX_TOP_LEVEL_MODULES modules directly in hvd_linreg/: the runtime, the data,
    the model maths, SGD, the model file and the estimators are packages (docs/design.md)."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_the_families_import_no_tensorflow():
    """A family is a distribution and a link: SGD's TensorFlow model and functions live in
    sgd/, which registers TensorFlow's functions with the families' maths."""
    found = []
    for name, path in MODULES.items():
        if not name.startswith("hvd_linreg.families"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            named = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                named = [node.module]
            found += [f"{name}: {m}" for m in named if m.partition(".")[0] == "tensorflow"]
    assert found == []
