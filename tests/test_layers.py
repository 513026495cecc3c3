"""Imports point down the layers; a test, not a convention, keeps it so.

- `baseline.models` (the records) imports nothing from baseline but itself and `baseline.errors`;
- no library module imports the front ends, `baseline.cli` and `baseline.pytest_plugin`;
- renderers (`baseline.report`) never import the CLI (covered by the rule above, named for clarity).

Every import counts, including those inside functions (the CLI imports lazily on purpose).
"""

from __future__ import annotations

import ast
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
        "    import baseline.verify\n"
    )
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    found = imported_modules(probe, "baseline.models")
    assert found >= {"baseline.models.tolerances", "baseline.cli", "baseline.verify"}
