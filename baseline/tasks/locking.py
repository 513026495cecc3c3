"""What `baseline lock` pins of a model's parts and tasks: checked against the ONNX outputs, with
a CTC alphabet file read into the lock (so the lock, and the cache key built from it, hold the
alphabet the task gate decodes with, not a path to a file that can change unseen) and a label
file's hash (an edited label file makes the lock stale)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from baseline.errors import InputError
from baseline.files.alphabet import read_alphabet
from baseline.models.task import CtcTask, OutputPart, PostprocessTask, TaskSpec
from baseline.models.tensors import TensorSpec

"""PaddleOCR's largest character dictionary is ~30 kB; anything near this limit is not one."""


def check_outputs(parts: list[OutputPart], tasks: list[TaskSpec], outputs: list[str], where: str) -> None:
    """Every part and task names an output the ONNX model has."""
    named = [(f"parts.{part.name}", part.output) for part in parts]
    for index, task in enumerate(tasks):
        named += [(f"tasks[{index}] ({task.kind})", output) for output in task.read]
    for key, output in named:
        if output not in outputs:
            raise InputError(
                f"{where}.{key}: the model has no output {output!r}; its outputs are {', '.join(outputs)}"
            )


def check_class_axes(tasks: list[TaskSpec], outputs: list[TensorSpec], where: str) -> None:
    """A task's `class_axis` exists in the output it reads (where the ONNX file declares that
    output's rank): out of range, lock wrote a baseline whose task gate could not run."""
    ranks = {spec.name: len(spec.shape) for spec in outputs}
    for index, task in enumerate(tasks):
        axis, output = getattr(task, "class_axis", None), getattr(task, "output", None)
        rank = ranks.get(output) if isinstance(output, str) else None
        if isinstance(axis, int) and rank is not None and not -rank <= axis < rank:
            raise InputError(
                f"{where}.tasks[{index}].class_axis: {axis} is out of range for output {output!r}, "
                f"which has {rank} dimensions; use -1 for the last, or 0 to {rank - 1}"
            )


def check_tolerance_keys(keys: list[str], parts: list[OutputPart], outputs: list[str], where: str) -> None:
    """Every `tolerances.outputs` key names an output or a declared part (`output:part`): a
    misspelt key would otherwise leave the defaults in force without a word."""
    known = [*outputs, *(part.key for part in parts)]
    for key in keys:
        if key not in known:
            raise InputError(
                f"{where}.tolerances.outputs.{key!r}: names no output or part; "
                f"use one of {', '.join(repr(name) for name in known)}"
            )
    clashing = [part.key for part in parts if part.key in outputs]
    if clashing:
        raise InputError(f"{where}.parts: {clashing[0]!r} is also the name of an output; rename the part")


def locked_tasks(
    tasks: list[TaskSpec], resolve: Callable[[str, str], Path], where: str, root: Path
) -> list[TaskSpec]:
    """The tasks as the lock pins them: a CTC `alphabet_file` replaced by its symbols, a team's
    post-processing with the hash of its sources."""
    return [_pinned(task, resolve, f"{where}.tasks[{i}]", root) for i, task in enumerate(tasks)]


def _pinned(task: TaskSpec, resolve: Callable[[str, str], Path], where: str, root: Path) -> TaskSpec:
    if isinstance(task, PostprocessTask):
        from baseline.tasks.team import pinned

        return pinned(root, task, where)
    return _with_labels(_with_alphabet(task, resolve, where), resolve, where)


def _with_labels(task: TaskSpec, resolve: Callable[[str, str], Path], where: str) -> TaskSpec:
    """A labelled task with its label file's hash (a changed file makes the lock stale)."""
    labels = getattr(task, "labels", None)
    if labels is None:
        return task
    from baseline.tasks.labels import pin_labels  # numpy: only for labelled tasks

    path = resolve(labels.path, f"{where}.labels.path")
    return task.model_copy(update={"labels": pin_labels(task, path, f"{where}.labels")})


def _with_alphabet(task: TaskSpec, resolve: Callable[[str, str], Path], where: str) -> TaskSpec:
    if not isinstance(task, CtcTask) or task.alphabet_file is None:
        return task
    key = f"{where}.alphabet_file"
    symbols = read_alphabet(resolve(task.alphabet_file, key), key)
    return task.model_copy(update={"alphabet": symbols, "alphabet_file": None})
