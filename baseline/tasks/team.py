"""The team's own post-processing as the task test: find its module in the project, pin its
sources, run it in a child process under a time limit, and judge golden against candidate.

The functions are the team's code, trusted the way a `conftest.py` is; what is *not* trusted
is the name, which a pull request can change. So a name resolves only to a file inside the
project (a symlink that leaves it is refused), the child imports it with the project root
first on its path and checks that the module it got is that file (an installed package of
the same name cannot stand in for it), and the lock pins the hash of its sources, which is
part of every task job's cache key: edited post-processing re-runs the gate, and a lock
whose hash was edited by hand is refused by `baseline.project.lockcheck`.

The child is a fresh interpreter per judgement, not the shared ONNX helper: team modules
stay imported in a process, and a helper reused across projects (or across edits of one)
would keep running the first version it imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baseline.errors import ConfigError, InputError
from baseline.files.textsafe import one_line
from baseline.models.task import PostprocessComparison, PostprocessSample, PostprocessTask, SampleRef
from baseline.project.paths import checked_regular_file, regular_files_under
from baseline.runtime import children
from baseline.tasks.kinds import ChangedRows, Outputs, TaskContext

if TYPE_CHECKING:
    import numpy as np

MAX_SOURCE_FILES = 256
MAX_SOURCE_BYTES = 8 * 1024 * 1024
"""A post-processing package is a few files; more than this is a folder named by mistake."""
MAX_REPLY_BYTES = 64 * 1024 * 1024
RESULT_CHARS = 2000
"""How much of each sample's result (as JSON) a report keeps."""
MAX_DIFFERENCES = 5
STDERR_TAIL = 4096
"""Bytes of the child's stderr kept for the message when it dies (its last line is quoted)."""
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_BOOT = (
    "import sys; sys.path[:] = [{root!r}] + [p for p in sys.path if p not in ('', '.')]; "
    "from baseline.tasks.team_worker import main; main()"
)


def module_file(root: Path, function: str, where: str) -> Path:
    """The project file that `package.module:function` names, refused unless it is inside `root`."""
    root = root.resolve()
    dotted = function.partition(":")[0]
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.exists() or candidate.is_symlink():
            checked_regular_file(root, candidate, f"{where}: module {dotted!r}")
            return candidate
    relative = "/".join(dotted.split("."))
    raise ConfigError(
        f"{where}: module {dotted!r} is not in the project {root} (looked for {relative}.py and "
        f"{relative}/__init__.py); put the post-processing module inside the project"
    )


def source_files(root: Path, function: str, where: str) -> list[Path]:
    """What decides the function's behaviour: every `.py` file of its top-level package (the
    module's helpers change results too), or the module alone when it is not in a package, and
    every project module those import, transitively (a helper elsewhere in the project changes
    results as much)."""
    root = root.resolve()
    file = module_file(root, function, where)
    top = root / function.partition(":")[0].split(".")[0]
    files = [file]
    if top.is_dir():
        files = [path for path in regular_files_under(root, top, where) if path.suffix == ".py"]
    files = imported_project_files(root, files, where)
    if len(files) > MAX_SOURCE_FILES:
        raise ConfigError(
            f"{where}: the post-processing reaches {len(files)} Python files of the project (more "
            f"than {MAX_SOURCE_FILES}); keep it in a small package of its own"
        )
    return files


def imported_project_files(root: Path, files: list[Path], where: str) -> list[Path]:
    """`files` and every module of the project they import (`import a.b`, `from a import b`,
    relative imports), read from their syntax: a module the code loads by name at run time is
    not found, and a file that does not parse is left for the child to report."""
    found = {path: None for path in files}
    todo = list(files)
    while todo and len(found) <= MAX_SOURCE_FILES:
        path = todo.pop()
        for dotted in _imported_names(root, path):
            for module in _project_modules(root, dotted, where):
                if module not in found:
                    found[module] = None
                    todo.append(module)
    return sorted(found)


def _imported_names(root: Path, path: Path) -> list[str]:
    """Dotted names `path` imports, relative ones made absolute from its place in the project."""
    import ast

    try:
        tree = ast.parse(path.read_bytes()[:MAX_SOURCE_BYTES])
    except (SyntaxError, ValueError):
        return []
    package = path.relative_to(root).parent.parts
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names += [f"{module}.{alias.name}" if module else alias.name for alias in node.names]
            names += [module] if module else []
    return names


def _project_modules(root: Path, dotted: str, where: str) -> list[Path]:
    """The project files importing `dotted` runs: each package's `__init__.py` on the way and the
    module itself (none for a name outside the project: numpy, the standard library)."""
    modules: list[Path] = []
    folder = root
    for part in dotted.split("."):
        if not part.isidentifier():
            return modules
        for candidate in (folder / part / "__init__.py", folder / f"{part}.py"):
            if candidate.is_file():
                modules.append(checked_regular_file(root, candidate, f"{where}: module {dotted!r}"))
        folder = folder / part
        if not folder.is_dir():
            break
    return modules


def data_files(root: Path, spec: PostprocessTask, where: str) -> list[Path]:
    """The project files the task declares its functions read, each a regular file inside it."""
    files = []
    for relative in spec.data:
        if Path(relative).is_absolute() or ".." in Path(relative).parts:
            raise ConfigError(f"{where}.data: {relative!r} must be a path inside the project, from its root")
        files.append(checked_regular_file(root, root / relative, f"{where}.data"))
    return files


def sources_hash(root: Path, spec: PostprocessTask, where: str) -> str:
    """sha256 over the relative paths and bytes of the sources of `postprocess` and `compare`,
    the project modules they import and the declared data files."""
    root = root.resolve()
    files = set(source_files(root, spec.postprocess, f"{where}.postprocess"))
    if spec.compare is not None:
        files |= set(source_files(root, spec.compare, f"{where}.compare"))
    files |= set(data_files(root, spec, where))
    digest, total = hashlib.sha256(), 0
    for path in sorted(files):
        data = path.read_bytes()
        total += len(data)
        if total > MAX_SOURCE_BYTES:
            raise ConfigError(f"{where}: the post-processing sources exceed {MAX_SOURCE_BYTES} bytes")
        name = path.relative_to(root).as_posix().encode()
        digest.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def pinned(root: Path, spec: PostprocessTask, where: str) -> PostprocessTask:
    """The task as the lock pins it: with the hash of its sources as they are now."""
    return spec.model_copy(update={"sha256": sources_hash(root, spec, where)})


def compare_postprocess(
    spec: PostprocessTask,
    golden: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    root: Path,
    model: str = "",
) -> PostprocessComparison:
    """Run the team's post-processing on every sample of both sides and judge each pair."""
    where = (
        f"model {model!r}: postprocess {spec.postprocess!r}" if model else f"postprocess {spec.postprocess!r}"
    )
    if spec.sha256 is not None and sources_hash(root, spec, where) != spec.sha256:
        raise ConfigError(
            f"{where}: the post-processing sources changed since the lock was written; run `baseline lock`"
        )
    files = {name: str(module_file(root, name, where)) for name in _functions(spec)}
    reply = _run_child(spec, root, files, _per_sample(spec, golden), _per_sample(spec, candidate), where)
    return PostprocessComparison(
        function=spec.postprocess,
        comparator=spec.compare or "equal results",
        samples=[_sample(index, reply, spec.compare is None) for index in range(len(reply["golden"]))],
    )


def _functions(spec: PostprocessTask) -> list[str]:
    return [spec.postprocess] + ([spec.compare] if spec.compare is not None else [])


def _per_sample(spec: PostprocessTask, outputs: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """One `{name: array}` per fixture sample, with the model's own shape (the stacked axis peeled)."""
    names = spec.outputs or sorted(outputs)
    missing = [name for name in names if name not in outputs]
    if missing:
        raise InputError(
            f"postprocess {spec.postprocess!r}: no output {missing[0]!r} (outputs: {sorted(outputs)})"
        )
    count = min(len(outputs[name]) for name in names) if names else 0
    return [{name: outputs[name][index] for name in names} for index in range(count)]


def _run_child(
    spec: PostprocessTask,
    root: Path,
    files: dict[str, str],
    golden: list[dict[str, np.ndarray]],
    candidate: list[dict[str, np.ndarray]],
    where: str,
) -> dict[str, Any]:
    request = pickle.dumps(
        {
            "root": str(root.resolve()),
            "functions": files,
            "postprocess": spec.postprocess,
            "compare": spec.compare,
            "golden": golden,
            "candidate": candidate,
            "where": where,
        }
    )
    with tempfile.TemporaryFile() as errors:  # the team's prints: only the last lines are kept
        process = children.spawn(
            [sys.executable, "-c", _BOOT.format(root=str(_PACKAGE_ROOT))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=root,  # the team's code may read its own files relative to the project
        )
        try:
            out, _ = process.communicate(request, timeout=spec.timeout)
        except subprocess.TimeoutExpired:
            children.kill(process)
            raise InputError(
                f"{where}: did not finish within {spec.timeout:g} s and was stopped; "
                "raise `timeout` in the task if it needs longer"
            ) from None
        children.end_group(process)  # nothing the team's code started outlives its judgement
        errors.seek(max(0, errors.seek(0, os.SEEK_END) - STDERR_TAIL))
        return _reply(out, errors.read(), process.returncode, where)


def _reply(out: bytes, err: bytes, code: int, where: str) -> dict[str, Any]:
    if len(out) > MAX_REPLY_BYTES:
        raise InputError(f"{where}: results over {MAX_REPLY_BYTES} bytes; return less per sample")
    try:
        reply = json.loads(out.decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        last = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {code}"]
        raise InputError(f"{where}: the post-processing process died: {team_text(last[0])}") from None
    if not isinstance(reply, dict) or "error" in reply:
        raise InputError(team_text(reply.get("error") if isinstance(reply, dict) else reply))
    return reply


def _sample(index: int, reply: dict[str, Any], default: bool) -> PostprocessSample:
    golden, candidate = reply["golden"][index], reply["candidate"][index]
    if default:
        differences = result_differences(json.loads(golden), json.loads(candidate))
        passed = not differences
        message = (
            "equal results"
            if passed
            else f"{len(differences)} difference(s): " + "; ".join(differences[:MAX_DIFFERENCES])
        )
        numbers: dict[str, float] = {"differences": float(len(differences))}
    else:
        passed, message, numbers = reply["verdicts"][index]
    return PostprocessSample(
        where=SampleRef(sample=index),
        passed=passed,
        message=team_text(message),  # the team's words end up in CI logs and the PR comment
        numbers=numbers,
        golden=golden[:RESULT_CHARS],
        candidate=candidate[:RESULT_CHARS],
    )


MAX_TEAM_TEXT = 500
"""Characters of one message of the team's code kept for reports (a traceback can be megabytes)."""
SECRET_NAMES = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH", re.IGNORECASE)


def team_text(value: object) -> str:
    """What the team's code said, fit for a CI log and a pull-request comment: one line, at most
    `MAX_TEAM_TEXT` characters, and the value of any environment variable named like a secret
    replaced by its name (CI masks secrets in its logs, not in a comment a bot posts)."""
    text = one_line(value)
    for name, secret in os.environ.items():
        if len(secret) >= 6 and SECRET_NAMES.search(name) and secret in text:
            text = text.replace(secret, f"[${name} redacted]")
    return text if len(text) <= MAX_TEAM_TEXT else text[: MAX_TEAM_TEXT - 1] + "…"


def result_differences(golden: Any, candidate: Any, path: str = "") -> list[str]:
    """Where two JSON results differ: `[0].label: 'cat' → 'dog'`, deepest first-found order."""
    here = path or "result"
    if isinstance(golden, dict) and isinstance(candidate, dict):
        keys = list(dict.fromkeys([*golden, *candidate]))
        return [
            line
            for key in keys
            for line in (
                result_differences(golden[key], candidate[key], _join(path, key))
                if key in golden and key in candidate
                else [f"{_join(path, key)}: only in the {'golden' if key in golden else 'candidate'}"]
            )
        ]
    if isinstance(golden, list) and isinstance(candidate, list):
        if len(golden) != len(candidate):
            return [f"{here}: {len(golden)} items → {len(candidate)}"]
        return [
            line
            for index, (g, c) in enumerate(zip(golden, candidate, strict=True))
            for line in result_differences(g, c, f"{path}[{index}]")
        ]
    same = golden == candidate or (golden != golden and candidate != candidate)  # NaN == NaN here
    return [] if same and type(golden) is type(candidate) else [f"{here}: {golden!r} → {candidate!r}"]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


class Postprocess:
    """The `postprocess` kind, the team's own code (see `baseline.tasks.kinds`)."""

    def title(self, spec: PostprocessTask) -> str:
        return f"postprocess {spec.postprocess}"

    def compare(
        self, spec: PostprocessTask, golden: Outputs, candidate: Outputs, context: TaskContext
    ) -> tuple[PostprocessComparison, list[str]]:
        if context.root is None:
            raise InputError(f"postprocess {spec.postprocess!r}: no project root to find the module in")
        comparison = compare_postprocess(spec, golden, candidate, context.root, context.model)
        return comparison, [f"{s.where.label}: {s.message}" for s in comparison.failed]

    def headline(self, comparison: PostprocessComparison) -> str:
        passed = len(comparison.samples) - len(comparison.failed)
        return f"{passed} of {len(comparison.samples)} samples pass {comparison.comparator}"

    def worst(self, comparison: PostprocessComparison) -> dict[str, float]:
        return {}  # the team's comparator judges; it has no threshold baseline could propose

    def changed(self, comparison: PostprocessComparison, names: list[str]) -> ChangedRows:
        rows = [(s.where.label, s.golden, s.candidate, s.message) for s in comparison.failed]
        return ChangedRows(
            ("sample", f"golden {comparison.function}", "candidate", comparison.comparator), rows
        )

    def class_names(self, spec: PostprocessTask) -> list[str]:
        return []


KIND = Postprocess()
