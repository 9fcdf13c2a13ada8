"""The layers the data goes through, lowest first: store < ingest < analysis (with replay and the
lake beside it) < outputs (with spark) < api < cli; capture apart. A module imports from its own
layer or below, never above, and no tracekit modules import each other round in a cycle (issue [16]
item 16). An import inside a function counts as much as one at the top of a module: it is the same
dependency, only later.

The package itself (`import tracekit`, `from tracekit import ...`) is the Python API (tracekit.load,
tracekit.query, ...), so it ranks as api: a lower layer takes the version from tracekit.version."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tracekit"
RANK = {"errors": -1, "internal_paths": -1, "version": -1, "store": 0, "ingest": 1, "analysis": 2, "replay": 2,
        "lake": 2, "queries": 2, "outputs": 3, "spark": 3, "api": 4, "api_wording": 4, "cli": 5, "command": 5, "__main__": 5}
ROOT_RANK = RANK["api"]


def _module(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(path): path for path in PACKAGE.rglob("*.py")}


def _rank(module):
    """The module's layer's rank; None for capture and what no layer holds (checked by no one)."""
    parts = module.split(".")
    return ROOT_RANK if len(parts) == 1 else RANK.get(parts[1])


def _imports(path):
    """The tracekit modules `path` imports, anywhere in it: `from tracekit.store import database`
    is tracekit.store.database, `from tracekit import __version__` the package itself."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and (node.module + ".").startswith("tracekit."):
            for alias in node.names:
                named = f"{node.module}.{alias.name}"
                yield named if named in MODULES else node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if (a.name + ".").startswith("tracekit."))


def import_graph():
    """{module: the tracekit modules it imports}, over every module of the package."""
    return {module: {imported for imported in _imports(path) if imported in MODULES and imported != module}
            for module, path in MODULES.items()}


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative):
    each holds every module of some import cycle."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_from_a_layer_above_its_own():
    upward = set()
    for module, path in MODULES.items():
        rank = _rank(module)
        if rank is None or module == "tracekit":
            continue
        for imported in _imports(path):
            other = _rank(imported)
            if other is not None and other > rank:
                upward.add((module, imported))
    assert sorted(upward) == [], "an import from a layer above: move what both need down a layer"


def test_no_import_cycle_between_tracekit_modules():
    assert cycles(import_graph()) == [], "an import cycle: move what the modules share into one below them"


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]
