"""The layers the data goes through, lowest first: store < ingest < analysis (with replay and the
lake beside it) < outputs (with spark) < api < cli; capture apart. A module imports from its own
layer or below, never above (issue [16] item 16). The upward imports that remain are listed here
to be removed, one by one: a new one fails, and so does one of these once it is gone (take it off
the list)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tracekit"
RANK = {"errors": -1, "internal_paths": -1, "store": 0, "ingest": 1, "analysis": 2, "replay": 2, "lake": 2,
        "queries": 2, "outputs": 3, "spark": 3, "api": 4, "api_wording": 4, "cli": 5, "__main__": 5}
STILL_UPWARD = {
    ("tracekit.store.samples", "tracekit.ingest.loader"),
}


def _module(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tracekit."):
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("tracekit."))


def test_no_module_imports_from_a_layer_above_its_own():
    upward = set()
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)
        layer = _layer(module)
        if layer in (None, "capture") or layer not in RANK:
            continue
        for imported in _imports(path):
            other = _layer(imported)
            if other in RANK and other != layer and RANK[other] > RANK[layer]:
                upward.add((module, imported))
    assert upward - STILL_UPWARD == set(), "a new import from a layer above"
    assert STILL_UPWARD - upward == set(), "gone: take it off STILL_UPWARD"
