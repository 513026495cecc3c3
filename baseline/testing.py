"""Assertions for a team's own tests: gates and tensor comparisons with messages a person can act on.

The pytest plugin (`baseline.pytest_plugin`) only wires these into fixtures and test items.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np

from baseline.backends import GOLDEN
from baseline.compare import compare_tensors
from baseline.errors import BaselineError
from baseline.files.tensors import TensorSet, load_tensors
from baseline.models.lock import Lock
from baseline.models.results import GateResult, Report, place_label
from baseline.project.accept import accept_change
from baseline.project.layout import Project
from baseline.project.lockfile import load_lock
from baseline.verification.verify import verify_project

WORST_ROWS = 8


def tensor_mismatch(
    name: str, obtained: np.ndarray, expected: np.ndarray, atol: float, rtol: float
) -> str | None:
    """None when the tensors agree; otherwise a message in the spirit of pytest-regressions."""
    c = compare_tensors(name, obtained, expected, atol, rtol)
    if c.shape_match and c.mismatches == 0:
        return None
    if not c.shape_match:
        return f"{name}: shape {c.candidate_shape} obtained, {c.golden_shape} expected"
    lines = [
        f"{name}: {c.mismatches} of {c.total} elements ({c.mismatch_ratio:.2%}) differ beyond "
        f"atol {atol:g} + rtol {rtol:g}·|expected|",
        f"  shape {c.candidate_shape}; max abs {_g(c.max_abs)}, mean abs {_g(c.mean_abs)}, "
        f"max rel {_g(c.max_rel)}, mean rel {_g(c.mean_rel)}, cosine {_g(c.cosine)}; "
        f"NaN obtained/expected {c.candidate_nan}/{c.golden_nan}",
        "  worst elements:",
        f"    {'index':<18} {'obtained':>14} {'expected':>14} {'diff':>12}",
    ]
    lines += _worst_rows(np.asarray(obtained, dtype=np.float64), np.asarray(expected, dtype=np.float64))
    return "\n".join(lines)


def _worst_rows(obtained: np.ndarray, expected: np.ndarray) -> list[str]:
    diff = np.abs(obtained - expected)
    order = np.argsort(np.nan_to_num(diff, nan=np.inf).ravel())[::-1][:WORST_ROWS]
    rows = []
    for flat in order:
        index = tuple(int(i) for i in np.unravel_index(flat, obtained.shape))
        rows.append(
            f"    {index!s:<18} {obtained[index]:>14.6g} {expected[index]:>14.6g} {diff[index]:>12.3g}"
        )
    return rows


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def assert_tensors_close(
    obtained: np.ndarray, expected: np.ndarray, atol: float = 1e-5, rtol: float = 1e-4, name: str = "tensor"
) -> None:
    __tracebackhide__ = True  # pytest shows the failure at the caller's line, not in here
    message = tensor_mismatch(name, obtained, expected, atol, rtol)
    if message is not None:
        raise AssertionError(message)


def gate_failure_message(results: list[GateResult]) -> str:
    lines = []
    for result in results:
        where = place_label(result.backend, result.target)
        lines.append(
            f"{result.model} {result.gate}{f' [{where}]' if where else ''}: "
            f"{result.status.value.upper()} {result.summary}"
        )
        lines += [f"    {detail}" for detail in result.details[:12]]
        if result.hint:
            lines.append(f"    hint: {result.hint}")
    return "\n".join(lines)


def updated_message(model: str, reason: str) -> str:
    return f"baseline of {model!r} updated ({reason}); rerun without --baseline-update"


def _no_note(kind: str, model: str) -> None:
    pass


class Baseline:
    """A lock, verified on demand. The `baseline` pytest fixture hands one of these to a test.

    `turn` is held while it verifies and accepts: the pytest plugin makes it a file lock, so
    pytest-xdist workers do not write the cache and the lock at once. `note(kind, model)` is
    told what it "checked" and "updated" (the plugin's terminal summary counts them).
    """

    def __init__(
        self,
        lock_path: Path,
        update: bool = False,
        reason: str | None = None,
        turn: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
        note: Callable[[str, str], None] = _no_note,
    ) -> None:
        self.project = Project.locate(lock_path)
        self.update = update
        self.reason = reason or "updated with pytest --baseline-update"
        self._turn = turn
        self._note = note
        self._reports: dict[str | None, Report] = {}

    @property
    def lock(self) -> Lock:
        return load_lock(self.project.lock_path)

    def verify(self, model: str | None = None) -> Report:
        if model not in self._reports:
            with self._turn():
                self._reports[model] = verify_project(self.project, [model] if model else None)
        return self._reports[model]

    def assert_passes(self, model: str) -> None:
        """Every gate of `model` passes (expected failures count as passing)."""
        __tracebackhide__ = True
        self._note("checked", model)
        with self._turn():  # verified and accepted in one turn: another worker sees the new lock
            failed = [result for result in self.verify(model).results if not result]
            if failed and self.update:
                accept_change(self.project, model, self.reason)
                self._reports.clear()
                self._note("updated", f"{model} ({self.reason})")
                raise AssertionError(updated_message(model, self.reason))
        if failed:
            raise AssertionError(gate_failure_message(failed))

    def reference(self, model: str, backend: str = GOLDEN, target: str | None = None) -> TensorSet:
        """The locked output tensors of `model` (onnxruntime's by default)."""
        locked = self.lock.model(model)
        pin = locked.reference(backend, target) if locked is not None else None
        if pin is None:
            raise BaselineError(f"{self.project.lock_path}: no {backend} reference for model {model!r}")
        return load_tensors(self.project.pinned(pin.tensors, f"models.{model}.references"))

    def inputs(self, model: str) -> TensorSet:
        locked = self.lock.model(model)
        if locked is None:
            raise BaselineError(f"{self.project.lock_path}: no model named {model!r}")
        return load_tensors(self.project.pinned(locked.fixtures, f"models.{model}.fixtures"))

    def assert_outputs_match(
        self, model: str, outputs: TensorSet, atol: float | None = None, rtol: float | None = None
    ) -> None:
        """Outputs a test computed itself agree with the locked reference, per output tolerance."""
        __tracebackhide__ = True
        self._note("checked", model)
        locked = self.lock.model(model)
        assert locked is not None, f"no model named {model!r}"
        messages = []
        for name, expected in self.reference(model).items():
            tolerance = locked.tolerances[name].consistency
            message = tensor_mismatch(
                f"{model}.{name}",
                outputs[name],
                expected,
                tolerance.atol if atol is None else atol,
                tolerance.rtol if rtol is None else rtol,
            )
            if message:
                messages.append(message)
        if messages:
            raise AssertionError("\n".join(messages))
