"""Imports point down the layers; a test, not a convention, keeps it so.

- `baseline.models` (the records) imports nothing from baseline but itself and `baseline.errors`;
- no library module imports the front ends, `baseline.cli` and `baseline.pytest_plugin`;
- renderers (`baseline.report`) never import the CLI (covered by the rule above, named for clarity).

Every import counts, including those inside functions (the CLI imports lazily on purpose).
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Collection
from pathlib import Path

import pytest

import baseline

PACKAGE = Path(baseline.__file__).resolve().parent  # the source tree, or the installed wheel (`nox -s wheel`)
FRONT_ENDS = ("baseline.cli", "baseline.pytest_plugin", "baseline.__main__", "baseline.launch")
MODEL_DEPENDENCIES = ("baseline.models", "baseline.errors")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    return module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]


def imported_modules(path: Path, package: str) -> set[str]:
    """Absolute names of every module `path` (in `package`) imports, anywhere in the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importing package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from baseline import cli`
    return {name for name in found if name == "baseline" or name.startswith("baseline.")}


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def upward_imports(module: str) -> list[str]:
    imports = imported_modules(MODULES[module], package_of(MODULES[module]))
    if within(module, ("baseline.models",)):
        return sorted(name for name in imports if not within(name, MODEL_DEPENDENCIES))
    if within(module, FRONT_ENDS):
        return []
    return sorted(name for name in imports if within(name, FRONT_ENDS))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_upward_imports(module: str) -> None:
    assert upward_imports(module) == [], f"{module} imports from a layer above it"


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    source = (
        "from . import tolerances\n"
        "def render():\n"
        "    from baseline.cli import app\n"
        "    import baseline.verification.verify\n"
    )
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    found = imported_modules(probe, "baseline.models")
    assert found >= {"baseline.models.tolerances", "baseline.cli", "baseline.verification.verify"}


# Cycles. Every import of one baseline module by another is an edge, of one of three kinds:
# `runtime` (module level: runs on import), `deferred` (inside a function: runs on the call) and
# `typing` (under `if TYPE_CHECKING:`: runs never). A runtime cycle is an import-order accident
# waiting to happen; a deferred or typing one is still two modules that each need the other, a
# layer calling up into the one above it (issue 30: `jobkeys` <-> `verify` through a type,
# `locker.project` -> `selfcheck` -> `locker` through a call). So the runtime graph must be
# acyclic, and so must the graph of every import. `baseline_pytest` (the pytest entry point,
# beside the package) is a node too, and so is a literal `importlib.import_module("baseline...")`.

EdgeKinds = dict[tuple[str, str], set[str]]
NODES = {
    module_name(path): path
    for folder in (PACKAGE, PACKAGE.parent / "baseline_pytest")
    for path in sorted(folder.rglob("*.py"))
}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """The modules of `NODES` one file imports, each with the kinds of import that name it."""

    def __init__(self, module: str, package: str, nodes: Collection[str]) -> None:
        self.module, self.package, self.nodes = module, package, nodes
        self.kind = "runtime"
        self.found: EdgeKinds = {}

    def add(self, name: str) -> None:
        while name and name not in self.nodes:  # `baseline.x.Name` -> `baseline.x`
            name = name.rpartition(".")[0]
        if name and name != self.module:
            self.found.setdefault((self.module, name), set()).add(self.kind)

    def inside(self, kind: str, nodes: list[ast.stmt] | list[ast.AST]) -> None:
        outer, self.kind = self.kind, kind if self.kind != "typing" else "typing"
        for node in nodes:
            self.visit(node)
        self.kind = outer

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.inside("deferred", list(ast.iter_child_nodes(node)))

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.inside("typing", node.body)
        for other in node.orelse:
            self.visit(other)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            anchor = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base]) if base else ".".join(anchor)
        for alias in node.names:  # `from baseline import cli` imports a module, `from x import f` x
            self.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in self.nodes else base)

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        first = node.args[0] if node.args else None
        if name == "import_module" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            self.add(first.value)
        self.generic_visit(node)


def import_edges(nodes: dict[str, Path]) -> EdgeKinds:
    edges: EdgeKinds = {}
    for module, path in nodes.items():
        finder = _Imports(module, module if path.name == "__init__.py" else module.rpartition(".")[0], nodes)
        finder.visit(ast.parse(path.read_text(), str(path)))
        edges.update(finder.found)
    return edges


def cycles(edges: EdgeKinds, kinds: set[str]) -> list[list[str]]:
    """One shortest cycle through each strongly connected group of modules, as a chain
    `[a, b, ..., a]`, using only edges with one of `kinds`."""
    graph: dict[str, list[str]] = {}
    for (source, target), found in sorted(edges.items()):
        if found & kinds:
            graph.setdefault(source, []).append(target)
    chains: list[list[str]] = []
    seen: set[str] = set()
    for start in sorted(graph):
        if start in seen:
            continue
        chain = _shortest_cycle(graph, start)
        if chain:
            chains.append(chain)
            seen.update(_group(graph, start))
    return chains


def _reachable(graph: dict[str, list[str]], start: str) -> set[str]:
    found, todo = {start}, [start]
    while todo:
        for target in graph.get(todo.pop(), []):
            if target not in found:
                found.add(target)
                todo.append(target)
    return found


def _group(graph: dict[str, list[str]], start: str) -> set[str]:
    return {node for node in _reachable(graph, start) if start in _reachable(graph, node)}


def _shortest_cycle(graph: dict[str, list[str]], start: str) -> list[str] | None:
    previous: dict[str, str] = {}
    queue = [start]
    for node in queue:  # breadth first: the chain back to `start` is a shortest one
        for target in graph.get(node, []):
            if target == start:
                chain = [node]
                while chain[-1] != start:
                    chain.append(previous[chain[-1]])
                return [*reversed(chain), start]
            if target not in previous:
                previous[target] = node
                queue.append(target)
    return None


def described(chains: list[list[str]], edges: EdgeKinds) -> str:
    lines = []
    for chain in chains:
        steps = [chain[0]]
        for source, target in itertools.pairwise(chain):
            steps.append(f"-({'/'.join(sorted(edges[source, target]))})-> {target}")
        lines.append(" ".join(steps))
    return "\n".join(lines)


EDGES = import_edges(NODES)


@pytest.mark.parametrize(
    "kinds",
    [{"runtime"}, {"runtime", "deferred", "typing"}],
    ids=["module level", "every import, in functions and for type checking too"],
)
def test_no_import_cycles(kinds: set[str]) -> None:
    found = cycles(EDGES, kinds)
    assert not found, (
        "import cycles (move the piece both need to the lower module, or pass a function in):\n"
        + described(found, EDGES)
    )


def test_the_cycle_finder_sees_every_kind_of_import(tmp_path: Path) -> None:
    package = tmp_path / "baseline"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from baseline.sub.low import x\n")
    (package / "sub" / "low.py").write_text("def f():\n    from baseline import high\n")
    (package / "high.py").write_text(
        "from typing import TYPE_CHECKING\nfrom .sub import low\nif TYPE_CHECKING:\n    import baseline.mid\n"
    )
    (package / "mid.py").write_text(
        "import importlib\nfrom . import high\nimportlib.import_module('baseline.sub')\n"
    )
    nodes = {".".join(p.relative_to(tmp_path).with_suffix("").parts): p for p in package.rglob("*.py")}
    nodes = {name.removesuffix(".__init__"): path for name, path in nodes.items()}
    edges = import_edges(nodes)
    assert edges == {
        ("baseline.sub", "baseline.sub.low"): {"runtime"},
        ("baseline.sub.low", "baseline.high"): {"deferred"},
        ("baseline.high", "baseline.sub.low"): {"runtime"},
        ("baseline.high", "baseline.mid"): {"typing"},
        ("baseline.mid", "baseline.high"): {"runtime"},
        ("baseline.mid", "baseline.sub"): {"runtime"},
    }
    assert cycles(edges, {"runtime"}) == []
    assert cycles(edges, {"runtime", "deferred", "typing"}) == [
        ["baseline.high", "baseline.mid", "baseline.high"]
    ]
    assert described(cycles(edges, {"runtime", "deferred"}), edges) == (
        "baseline.high -(runtime)-> baseline.sub.low -(deferred)-> baseline.high"
    )


def test_the_records_name_the_gates_in_running_order() -> None:
    """`baseline.project.intent` checks `expect_fail` against `GATE_NAMES`, not the gates above it."""
    from baseline.gates import GATES_BY_NAME
    from baseline.models.intent import GATE_NAMES

    assert tuple(GATES_BY_NAME) == GATE_NAMES


# The layout. docs/internals.md draws the tree a newcomer reads first; a package or a root module it
# does not name is a part of the design nobody wrote down (issue 30: the Layout named 20 of 38 root
# modules). The root holds entry points and leaves only, each named in the Layout's first entry.

LAYOUT = PACKAGE.parent / "docs" / "internals.md"


def layout_block() -> str:
    text = LAYOUT.read_text(encoding="utf-8")
    start = text.index("```\n", text.index("## Layout")) + 4
    return text[start : text.index("```\n", start)]


def layout_entries() -> dict[str, str]:
    """Each entry's first column (`baseline/`, `baseline/gates/`, ...) with its description."""
    entries: dict[str, str] = {}
    current = ""
    for line in layout_block().splitlines():
        if line and not line.startswith(" "):
            current, _, description = line.partition(" ")
            entries[current] = description
        elif current:
            entries[current] += " " + line.strip()
    return entries


@pytest.mark.skipif(not LAYOUT.is_file(), reason="needs the source tree")
def test_the_layout_names_every_package_of_the_tree() -> None:
    packages = {f"baseline/{path.parent.name}/" for path in PACKAGE.glob("*/__init__.py")}
    named = {entry for entry in layout_entries() if entry.startswith("baseline/") and entry != "baseline/"}
    assert packages == named - {"baseline/data/"}


@pytest.mark.skipif(not LAYOUT.is_file(), reason="needs the source tree")
def test_the_root_holds_only_the_entry_points_and_leaves_the_layout_names() -> None:
    root = {path.name for path in PACKAGE.glob("*.py")} - {"__init__.py", "__main__.py"}
    named = set(re.findall(r"\b(\w+\.py)\b", layout_entries()["baseline/"]))
    assert root == named
