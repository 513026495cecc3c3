"""The toolkit's log, split into diagnostics and matched against known patterns.

`E` does not mean failure and a clean log does not mean success: `E RKNN: Unkown op target: 0`
appears in many correct 2.5.0 builds, while an fp16 overflow produces all-NaN outputs with
no warning at all. The compile verdict therefore comes from return codes, exceptions and
crashes; these diagnostics explain it. Lines that match no pattern are kept as `unknown`,
never dropped; whether an unknown error fails the gate is the intent file's
`toolkit.unknown_errors` policy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from baseline.models.results import Diagnostic

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LOGGER_LINE = re.compile(r"^(?P<level>[DIWE]) (?:(?P<stage>[A-Za-z_]+): )?(?P<message>.*)$")
NATIVE_TIME = re.compile(r"^\[\d\d:\d\d:\d\d(?:\.\d+)?\]\s*")
EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_.]*(?:Error|Exception)): (?P<message>.*)$")


@dataclass(frozen=True)
class Pattern:
    """A known log message: what it means and what to do. `benign` ones are noise."""

    rule: str
    regex: re.Pattern[str]
    severity: str  # benign | warning | error
    cause: str
    remedy: str = ""


def _p(rule: str, regex: str, severity: str, cause: str, remedy: str = "") -> Pattern:
    return Pattern(rule, re.compile(regex, re.IGNORECASE), severity, cause, remedy)


# Sources: rknn-facts.md §7 (Rockchip's manuals) and conversions measured with 2.5.0.
PATTERNS: tuple[Pattern, ...] = (
    _p(
        "unknown-op-target",
        r"Unkown op target: 0",
        "benign",
        "printed by the 2.3.2 and 2.5.0 compilers for many correct builds (measured)",
    ),
    _p(
        "default-mean-std",
        r"config\.(mean|std)_values is None",
        "benign",
        "no normalisation configured; the model gets its inputs as they are",
    ),
    _p("compute-order-env", r"temperate env rknn_compute_order", "benign", "compiler bookkeeping"),
    _p("version-banner", r"^rknn-toolkit2 version", "benign", "version banner printed with errors"),
    _p("warn-summary", r"=+ WARN\(\d+\) =+", "benign", "count of warnings so far"),
    _p(
        "traceback",
        r"Traceback \(most recent call last\)",
        "benign",
        "the exception itself is reported as the failure",
    ),
    _p("analysis-map", r"mapping of layer_name & file_name", "benign", "accuracy_analysis output"),
    _p("pkg-resources", r"pkg_resources is deprecated", "benign", "setuptools deprecation notice"),
    _p(
        "opset-too-new",
        r"Unsupport onnx opset (\d+), need <= (\d+)",
        "error",
        "the ONNX opset is newer than this toolkit reads",
        "re-export with a lower opset (torch.onnx.export(..., opset_version=19))",
    ),
    _p(
        "dynamic-input-shape",
        r"The (input )?shape .* is not support",
        "error",
        "an input or output has dynamic or empty dims",
        "export with fixed sizes, or set fixtures.shapes so the fixed size is passed to load_onnx",
    ),
    _p(
        "dynamic-quantized",
        r"DynamicQuantizeLinear|MatMulInteger|ConvInteger",
        "error",
        "the model was quantized for onnxruntime (`quantize_dynamic`: DynamicQuantizeLinear, "
        "MatMulInteger), which computes its scales at run time; RKNN builds fixed scales only",
        "convert the float model the quantized one was made from, and quantize it for the NPU "
        "with a w8a8 target (the toolkit calibrates on the fixtures or `calibration`)",
    ),
    _p(
        "non-constant-shape-input",
        r"need to be constant.*dynamic graph",
        "error",
        "an input that decides a shape (NMS, TopK k, Resize scales, Slice starts...) is computed "
        "in the graph",
        "cut the graph before that node (load_onnx(outputs=[...])) and run the "
        "rest on the CPU, or make the input a constant",
    ),
    _p(
        "data-dependent-op",
        r"The Op of '(\w+)' is not support",
        "error",
        "an op whose output shape depends on the data (NonZero, Unique...)",
        "replace or remove it; run it on the CPU after the NPU part",
    ),
    _p(
        "rank-above-4",
        r"(unsupported dims|_M_range_check.*which is 4)",
        "error",
        "an op works on more than 4 dims",
        "reshape those nodes to at most 4-D",
    ),
    _p(
        "fp16-input-model",
        r"Not support input data type 'float16'",
        "error",
        "the ONNX model has float16 weights or inputs",
        "export it in float32",
    ),
    _p(
        "cpu-fallback",
        r"(fallback to cpu|channel is too large)",
        "warning",
        "part of the graph will run on the CPU (slower, usually still correct)",
        "check the layer's channel count and the platform's limits",
    ),
    _p(
        "dilation",
        r"only support dilations=1",
        "warning",
        "a dilated op is emulated (usually still correct)",
    ),
    _p(
        "io-dtype-changed",
        r"default (input|output) dtype of '.*' is changed from '(\w+)' to '(\w+)'",
        "warning",
        "quantization changed an I/O dtype of the built model",
        "feed and read the board with the new dtype, or set the dtypes explicitly",
    ),
    _p(
        "fp16-range",
        r"out of (the )?(range of )?float16",
        "warning",
        "values exceed the fp16 range (±65504): expect Inf/NaN on the NPU",
        "bound the activations (BatchNorm, clipping) or keep that part in int8 / on the CPU",
    ),
    _p(
        "invalid-platform",
        r"Invalid target_platform",
        "error",
        "the toolkit does not know this target platform",
        "use a platform this toolkit version supports (rk3588, rk3576, rk3566, rk3568, rk3562, "
        "rv1103, rv1106, rk2118...)",
    ),
    _p(
        "corrupt-onnx",
        r"Error parsing message",
        "error",
        "the ONNX file is corrupt or truncated",
        "re-export it and check its sha256",
    ),
    _p(
        "float64-input",
        r"Unsupport inputs\[\d+\]\.dtype: float64",
        "error",
        "the simulator rejects float64 inputs",
        "export the model with float32 inputs",
    ),
    _p(
        "symbolic-value-info",
        r"KeyError: dtype\('<U\d+'\)",
        "error",
        "the toolkit took a symbolic dimension of the model's value_info (a shape expression, as "
        "torch's dynamic-axes export writes) for a value after folding a shape subgraph",
        "remove the model's value_info (onnx: `del model.graph.value_info[:]`, then save) or "
        "export with fixed sizes (measured: a dynamic-axes YOLO11n failing so compiles on rk3588 "
        "and rk3566 without its value_info)",
    ),
    _p(
        "pad-fused-readonly",
        r"assignment destination is read-only",
        "error",
        "the toolkit's fuse_pad_into_conv writes into a Pad's pads that numpy read from the model's "
        "raw bytes, read-only (a zero Pad read only by a Conv, as tf2onnx writes TF's padding)",
        "store that Pad's pads in int64_data (onnx.helper.make_tensor(name, INT64, dims, values)) "
        "or write the padding as the Conv's own pads (measured: generated Pad → Conv fail so on "
        "rk3588, rk3566 and rv1106 and compile with int64_data pads)",
    ),
    _p(
        "dataset",
        r"dataset",
        "error",
        "the quantization dataset is missing or malformed",
        "write one .npy per input per line in dataset.txt (baseline builds it from the fixtures)",
    ),
)


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def log_lines(log: str) -> list[str]:
    """Lines of a log with colours removed; `\\r` (tqdm bars) also splits lines."""
    return [line.rstrip() for line in re.split(r"[\r\n]+", strip_ansi(log)) if line.strip()]


def parse_log(log: str) -> list[Diagnostic]:
    """Every leveled log line (W, E) and exception line as a classified diagnostic."""
    diagnostics = []
    for line in log_lines(log):
        parsed = _parse_line(line)
        if parsed is not None:
            diagnostics.append(classify(*parsed))
    return diagnostics


def _parse_line(line: str) -> tuple[str, str, str] | None:
    match = LOGGER_LINE.match(line)
    if match and match["level"] in "WE":
        stage = match["stage"] or ""
        message = NATIVE_TIME.sub("", match["message"].strip())
        return match["level"], ("compiler" if stage == "RKNN" else stage), message
    exception = EXCEPTION_LINE.match(line.strip())
    if exception and not line.startswith(" "):
        return "E", "exception", line.strip()
    return None


def classify(level: str, stage: str, message: str) -> Diagnostic:
    for pattern in PATTERNS:
        if pattern.regex.search(message):
            return Diagnostic(
                level=level,
                stage=stage,
                message=message,
                rule=pattern.rule,
                severity=pattern.severity,
                cause=pattern.cause,
                remedy=pattern.remedy,
            )
    severity = "unknown-error" if level == "E" else "unknown-warning"
    return Diagnostic(level=level, stage=stage, message=message, rule="unknown", severity=severity)


def explain(message: str) -> Diagnostic:
    """Classify a failure message (an exception's last line) the same way as log lines."""
    return classify("E", "exception", message)
