"""Consistency gate: does a backend reproduce onnxruntime's outputs on the fixtures?

A simulator (or board) is compared with onnxruntime running the same model today, so a
model change shows up in `drift` while `consistency` still answers "does the NPU build
agree with the float model?". For onnxruntime itself the gate compares today's run with
the locked golden tensors element by element. When a simulator disagrees, the toolkit's
accuracy analysis names the first layer where the cosine drops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from baseline.backends import GOLDEN
from baseline.errors import BaselineError
from baseline.gates.context import GateJob, VerifyContext, pending_result
from baseline.models.lock import ModelLock
from baseline.models.results import GateResult, LayerError, Status
from baseline.models.tensors import TensorComparison
from baseline.models.tolerances import ConsistencyTolerance, GateTolerances
from baseline.toolchain.analysis import first_divergent_layer

if TYPE_CHECKING:  # numpy: only when outputs are really compared
    from baseline.tensors import TensorSet

NAME = "consistency"


def jobs(model: ModelLock) -> list[GateJob]:
    others = [backend for backend in model.backends if backend != GOLDEN]
    return [GateJob(NAME, backend=GOLDEN)] + [
        GateJob(NAME, backend=backend, target=t.name) for backend in others for t in model.targets
    ]


def check(model: ModelLock, job: GateJob, ctx: VerifyContext) -> GateResult:
    assert job.backend is not None
    result = pending_result(model, NAME, job)
    golden_pin = model.reference(GOLDEN, None)
    if golden_pin is None:
        return result.model_copy(update={"status": Status.SKIP, "summary": "no golden outputs"})
    run = ctx.run(model, job.backend, job.target)
    if run.build is not None and not run.build.compiled:
        return result.model_copy(update={"status": Status.SKIP, "summary": "not built; see compilable"})
    if run.outputs is None:
        return result.model_copy(update={"status": Status.ERROR, "summary": f"no outputs: {run.error}"})
    golden = _golden(model, job, ctx)
    if golden is None:
        return result.model_copy(
            update={
                "status": Status.ERROR,
                "summary": f"{GOLDEN} produced no outputs: {ctx.run(model, GOLDEN, None).error}",
            }
        )
    quantized = job.target is not None and model.target(job.target).quantized
    comparisons, failures = _compare_all(model, run.outputs, golden, quantized, job.backend)
    metrics: dict[str, Any] = {c.name: _metrics(c) for c in comparisons}
    if not failures:
        worst = min((c.cosine for c in comparisons if c.cosine is not None), default=1.0)
        return result.model_copy(
            update={
                "metrics": metrics,
                "summary": f"{len(comparisons)} outputs agree with {GOLDEN} (min cosine {worst:.6f})",
            }
        )
    summary = f"{len(failures)} disagreements with {GOLDEN}; first: {failures[0]}"
    layer = _locate(model, job, ctx, quantized, metrics)
    if layer is not None:
        summary += f"; first divergent layer {layer.line()}"
        failures.append(f"first divergent layer (accuracy_analysis): {layer.line()}")
    return result.model_copy(
        update={
            "status": Status.FAIL,
            "metrics": metrics,
            "details": failures,
            "summary": summary,
            "hint": "if this accuracy is acceptable, loosen [models.tolerances] in the intent file",
        }
    )


def _golden(model: ModelLock, job: GateJob, ctx: VerifyContext) -> TensorSet | None:
    if job.backend == GOLDEN:
        pin = model.reference(GOLDEN, None)
        assert pin is not None
        return ctx.tensors(pin.tensors, f"models.{model.name}.references.{GOLDEN}")
    return ctx.run(model, GOLDEN, None).outputs


def _compare_all(
    model: ModelLock, outputs: TensorSet, golden: TensorSet, quantized: bool, backend: str
) -> tuple[list[TensorComparison], list[str]]:
    from baseline import compare  # numpy: only when outputs are really compared

    comparisons, failures = [], []
    for name, expected in golden.items():
        if name not in outputs:
            failures.append(f"output {name!r} is missing from {backend}")
            continue
        tolerance = _tolerance(model, name, quantized)
        comparison = compare.compare_tensors(name, outputs[name], expected, tolerance.atol, tolerance.rtol)
        comparisons.append(comparison)
        failures += _failures(comparison, tolerance)
    return comparisons, failures


def _locate(
    model: ModelLock, job: GateJob, ctx: VerifyContext, quantized: bool, metrics: dict[str, Any]
) -> LayerError | None:
    """Ask the toolkit where the outputs go wrong: the first layer whose cosine drops."""
    if job.backend == GOLDEN:
        return None
    try:
        layers = ctx.analyse(model, job.backend or GOLDEN, job.target)
    except BaselineError as error:
        metrics["analysis_error"] = str(error)
        return None
    metrics["layers"] = [layer.model_dump() for layer in layers]
    threshold = min(_tolerance(model, name, quantized).min_cosine for name in model.tolerances)
    return first_divergent_layer(layers, threshold)


def _tolerance(model: ModelLock, output: str, quantized: bool) -> ConsistencyTolerance:
    return model.tolerances.get(output, GateTolerances()).for_build(quantized)


def _failures(c: TensorComparison, tolerance: ConsistencyTolerance) -> list[str]:
    if not c.shape_match:
        return [f"output {c.name!r}: shape {c.candidate_shape} ≠ golden {c.golden_shape}"]
    failures = []
    new_non_finite = (c.candidate_nan + c.candidate_inf) - (c.golden_nan + c.golden_inf)
    if new_non_finite > 0:
        failures.append(
            f"output {c.name!r}: {c.candidate_nan} NaN and {c.candidate_inf} Inf "
            f"(golden has {c.golden_nan} and {c.golden_inf})"
        )
    if c.cosine is not None and c.cosine < tolerance.min_cosine:
        failures.append(f"output {c.name!r}: cosine {c.cosine:.6f} < {tolerance.min_cosine}")
    if c.mismatch_ratio > tolerance.max_mismatch_ratio:
        failures.append(
            f"output {c.name!r}: {c.mismatches} of {c.total} elements ({c.mismatch_ratio:.2%}) "
            f"differ beyond atol {c.atol:g} + rtol {c.rtol:g}·|golden| (allowed "
            f"{tolerance.max_mismatch_ratio:.2%}); max abs {_num(c.max_abs)}, "
            f"mean abs {_num(c.mean_abs)}, max rel {_num(c.max_rel)}"
        )
    return failures


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _metrics(c: TensorComparison) -> dict[str, Any]:
    return c.model_dump(
        include={
            "cosine",
            "max_abs",
            "mean_abs",
            "max_rel",
            "mean_rel",
            "mismatches",
            "total",
            "candidate_nan",
            "candidate_inf",
        }
    )
