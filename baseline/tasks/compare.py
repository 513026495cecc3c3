"""One entry for every task: `compare_task(spec, golden, candidate) -> TaskOutcome`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from baseline.errors import InputError
from baseline.models.task import TaskOutcome, TaskSpec
from baseline.tasks.kinds import TaskContext, kind_of


def compare_task(
    spec: TaskSpec,
    golden: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    *,
    root: Path | None = None,
    model: str = "",
) -> TaskOutcome:
    """Judge `candidate` against `golden` outputs (sample axis first) as the task in `spec` says.

    A candidate that lacks the output or changed its shape fails with a message; a golden
    that lacks it, or a spec that does not fit the output, raises `InputError` (a
    configuration problem, not a regression). `root` resolves a CTC `alphabet_file` and a
    team's post-processing module; `model` names the model in the team code's errors.
    """
    kind = kind_of(spec.kind)
    names = spec.read or sorted(golden)  # a team's post-processing may read every output
    missing = [name for name in names if name not in golden]
    if missing:
        raise InputError(f"{spec.kind} task: no output {missing[0]!r} in the golden outputs {sorted(golden)}")
    problem = _first_unusable(names, golden, candidate)
    if problem is not None:
        return TaskOutcome(
            kind=spec.kind, output=spec.output, passed=False, summary=problem, failures=[problem]
        )
    comparison, failures = kind.compare(spec, golden, candidate, TaskContext(root, model))
    return TaskOutcome(
        kind=spec.kind,
        output=spec.output,
        passed=not failures,
        summary=f"{kind.title(spec)}: {kind.headline(comparison)}",
        failures=failures,
        comparison=comparison,
    )


def _first_unusable(
    names: list[str], golden: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]
) -> str | None:
    """Why the candidate cannot be compared: an output missing or of another shape."""
    for name in names:
        if name not in candidate:
            return f"the candidate has no output {name!r} (it has {sorted(candidate)})"
        shape, expected = list(np.shape(candidate[name])), list(np.shape(golden[name]))
        if shape != expected:
            return f"output {name!r} has shape {shape}, the golden has {expected}"
    return None
