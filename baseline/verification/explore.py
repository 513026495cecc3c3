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
person decides. Beside the settings: hybrid quantization (the toolkit's
`hybrid_quantization_step1/2`) of the outputs' last layers and of the weakest layers, and the
zoo's own remedy for a decoded detection head, cutting the graph before its last Concat so that
boxes and class scores leave as two outputs with a scale each (judged with the head reading the
two parts joined, against onnxruntime on the same cut).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from baseline.backends import GOLDEN, get_backend
from baseline.backends.base import BackendJob, BackendRun
from baseline.errors import BaselineError, ConfigError, EnvironmentBroken
from baseline.executors import ExecutorOptions, Task, run_tasks
from baseline.gates.context import VerifyContext
from baseline.models.base import replaced
from baseline.models.intent import ConversionSpec, QuantizationSpec, TargetSpec
from baseline.models.labels import LabelScore
from baseline.models.lock import Lock, ModelLock
from baseline.models.results import LayerError
from baseline.models.task import DetectionTask, TaskOutcome, TaskSpec
from baseline.project.layout import Project

if TYPE_CHECKING:
    from baseline.files.tensors import TensorSet
    from baseline.tasks.labels import Geometry, Labels

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
    cut: GraphCut | None = None


@dataclass(frozen=True)
class GraphCut:
    """`load_onnx(outputs=...)` at the inputs of the Concat that makes a detection output: the
    tensors the build returns instead, and the tasks as they read them."""

    outputs: list[str]
    tasks: list[TaskSpec]
    split: list[int]
    """Indices of the detection tasks that now read the parts."""


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
    labels: list[LabelScore] = field(default_factory=list)
    """Accuracy against the labels of the labelled tasks, where the model has any; beside it
    `float_labels`, onnxruntime's on the same outputs (the cut's for a graph cut)."""
    float_labels: list[LabelScore] = field(default_factory=list)


@dataclass
class Exploration:
    model: str
    target: TargetSpec
    layers: list[LayerError]
    """The toolkit's per-layer analysis of the target as locked (empty if it could not run)."""
    analysis_error: str | None
    results: list[CandidateResult]
    candidate_limit: float = math.inf
    """Seconds each candidate was given (`--candidate-timeout`, else the toolkit's timeout)."""
    collapsed: list[str] = field(default_factory=list)
    """Rows of an output the build as locked rounds to one value (`collapsed_rows`)."""

    @property
    def restoring(self) -> list[CandidateResult]:
        return [r for r in self.results[1:] if r.as_float and r.error is None]

    @property
    def best(self) -> CandidateResult | None:
        """The restoring candidate that keeps the most of int8: a setting or a graph cut before
        layers kept in float16 before a wider dtype (what the NPU runs fastest); among equals the
        highest cosine, then the fastest. Cosines of a graph cut's outputs are not those of the
        whole outputs, so they only break ties within a kind."""
        return min(
            self.restoring,
            key=lambda r: (_cost(r.candidate), -(r.min_cosine or 0.0), r.seconds or 0.0),
            default=None,
        )


def _cost(candidate: Candidate) -> int:
    """0: int8 throughout (another algorithm, scales or a graph cut); 1: some layers wider (float16,
    int16 on rv1103 / rv1106); 2: a wider dtype everywhere."""
    quantization = candidate.target.quantization
    if quantization is not None and quantization.float_layers:
        return 1
    return 2 if quantization is not None and quantization.dtype in WIDER_DTYPES else 0


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
    project: Project,
    lock: Lock,
    model_name: str,
    target_name: str,
    options: ExecutorOptions,
    progress: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> Exploration:
    """`progress` hears of each step as it ends: the per-layer analysis of a large model at 640²
    runs for many minutes on the simulator, and each candidate is a conversion, so a person
    watching a silent terminal could not tell a slow step from a hung one. `timeout`: seconds
    each candidate may take, instead of the toolkit's timeout. Not shortened by default: mmse
    took 11-33x the build as locked where it was measured, and it was the int8 remedy of a text
    recogniser (71 s against 6 s)."""
    say = progress or (lambda message: None)
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
    say(f"per-layer analysis of {target_name} (the toolkit's accuracy_analysis; slow on a large model)")
    started = time.monotonic()
    layers, analysis_error = _where(ctx, model, target_name)
    say(f"per-layer analysis done in {time.monotonic() - started:.0f} s")
    tried = candidates(target, hybrid_sets(project, model, layers, target.platform))
    cut = graph_cut(project, model)
    if cut is not None:
        tried.append(_cut_candidate(target, cut))

    say(_plan_line(tried, timeout))

    def candidate_done(index: int, value: object, seconds: float) -> None:
        say(f"[{index + 1}/{len(tried)}] {tried[index].label}: converted and run in {seconds:.0f} s")

    limit = timeout if timeout is not None else model.toolkit.timeout
    limited = model.model_copy(update={"toolkit": model.toolkit.model_copy(update={"timeout": limit})})
    tasks = [
        Task(
            name=f"explore {model_name} {c.label}",
            call=_convert_and_run,
            args=(ctx.job_on(limited, c.target, SIMULATOR, targets=[c.target] if c.cut else None),),
        )
        for c in tried
    ]
    runs: list[tuple[BackendRun, float, int | None]] = run_tasks(tasks, options, candidate_done)
    scorer = _LabelScorer.of(project, ctx, model)
    results = []
    for candidate, (run, seconds, size) in zip(tried, runs, strict=True):
        reference = _golden_of(ctx, model, candidate, golden)
        result = _judge(project, model, candidate, run, seconds, size, reference)
        if scorer is not None and run.outputs is not None:
            result.labels = scorer.scores(candidate, run.outputs, SIMULATOR, candidate.target.name)
            result.float_labels = scorer.scores(candidate, reference, GOLDEN, None)
        results.append(result)
    locked_outputs = runs[0][0].outputs if runs else None
    collapsed = collapsed_rows(golden, locked_outputs) if locked_outputs is not None else []
    return Exploration(model_name, target, layers, analysis_error, results, limit, collapsed)


def _plan_line(tried: list[Candidate], timeout: float | None) -> str:
    """The candidates, in order, said before the first runs: each line reports one as it ends,
    and mmse's conversion can keep the terminal silent for many minutes after the first (a
    CenterFace at 800 × 480 on rv1106: 16 s as locked, then nothing for the whole 600-s limit)."""
    labels = ", ".join(c.label for c in tried)
    slow = any("mmse" in c.label for c in tried)
    bound = "" if timeout is not None else "; `--candidate-timeout SECONDS` bounds each"
    note = f" (mmse converts 11-33x slower than the build as locked{bound})" if slow else ""
    return f"{len(tried)} candidates, run in this order: {labels}{note}"


def timed_out(result: CandidateResult) -> bool:
    """Whether a candidate was stopped at its limit (the toolkit client's message)."""
    from baseline.toolchain.client import NO_ANSWER

    return result.error is not None and NO_ANSWER in result.error


def _golden_of(ctx: VerifyContext, model: ModelLock, candidate: Candidate, locked: TensorSet) -> TensorSet:
    """What a candidate is judged against: the locked onnxruntime outputs, or for a graph cut
    onnxruntime's outputs of the same cut (the tensors the cut build returns)."""
    if candidate.cut is None:
        return locked
    run = get_backend(GOLDEN).run(ctx.job_on(model, None, GOLDEN, targets=[candidate.target]))
    if run.outputs is None:
        raise ConfigError(f"onnxruntime could not run the graph cut at {candidate.cut.outputs}: {run.error}")
    return run.outputs


@dataclass(frozen=True)
class _LabelScorer:
    """Scores a candidate's outputs against the model's labels, as the `labels` gate does."""

    model: ModelLock
    labels: dict[int, Labels]
    geometry: Geometry | None

    @classmethod
    def of(cls, project: Project, ctx: VerifyContext, model: ModelLock) -> _LabelScorer | None:
        from baseline.tasks.labels import geometry_of, labelled, load_model_labels

        if not labelled(model):
            return None
        labels = load_model_labels(model, project.resolve, f"models.{model.name}")
        fixtures = ctx.tensors(model.fixtures, f"models.{model.name}.fixtures")
        return cls(model, labels, geometry_of(model, fixtures))

    def scores(
        self, candidate: Candidate, outputs: TensorSet, backend: str, target: str | None
    ) -> list[LabelScore]:
        from baseline.tasks.labels import model_scores

        model = self.model if candidate.cut is None else replaced(self.model, tasks=candidate.cut.tasks)
        return model_scores(model, self.labels, outputs, self.geometry, backend, target)


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
    specs = [model.task_thresholds(index, "golden") for index in range(len(model.tasks))]
    if candidate.cut is not None:  # the same thresholds, the head reading the cut's parts
        specs = [_reading_cut(spec, cut) for spec, cut in zip(specs, candidate.cut.tasks, strict=True)]
    result.tasks = [
        compare_task(spec, golden, run.outputs, root=project.root, model=model.name) for spec in specs
    ]
    floats = all(
        math.isfinite(cosine) and cosine >= model.tolerance(name).for_build(False).min_cosine
        for name, cosine in cosines.items()
    )
    # with tasks, what the model is for decides; without, agreement as close as an fp16 build's
    result.as_float = all(outcome.passed for outcome in result.tasks) if result.tasks else floats
    return result


def hybrid_sets(
    project: Project, model: ModelLock, layers: list[LayerError], platform: str
) -> list[tuple[str, list[str]]]:
    """Tensors to keep wider than int8: the outputs and what their last node joins (a YOLO head's
    boxes and class scores, concatenated under one int8 scale), and the layers the analysis
    found losing the most on their own. The worker keeps them in float16, or int16 where the
    platform has no float16 layers (rv1103 / rv1106); the labels say which."""
    from baseline.toolchain.worker import hybrid_layer_dtype

    dtype = hybrid_layer_dtype(platform)
    wider = "fp16" if dtype == "float16" else dtype
    return [
        (f"hybrid: the outputs' last layers in {wider}", output_layers(project, model)),
        (
            f"hybrid: the {DROPPING_LAYERS} weakest layers in {wider}",
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


def graph_cut(project: Project, model: ModelLock) -> GraphCut | None:
    """Where to cut a model whose detection task reads a decoded head made by a Concat (YOLOv8's
    `output0` = Concat(boxes in pixels, class scores in 0-1), one int8 scale for both): at that
    Concat's inputs, each then an output of the build with its own scale. None for other models,
    and for a graph already cut."""
    if any(
        target.conversion is not None and "outputs" in target.conversion.load_onnx for target in model.targets
    ):
        return None
    detections = [task for task in model.tasks if isinstance(task, DetectionTask) and not task.outputs]
    if not detections:
        return None
    from baseline.files.onnx_facts import load_onnx_structure

    graph = load_onnx_structure(project.pinned(model.onnx, f"models.{model.name}.onnx")).graph
    producers = {output: node for node in graph.node for output in node.output}
    weights = {tensor.name for tensor in graph.initializer}
    parts: dict[str, list[str]] = {}
    for task in detections:
        node = producers.get(task.output)
        inputs = [name for name in node.input if name and name not in weights] if node is not None else []
        if node is None or node.op_type != "Concat" or len(inputs) < 2:
            return None
        parts[task.output] = inputs
    others = [spec.name for spec in model.onnx.outputs if spec.name not in parts]
    outputs = list(dict.fromkeys([*(name for names in parts.values() for name in names), *others]))
    split = [
        i for i, task in enumerate(model.tasks) if isinstance(task, DetectionTask) and task.output in parts
    ]
    tasks = [replaced(t, outputs=parts[t.output]) if i in split else t for i, t in enumerate(model.tasks)]
    return GraphCut(outputs, tasks, split)


def _cut_candidate(target: TargetSpec, cut: GraphCut) -> Candidate:
    conversion = target.conversion or ConversionSpec()
    load_onnx = {**conversion.load_onnx, "outputs": cut.outputs}
    label = "graph cut before the head's Concat"
    cut_target = replaced(
        target, name=f"{target.name}-graph-cut", conversion=replaced(conversion, load_onnx=load_onnx)
    )
    return Candidate(label, cut_target, cut)


def _reading_cut(spec: TaskSpec, cut: TaskSpec) -> TaskSpec:
    """`spec` (with the thresholds it is judged by) reading what the cut task reads."""
    if isinstance(spec, DetectionTask) and isinstance(cut, DetectionTask) and cut.outputs:
        return replaced(spec, outputs=cut.outputs)
    return spec


def cut_lines(cut: GraphCut) -> list[str]:
    """The intent's lines for a graph cut: the model-wide `load_onnx` outputs and each detection
    task reading the parts."""
    lines = ["[models.conversion.load_onnx]", f"outputs = {json.dumps(cut.outputs)}"]
    for index in cut.split:
        task = cut.tasks[index]
        assert isinstance(task, DetectionTask)
        where = f"# and in [[models.tasks]] #{index} (detection on {task.output!r}):"
        lines.append(f"{where} outputs = {json.dumps(task.outputs)}")
    return lines


def collapsed_rows(golden: TensorSet, build: TensorSet) -> list[str]:
    """Outputs of rows of positions (`[batch, rows, ...]`, a YOLO head's boxes then class scores)
    where the build holds rows at one value that onnxruntime varies. One int8 scale covers the
    whole output, so rows far smaller than the largest fall under one step: mahjong-detector's
    YOLO11n lost all 34 score rows (up to 0.49, beside boxes up to ~640) on rv1106 at cosine 0.9994,
    and the per-layer analysis, which stops before the output's own quantization, named head
    layers at 0.95. Arrays are `[samples, batch, rows, ...]`; rank-2 class scores are skipped
    (a class rare in every sample may round to 0 without anything lost)."""
    said = []
    for name, expected in golden.items():
        got = build.get(name)
        if got is None or got.shape != expected.shape or expected.ndim < 4:
            continue
        rows = np.moveaxis(got, 2, 0).reshape(got.shape[2], -1)
        golden_rows = np.moveaxis(expected, 2, 0).reshape(expected.shape[2], -1)
        spread = golden_rows.max(axis=1) - golden_rows.min(axis=1)
        lost = (rows.max(axis=1) == rows.min(axis=1)) & (spread > 0)
        if not lost.any():
            continue
        span = float(np.abs(expected).max())
        said.append(
            f"output {name!r}: {int(lost.sum())} of {len(lost)} rows along axis 1 hold one value in this "
            f"build where onnxruntime's vary (by up to {float(spread[lost].max()):.3g}, beside values up "
            f"to {span:.3g} in the output): one int8 scale for the whole output rounds them away; a "
            "build that keeps them apart (the outputs' last layers wider, a graph cut) can restore them"
        )
    return said


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
