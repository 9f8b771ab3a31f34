"""Every test asserts an outcome (issue #31 §4): a test function of ``tests/`` holds an
``assert``, a ``pytest.raises``/``warns``/``fail``, a ``raise AssertionError``, or calls a
helper of ``tests/`` that does (helpers calling helpers count; a helper is found by name in
its own file, through an import of another module of ``tests/``, or as a method of a class
of its own file)."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).parent
PYTEST_CHECKS = frozenset({"raises", "warns", "fail", "deprecated_call"})

Helper = tuple[str, str]  # (module of tests/, function name)


@dataclass
class ScannedModule:
    """One module of ``tests/``: its functions, and the names it takes from other test modules."""

    name: str
    tree: ast.Module
    functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=list)
    imported: dict[str, Helper] = field(default_factory=dict)  # local name -> helper elsewhere
    modules: dict[str, str] = field(default_factory=dict)  # local name -> test module
    methods: set[str] = field(default_factory=set)  # of the classes the module defines

    @classmethod
    def parse(cls, name: str, source: str, test_modules: set[str]) -> ScannedModule:
        module = cls(name, ast.parse(source))
        for node in ast.walk(module.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                module.functions.append(node)
            elif isinstance(node, ast.ClassDef):
                module.methods.update(f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))
            elif isinstance(node, ast.ImportFrom) and node.module in test_modules and not node.level:
                for alias in node.names:
                    module.imported[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in test_modules:
                        module.modules[alias.asname or alias.name] = alias.name
        return module

    def calls(self, node: ast.AST) -> set[Helper]:
        """The helpers of ``tests/`` that ``node`` calls, as far as names tell."""
        out = set()
        for call in ast.walk(node):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            if isinstance(func, ast.Name):
                out.add(self.imported.get(func.id, (self.name, func.id)))
            elif isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else None
                if owner in self.modules:
                    out.add((self.modules[owner], func.attr))
                elif func.attr in self.methods:
                    out.add((self.name, func.attr))
        return out


def asserts_itself(node: ast.AST) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Assert):
            return True
        if isinstance(inner, ast.Raise) and inner.exc is not None:
            raised = inner.exc.func if isinstance(inner.exc, ast.Call) else inner.exc
            if isinstance(raised, ast.Name) and raised.id == "AssertionError":
                return True
        if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                and isinstance(inner.func.value, ast.Name) and inner.func.value.id == "pytest"
                and inner.func.attr in PYTEST_CHECKS):
            return True
    return False


def unasserting_tests(sources: dict[str, str]) -> list[str]:
    """``module:line name`` of each test function that asserts nothing, directly or through helpers."""
    modules = [ScannedModule.parse(name, source, set(sources)) for name, source in sources.items()]
    asserting = {(m.name, f.name) for m in modules for f in m.functions if asserts_itself(f)}
    while True:  # helpers that call asserting helpers assert too
        more = {(m.name, f.name) for m in modules for f in m.functions
                if (m.name, f.name) not in asserting and m.calls(f) & asserting}
        if not more:
            break
        asserting |= more
    return sorted(f"{m.name}:{f.lineno} {f.name}" for m in modules for f in m.functions
                  if f.name.startswith("test") and (m.name, f.name) not in asserting)


def test_every_test_asserts_an_outcome() -> None:
    sources = {p.stem: p.read_text(encoding="utf-8") for p in sorted(TESTS.glob("*.py"))}
    assert len(sources) > 50
    assert unasserting_tests(sources) == []


def test_the_scan_finds_a_test_that_only_calls() -> None:
    helpers = "def check_it(x):\n    assert x\n"
    tests = (
        "import pytest\nfrom helpers import check_it\n"
        "def helper(x):\n    check_it(x)\n"
        "def test_through_a_helper():\n    helper(1)\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n"
        "def test_only_calls():\n    int('1')\n"
        "def test_calls_a_library_function_of_the_same_name():\n    other.helper(1)\n"
    )
    assert unasserting_tests({"helpers": helpers, "t": tests}) == [
        "t:10 test_only_calls", "t:12 test_calls_a_library_function_of_the_same_name"]
