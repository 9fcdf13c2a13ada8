"""The test suite's own shape (issue [16]): no test module imports another (shared helpers live in
conftest.py and the *_checks.py modules), and one helper runs the CLI."""

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def _imports(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def test_no_test_module_imports_another():
    modules = sorted(TESTS.glob("test_*.py"))
    assert len(modules) > 40
    offenders = {p.name: m for p in modules for m in _imports(p) if m.split(".")[0].startswith("test_")}
    assert not offenders


def test_the_cli_is_run_by_one_helper():
    defining = [p.name for p in TESTS.glob("test_*.py")
                if any(isinstance(n, ast.FunctionDef) and n.name in ("invoke", "invoke_cli")
                       for n in ast.parse(p.read_text(encoding="utf-8")).body)]
    assert defining == []
