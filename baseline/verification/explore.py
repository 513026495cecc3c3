"""`baseline explore`: where a quantized build loses accuracy, and which remedy restores it.

A Rockchip engineer whose int8 build is broken tries the toolkit's other settings one by one:
another quantization algorithm (`normal`, `mmse`, `kl_divergence`), per-layer instead of
per-channel scales, a wider dtype (`w8a16`, `w16a16i`, where the platform has it). Each
candidate here is that: a real conversion and simulator run of the locked model on its locked
fixtures and calibration set, judged against the locked onnxruntime outputs with the thresholds an
fp16 build must meet (the task's `golden` table, and the fp16 consistency tolerance) — "restored"
means as good as float on the task, not merely better. Where the target loses accuracy comes
from the toolkit's per-layer analysis of the target as locked.

Nothing is written: the table and the intent line of the best candidate are printed, and the
person decides. Not tried yet: hybrid quantization of the layers found (the toolkit's
`hybrid_quantization_step1/2`), and cutting the graph before a mixed-scale concat.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from baseline.backends import GOLDEN, get_backend
from baseline.backends.base import BackendJob, BackendRun
from baseline.errors import BaselineError, ConfigError, EnvironmentBroken
from baseline.executors import ExecutorOptions, Task, run_tasks
from baseline.gates.context import VerifyContext
from baseline.models.intent import QuantizationSpec, TargetSpec
from baseline.models.lock import Lock, ModelLock
from baseline.models.results import LayerError
from baseline.models.task import TaskOutcome
from baseline.project.layout import Project

if TYPE_CHECKING:
    from baseline.files.tensors import TensorSet

SIMULATOR = "rknn-sim"
ALGORITHMS = ("normal", "mmse", "kl_divergence")
WIDER_DTYPES = ("w8a16", "w16a16i", "w16a16i_dfp")
"""Dtypes with more bits than w8a8 that RKNN-Toolkit2 2.x names (each platform takes some: 2.5.0
refuses w8a16 and w16a16i on rk3588 and takes w16a16i_dfp; the table says which was refused)."""
DROPPING_LAYERS = 5


@dataclass(frozen=True)
class Candidate:
    label: str
    """What differs from the target as locked, e.g. `algorithm mmse`."""
    target: TargetSpec


@dataclass
class CandidateResult:
    candidate: Candidate
    error: str | None = None
    seconds: float | None = None
    size: int | None = None
    min_cosine: float | None = None
    tasks: list[TaskOutcome] = field(default_factory=list)
    as_float: bool = False
    """Within what an fp16 build must meet: every task with its `golden` thresholds, and the
    cosine of every output at least the fp16 consistency tolerance."""


@dataclass
class Exploration:
    model: str
    target: TargetSpec
    layers: list[LayerError]
    """The toolkit's per-layer analysis of the target as locked (empty if it could not run)."""
    analysis_error: str | None
    results: list[CandidateResult]

    @property
    def best(self) -> CandidateResult | None:
        """The restoring candidate with the highest cosine (the fastest of equals)."""
        restoring = [r for r in self.results[1:] if r.as_float and r.error is None]
        return max(restoring, key=lambda r: (r.min_cosine or 0.0, -(r.seconds or 0.0)), default=None)


def candidates(target: TargetSpec, hybrid: list[tuple[str, list[str]]] | None = None) -> list[Candidate]:
    """The target as locked, then each single change a Rockchip engineer would try; `hybrid`
    adds hybrid quantization of named tensors, one candidate per (label, tensors)."""
    quantization = target.quantization
    if quantization is None:
        raise ConfigError(f"target {target.name!r} is not quantized: there is no quantization to explore")
    found = [Candidate("as locked", target)]
    for algorithm in ALGORITHMS:
        if algorithm != quantization.algorithm:
            found.append(_variant(target, f"algorithm {algorithm}", algorithm=algorithm))
    method = "layer" if quantization.method == "channel" else "channel"
    found.append(_variant(target, f"per-{method} scales", method=method))
    for dtype in WIDER_DTYPES:
        if dtype != quantization.dtype:
            found.append(_variant(target, f"dtype {dtype}", dtype=dtype))
    for label, tensors in hybrid or []:
        if tensors:
            found.append(_variant(target, label, float_layers=tensors))
    return found


def _variant(target: TargetSpec, label: str, **change: object) -> Candidate:
    assert target.quantization is not None
    quantization = QuantizationSpec.model_validate({**target.quantization.model_dump(), **change})
    slug = re.sub(r"[^A-Za-z0-9]+", "-", label.replace("per-", "")).strip("-")
    return Candidate(
        label, target.model_copy(update={"name": f"{target.name}-{slug}", "quantization": quantization})
    )


def explore(
    project: Project, lock: Lock, model_name: str, target_name: str, options: ExecutorOptions
) -> Exploration:
    model = lock.model(model_name)
    if model is None:
        raise ConfigError(f"{project.lock_path}: no model named {model_name!r}")
    target = next((t for t in model.targets if t.name == target_name), None)
    if target is None:
        names = ", ".join(t.name for t in model.targets)
        raise ConfigError(f"model {model_name!r} has no target {target_name!r} (its targets: {names})")
    golden_ref = model.reference(GOLDEN, None)
    if golden_ref is None:
        raise ConfigError(f"model {model_name!r} has no locked onnxruntime outputs to judge against")
    ctx = VerifyContext(project, lock)
    golden = ctx.tensors(golden_ref.tensors, f"models.{model_name}.references.onnxruntime")
    layers, analysis_error = _where(ctx, model, target_name)
    tried = candidates(target, hybrid_sets(project, model, layers))
    tasks = [
        Task(
            name=f"explore {model_name} {c.label}",
            call=_convert_and_run,
            args=(ctx.job_on(model, c.target, SIMULATOR),),
        )
        for c in tried
    ]
    runs: list[tuple[BackendRun, float, int | None]] = run_tasks(tasks, options)
    results = [
        _judge(project, model, candidate, run, seconds, size, golden)
        for candidate, (run, seconds, size) in zip(tried, runs, strict=True)
    ]
    return Exploration(model_name, target, layers, analysis_error, results)


def _where(ctx: VerifyContext, model: ModelLock, target: str) -> tuple[list[LayerError], str | None]:
    try:
        return ctx.analyse(model, SIMULATOR, target), None
    except BaselineError as error:
        return [], str(error).splitlines()[0][:200]


def _convert_and_run(job: BackendJob) -> tuple[BackendRun, float, int | None]:
    """One candidate on the simulator: the run, its conversion seconds and `.rknn` size."""
    started = time.monotonic()
    try:
        run = get_backend(SIMULATOR).run(job)
    except EnvironmentBroken:
        raise  # not this candidate's fault: explore stops with one line
    except BaselineError as error:  # a setting this toolkit version does not take: one row says so
        return BackendRun(outputs=None, error=str(error)), time.monotonic() - started, None
    build = run.build
    seconds = (
        sum(build.seconds.values()) if build is not None and build.seconds else time.monotonic() - started
    )
    size = build.artifact.stat().st_size if build is not None and build.artifact is not None else None
    return run, seconds, size


def _judge(
    project: Project,
    model: ModelLock,
    candidate: Candidate,
    run: BackendRun,
    seconds: float,
    size: int | None,
    golden: TensorSet,
) -> CandidateResult:
    from baseline.compare import cosine_similarity
    from baseline.tasks import compare_task

    result = CandidateResult(candidate, seconds=seconds, size=size)
    if run.outputs is None:
        result.error = (run.error or "no outputs").splitlines()[0][:200]
        return result
    cosines = {
        name: cosine_similarity(run.outputs[name], golden[name]) for name in golden if name in run.outputs
    }
    result.min_cosine = min(cosines.values(), default=None)
    result.tasks = [
        compare_task(
            model.task_thresholds(index, "golden"), golden, run.outputs, root=project.root, model=model.name
        )
        for index in range(len(model.tasks))
    ]
    floats = all(
        math.isfinite(cosine) and cosine >= model.tolerance(name).for_build(False).min_cosine
        for name, cosine in cosines.items()
    )
    # with tasks, what the model is for decides; without, agreement as close as an fp16 build's
    result.as_float = all(outcome.passed for outcome in result.tasks) if result.tasks else floats
    return result


def hybrid_sets(project: Project, model: ModelLock, layers: list[LayerError]) -> list[tuple[str, list[str]]]:
    """Tensors to keep in float16: the outputs and what their last node joins (a YOLO head's
    boxes and class scores, concatenated under one int8 scale), and the layers the analysis
    found losing the most on their own."""
    return [
        ("hybrid: the outputs' last layers in fp16", output_layers(project, model)),
        (
            f"hybrid: the {DROPPING_LAYERS} weakest layers in fp16",
            [layer.name for layer in dropping_layers(layers)],
        ),
    ]


def output_layers(project: Project, model: ModelLock) -> list[str]:
    """The model's outputs and the inputs of the nodes that produce them (not the weights)."""
    from baseline.files.onnx_facts import load_onnx_structure

    graph = load_onnx_structure(project.pinned(model.onnx, f"models.{model.name}.onnx")).graph
    outputs = [spec.name for spec in model.onnx.outputs]
    weights = {tensor.name for tensor in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    joined = [
        name for out in outputs if out in producers for name in producers[out].input if name not in weights
    ]
    return list(dict.fromkeys([*outputs, *(name for name in joined if name)]))


def dropping_layers(layers: list[LayerError], count: int = DROPPING_LAYERS) -> list[LayerError]:
    """The layers that lose the most on their own (lowest single-layer cosine), in graph order."""
    finite = [layer for layer in layers if math.isfinite(layer.single_cosine)]
    worst = sorted(finite, key=lambda layer: layer.single_cosine)[:count]
    keep = {id(layer) for layer in worst if layer.single_cosine < 1.0}
    non_finite = [layer for layer in layers if not math.isfinite(layer.single_cosine)]
    return [layer for layer in layers if id(layer) in keep] + non_finite[:count]


def intent_line(target: TargetSpec, original: str) -> str:
    """The target as a line of the intent, under its original name."""
    assert target.quantization is not None
    q = target.quantization
    layers = f", float_layers = {json.dumps(q.float_layers)}" if q.float_layers else ""
    return (
        f'{{ name = "{original}", platform = "{target.platform}", quantization = {{ dtype = "{q.dtype}", '
        f'algorithm = "{q.algorithm}", method = "{q.method}"{layers} }} }}'
    )
