"""RKNN-Toolkit2 conversion and simulator inference, in the pinned toolkit environment.

Each job converts the ONNX model for one target (fp16, or quantized with the fixtures as
the calibration set), exports the `.rknn`, and runs the simulator on every fixture
sample, all in one worker request: the simulator can only run a model built in the
same session.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from baseline.backends.base import Backend, BackendJob, BackendRun, BuildReport
from baseline.errors import BaselineError, ConfigError
from baseline.files.images import check_calibration_images, load_order, load_pixels, onnx_shape
from baseline.files.rknn_file import read_rknn
from baseline.files.tensors import TensorSet, load_tensors, save_npz
from baseline.models.intent import ConversionSpec, ImageSet, ToolkitSettings
from baseline.models.results import Diagnostic, LayerError
from baseline.project.paths import checked_name
from baseline.toolchain.analysis import parse_error_analysis
from baseline.toolchain.client import (
    LOG_TAIL_LINES,
    WorkerFailure,
    WorkerPool,
    WorkerReply,
)
from baseline.toolchain.diagnostics import explain, log_lines, parse_log
from baseline.toolchain.provision import Toolchain, find_toolchain
from baseline.toolchain.signatures import check_settings

POOL = WorkerPool()
"""Workers live for the whole baseline process: the toolkit import is paid once per version."""


def prestart_workers(versions: dict[str, int]) -> None:
    """Launch workers for the jobs about to run (`versions`: toolkit version -> workers wanted),
    so that their toolkit import overlaps with the first jobs. A missing or damaged toolchain
    is left for the job itself to report."""
    for version, count in versions.items():
        toolchain = find_toolchain(version)
        if toolchain is None:
            continue
        with contextlib.suppress(BaselineError):
            POOL.prestart(toolchain, count)


def fresh_workers() -> None:
    """The next conversions run in new toolkit processes. Some builds differ only between
    processes (a GRU's `.rknn` carries a few KB of uninitialised memory, the same within one
    process), so a second measurement in the same worker would hide what varies."""
    POOL.retire_idle()


class RknnSimBackend(Backend):
    name = "rknn-sim"

    def __init__(self) -> None:
        # the process id in the name: a later run removes it if this one is killed (remove_orphans)
        self._scratch = tempfile.TemporaryDirectory(prefix=f"baseline-rknn-{os.getpid()}-")

    def run_impl(self, job: BackendJob) -> BackendRun:
        workdir = Path(tempfile.mkdtemp(dir=self._scratch.name, prefix=f"{_safe_model(job)}-"))
        toolchain = _toolchain(job)
        assert job.target is not None
        where = f"model {job.model!r}, target {job.target.name!r}"
        check_settings(job.target.conversion, toolchain, where)
        request = _build_request(job, workdir)
        if self.capabilities.needs_board:
            request["device"] = _device(job)
        save_npz(workdir / "inputs.npz", job.inputs)
        request.update(inputs=str(workdir / "inputs.npz"), outputs=str(workdir / "outputs.npz"))
        with POOL.borrow(toolchain) as worker:
            try:
                reply = worker.request(request, timeout=_timeout(job))
            except WorkerFailure as failure:
                return _crashed(failure)
            versions = worker.versions
        build = _build_report(reply, Path(request["export"]))
        outputs = load_tensors(workdir / "outputs.npz") if reply.response["ok"] else None
        error = None if outputs is not None else f"{build.stage} failed: {build.error}"
        return BackendRun(outputs=outputs, error=error, build=build, versions=versions)

    def analyse(self, job: BackendJob) -> list[LayerError]:
        """Per-layer cosine of the simulator against float, on the first fixture sample."""
        workdir = Path(tempfile.mkdtemp(dir=self._scratch.name, prefix=f"{_safe_model(job)}-analysis-"))
        request = _build_request(job, workdir)
        sample_files = _write_sample(_npy_inputs(job), 0, workdir / "analysis-inputs")
        request["analysis"] = {"inputs": sample_files, "output_dir": str(workdir / "snapshot")}
        with POOL.borrow(_toolchain(job)) as worker:
            reply = worker.request(request, timeout=_timeout(job))
        if not reply.response["ok"]:
            raise BaselineError(f"accuracy_analysis failed: {reply.response['error']}")
        return parse_error_analysis((workdir / "snapshot" / "error_analysis.txt").read_text())


def _toolchain(job: BackendJob) -> Toolchain:
    version = _toolkit(job).version
    toolchain = find_toolchain(version)
    if toolchain is None:
        raise ConfigError(
            f"model {job.model!r}: rknn-toolkit2 {version} is not installed; "
            f"run `baseline toolchain install {version}`"
        )
    return toolchain


class RknnDeviceBackend(RknnSimBackend):
    """The toolkit on the host, inference on a board over adb (`init_runtime(target, device_id)`).

    Not exercised on these machines: there is no board. The conversion half is the same
    code path as `rknn-sim`; only the worker's `init_runtime` arguments differ.
    """

    name = "rknn-device"


def _device(job: BackendJob) -> dict[str, str]:
    assert job.target is not None
    serial = job.target.board.serial if job.target.board is not None else None
    if serial is None:
        raise ConfigError(
            f"model {job.model!r}: rknn-device needs the board's adb serial; set "
            f'board = {{ serial = "..." }} on target {job.target.name!r}'
        )
    return {"platform": job.target.platform, "serial": serial}


def _safe_model(job: BackendJob) -> str:
    """The model name, checked before it becomes part of a file name."""
    return checked_name(job.model, f"model {job.model!r}")


def _toolkit(job: BackendJob) -> ToolkitSettings:
    if job.toolkit is None or job.target is None:
        raise ConfigError(f"model {job.model!r}: rknn-sim needs a target and a toolkit version")
    return job.toolkit


def _timeout(job: BackendJob) -> float:
    return float(_toolkit(job).timeout)


def _build_request(job: BackendJob, workdir: Path) -> dict[str, Any]:
    """The worker's request: the intent's toolkit arguments as they are, plus what baseline derives."""
    assert job.target is not None
    quantization = job.target.quantization
    conversion = job.target.conversion or ConversionSpec()
    request: dict[str, Any] = {
        "op": "build",
        "onnx": str(job.onnx_path.resolve()),  # the worker runs in its own working directory
        "platform": job.target.platform,
        "workdir": str(workdir),
        "quantization": quantization.model_dump() if quantization else None,
        # a fixed name: the workdir is already per model, and a 128-character model name plus
        # a 128-character target name would pass the file system's 255-byte name limit
        "export": str(workdir / "model.rknn"),
        "input_names": list(job.inputs),
        "output_names": job.output_names,
        **conversion.calls(),
        "config": _toolkit_config(job, conversion),
        # image fixtures are what the board receives, NHWC; other fixtures are in the ONNX layout
        "data_formats": [_data_format(job, name) for name in job.inputs],
    }
    if job.fixed_shapes and "input_size_list" not in conversion.load_onnx:
        request["input_shapes"] = [onnx_shape(array, job.feed(name)) for name, array in job.inputs.items()]
    if quantization is not None:
        if job.calibration is not None:
            check_calibration_images(job.calibration, f"model {job.model!r}: calibration")  # before OpenCV
            request["dataset"] = _write_image_dataset(job, job.calibration, workdir)
        else:
            request["dataset"] = _write_dataset(_npy_inputs(job), workdir)
    return request


def _data_format(job: BackendJob, name: str) -> str:
    feed = job.feed(name)
    return feed.toolkit_format if feed is not None else "nchw"


def _toolkit_config(job: BackendJob, conversion: ConversionSpec) -> dict[str, Any]:
    """The intent's `config` as the toolkit takes it. For an image input the graph lays out
    NHWC the toolkit's channels are the image's rows (dimension 1): its one `mean_values` /
    `std_values` value (the three colours' are equal, see `images._check_channels`) is given
    once per row. Measured on a tf2onnx BlazeFace [1, 192, 192, 3]: three values were refused
    ("expect 192"); 192 copies built, and the simulator matched onnxruntime (cosine 0.9999996
    fp16, 0.9992 w8a8)."""
    config: dict[str, Any] = dict(conversion.config)
    order = load_order(list(job.inputs), conversion)
    for key in ("mean_values", "std_values"):
        rows = config.get(key)
        if isinstance(rows, list):
            config[key] = [
                _per_row(values, job, order[index]) if index < len(order) else values
                for index, values in enumerate(rows)
            ]
    return config


def _per_row(values: Any, job: BackendJob, name: str) -> Any:
    feed = job.feed(name)
    if feed is None or not feed.channels_last_image or not isinstance(values, list) or not values:
        return values
    return [values[0]] * onnx_shape(job.inputs[name], feed)[1]


def _write_image_dataset(job: BackendJob, files: list[Path], workdir: Path) -> str:
    """dataset.txt of the calibration images as they are, as the zoo's convert.py passes them;
    for an image input the graph lays out NHWC, the images decoded to that input's size first
    (`.npy` pixels, stretched, as the toolkit reads images itself): the toolkit would read
    the image's rows as its channels and resize the picture to the input's width by 3."""
    dataset = workdir / "dataset.txt"
    channels_last = [name for name in job.inputs if (feed := job.feed(name)) and feed.channels_last_image]
    if len(job.inputs) == 1 and channels_last:
        files = _decoded(files, onnx_shape(job.inputs[channels_last[0]], job.feed(channels_last[0])), workdir)
    dataset.write_text("".join(f"{file.resolve()}\n" for file in files))
    return str(dataset)


_AS_THE_TOOLKIT_READS = ImageSet(path="dataset.txt")
"""Stretched to the input's size, RGB (grey for a 1-channel input): how the toolkit decodes the
images of a `dataset.txt`."""


def _decoded(files: list[Path], shape: list[int], workdir: Path) -> list[Path]:
    """Each image as a `[1, H, W, C]` `.npy` of its pixels (the toolkit applies the mean / std)."""
    folder = workdir / "calibration"
    folder.mkdir(parents=True, exist_ok=True)
    decoded = []
    for index, file in enumerate(files):
        path = folder / f"image{index}.npy"
        pixels = load_pixels(file, shape[1], shape[2], _AS_THE_TOOLKIT_READS, colours=shape[3])
        np.save(path, pixels[np.newaxis].astype(np.float32), allow_pickle=False)
        decoded.append(path)
    return decoded


def _npy_inputs(job: BackendJob) -> TensorSet:
    """The fixtures as the toolkit takes `.npy` files (`accuracy_analysis` inputs, a `dataset.txt`
    of fixtures that calibrate a quantized build): in the ONNX layout. Image
    fixtures are the board's NHWC pixels; transposed to NCHW, still raw pixels, the toolkit
    applies the model's `mean_values` / `std_values` itself, so its float golden is fed exactly
    what onnxruntime is (measured on a ResNet-18 with ImageNet mean/std: equal to 6e-7). Fed
    NHWC it refused them (`shape (1, 480, 480, 3) is wrong, expect 'nchw'`)."""
    pixels = {
        name for name, array in job.inputs.items() if _data_format(job, name) == "nhwc" and array.ndim == 5
    }
    return {
        name: array.transpose(0, 1, 4, 2, 3) if name in pixels else array
        for name, array in job.inputs.items()
    }


def _write_sample(inputs: TensorSet, index: int, directory: Path) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for position, array in enumerate(inputs.values()):
        path = directory / f"sample{index}-input{position}.npy"
        np.save(path, array[index], allow_pickle=False)
        paths.append(str(path))
    return paths


def _write_dataset(inputs: TensorSet, workdir: Path) -> str:
    """dataset.txt: one line per calibration sample, one .npy per input, space separated."""
    samples = next(iter(inputs.values())).shape[0]
    lines = [" ".join(_write_sample(inputs, i, workdir / "calibration")) for i in range(samples)]
    dataset = workdir / "dataset.txt"
    dataset.write_text("\n".join(lines) + "\n")
    return str(dataset)


def _build_report(reply: WorkerReply, export: Path) -> BuildReport:
    response = reply.response
    compiled = bool(response["ok"]) or response["stage"] in ("init_runtime", "inference")
    artifact = export if compiled and export.is_file() else None
    diagnostics = parse_log(reply.log)
    if not response["ok"] and response.get("error"):
        diagnostics.append(explain(response["error"]))
    return BuildReport(
        compiled=compiled,
        stage=response["stage"],
        error=response.get("error"),
        diagnostics=_unique(diagnostics),
        log_tail=log_lines(reply.log)[-LOG_TAIL_LINES:],
        seconds=response.get("seconds", {}),
        artifact=artifact,
        metadata=read_rknn(artifact) if artifact is not None else None,
    )


def _unique(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """The toolkit logs an error and then raises it: keep each message once."""
    seen: set[str] = set()
    unique = []
    for diagnostic in diagnostics:
        key = diagnostic.message.split(": ", 1)[-1]
        if key not in seen:
            seen.add(key)
            unique.append(diagnostic)
    return unique


def _crashed(failure: WorkerFailure) -> BackendRun:
    build = BuildReport(
        compiled=False,
        stage="crash",
        error=str(failure),
        diagnostics=parse_log("\n".join(failure.log_tail)),
        log_tail=failure.log_tail,
        seconds={},
        crashed=True,
    )
    return BackendRun(outputs=None, error=str(failure), build=build)
