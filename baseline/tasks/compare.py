"""One entry for every task: `compare_task(spec, golden, candidate) -> TaskOutcome`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from baseline.errors import InputError
from baseline.models.task import (
    ClassificationComparison,
    ClassificationTask,
    CtcComparison,
    CtcTask,
    DetectionComparison,
    DetectionTask,
    PostprocessComparison,
    PostprocessTask,
    SegmentationComparison,
    SegmentationTask,
    TaskComparison,
    TaskOutcome,
    TaskSpec,
)
from baseline.tasks.classification import compare_classification
from baseline.tasks.ctc import compare_ctc, load_alphabet
from baseline.tasks.detection import compare_detection
from baseline.tasks.segmentation import compare_segmentation
from baseline.tasks.verdicts import (
    classification_failures,
    ctc_failures,
    detection_failures,
    segmentation_failures,
)


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
    if isinstance(spec, PostprocessTask):
        return _team_outcome(spec, golden, candidate, root, model)
    names = spec.read if isinstance(spec, DetectionTask) else [spec.output]
    missing = [name for name in names if name not in golden]
    if missing:
        raise InputError(f"{spec.kind} task: no output {missing[0]!r} in the golden outputs {sorted(golden)}")
    problem = _first_unusable(names, golden, candidate)
    if problem is not None:
        return _unusable(spec, problem)
    gold = [np.asarray(golden[name]) for name in names]
    comparison, failures = _compare(spec, gold, [np.asarray(candidate[name]) for name in names], root)
    return TaskOutcome(
        kind=spec.kind,
        output=spec.output,
        passed=not failures,
        summary=f"{spec.kind} on {spec.output!r}: {_headline(comparison)}",
        failures=failures,
        comparison=comparison,
    )


def _team_outcome(
    spec: PostprocessTask,
    golden: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    root: Path | None,
    model: str,
) -> TaskOutcome:
    from baseline.tasks.team import compare_postprocess

    if root is None:
        raise InputError(f"postprocess {spec.postprocess!r}: no project root to find the module in")
    problem = _first_unusable(
        [name for name in spec.outputs or sorted(golden) if name in golden], golden, candidate
    )
    if problem is not None:
        return _unusable(spec, problem)
    comparison = compare_postprocess(spec, golden, candidate, root, model)
    return TaskOutcome(
        kind=spec.kind,
        output=spec.output,
        passed=not comparison.failed,
        summary=f"postprocess {spec.postprocess}: {_headline(comparison)}",
        failures=[f"{s.where.label}: {s.message}" for s in comparison.failed],
        comparison=comparison,
    )


def _unusable(spec: TaskSpec, problem: str) -> TaskOutcome:
    return TaskOutcome(kind=spec.kind, output=spec.output, passed=False, summary=problem, failures=[problem])


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


def _compare(
    spec: ClassificationTask | DetectionTask | SegmentationTask | CtcTask,
    golden_outputs: list[np.ndarray],
    candidate_outputs: list[np.ndarray],
    root: Path | None,
) -> tuple[TaskComparison, list[str]]:
    """The comparison and its failure lines; the outputs are those the task reads, in its order."""
    if isinstance(spec, DetectionTask):
        raw = bool(spec.outputs)  # a raw head reads several outputs
        gold, cand = (golden_outputs, candidate_outputs) if raw else (golden_outputs[0], candidate_outputs[0])
        detection = compare_detection(spec, gold, cand)
        return detection, detection_failures(spec, detection)
    golden, candidate = golden_outputs[0], candidate_outputs[0]
    if isinstance(spec, ClassificationTask):
        classification = compare_classification(spec, golden, candidate)
        return classification, classification_failures(spec, classification)
    if isinstance(spec, SegmentationTask):
        segmentation = compare_segmentation(spec, golden, candidate)
        return segmentation, segmentation_failures(spec, segmentation)
    ctc = compare_ctc(spec, golden, candidate, alphabet=_alphabet(spec, root))
    return ctc, ctc_failures(spec, ctc)


def _alphabet(spec: CtcTask, root: Path | None) -> list[str] | None:
    if spec.alphabet_file is None:
        return spec.alphabet
    path = Path(spec.alphabet_file)
    return load_alphabet(path if path.is_absolute() or root is None else root / path)


def _headline(comparison: TaskComparison) -> str:
    """The aggregate numbers in one line."""
    count = f"over {len(comparison.samples)} sample{'s' if len(comparison.samples) != 1 else ''}"
    if isinstance(comparison, ClassificationComparison):
        return (
            f"top-1 agreement {comparison.top1_agreement:.2f}, "
            f"top-k agreement {comparison.topk_agreement:.2f}, "
            f"largest probability change {comparison.max_probability_change:.3f} {count}"
        )
    if isinstance(comparison, DetectionComparison):
        iou = "n/a" if comparison.mean_iou is None else f"{comparison.mean_iou:.3f}"
        return (
            f"recall {comparison.recall:.2f}, precision {comparison.precision:.2f}, mean IoU {iou}, "
            f"{comparison.class_flips} class flips {count}"
        )
    if isinstance(comparison, SegmentationComparison):
        return (
            f"pixel agreement {comparison.pixel_agreement:.4f}, "
            f"mean IoU {comparison.mean_iou:.3f} (worst) {count}"
        )
    if isinstance(comparison, PostprocessComparison):
        passed = len(comparison.samples) - len(comparison.failed)
        return f"{passed} of {len(comparison.samples)} samples pass {comparison.comparator}"
    assert isinstance(comparison, CtcComparison)
    return (
        f"{comparison.equal_texts} of {len(comparison.samples)} texts equal, "
        f"CER max {comparison.max_cer:.3f}, mean {comparison.mean_cer:.3f}"
    )
