"""The toolkit worker: runs inside a toolkit environment, never imports baseline.

    python worker.py RESPONSE_FD

It imports `rknn.api` once (~1-2 s), says it is ready, then serves requests: one JSON
object per line on stdin, one JSON response per line on RESPONSE_FD. During a request,
file descriptors 1 and 2 point at the request's log file, so that the toolkit's Python
logger, tqdm and the native compiler's own output are all captured. Tensors cross as
`.npz` / `.npy` files named in the request, never as pickles.

Requests:
  {"id": n, "op": "build", "onnx": path, "platform": "rk3588", "workdir": dir,
   "quantization": null | {"dtype": "w8a8", "algorithm": "normal", "method": "channel",
                           "float_layers": null | ["tensor", ...] (hybrid quantization)},
   "dataset": null | "dataset.txt", "input_shapes": null | [[1, 3, 32, 32], ...],
   "config": {...}, "load_onnx": {...}, "build": {...} (more keyword arguments of those calls),
   "data_formats": ["nhwc" | "nchw", ...] (per input, for inference),
   "export": "model.rknn", "inputs": "inputs.npz" | null, "outputs": "outputs.npz",
   "analysis": null | {"inputs": ["x.npy", ...], "output_dir": dir}}
Responses:
  {"id": n, "ok": bool, "stage": last stage reached, "error": text | null, "seconds": {...}}
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback

os.environ.setdefault("TQDM_DISABLE", "1")

STAGES = ("load", "build", "export", "init_runtime", "inference", "analysis")

INT16_HYBRID_PLATFORMS = ("rv1103", "rv1106")
"""Platforms whose NPU keeps no layer in float16: toolkit 2.5.0 refuses `name: float16` in
`custom_quantize_layers` there ("not supported ... at rv1103/rv1106, only support int8/int16",
a YOLOv8 head's Conv on rv1106) and builds the same layers as int16."""


def hybrid_layer_dtype(platform: str) -> str:
    """The wider type a hybrid build keeps its named layers in on `platform`."""
    return "int16" if platform in INT16_HYBRID_PLATFORMS else "float16"


class StageFailed(Exception):
    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


@contextlib.contextmanager
def redirected_output(log_path: str):
    """Point fds 1 and 2 (Python and native code alike) at the log file for one request."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (log, *saved):
            os.close(fd)


def call(stage: str, function, *args, **kwargs):
    """Run one toolkit call; a non-zero return or an exception is a failure of that stage."""
    try:
        result = function(*args, **kwargs)
    except Exception as error:  # the toolkit raises bare ValueError / TypeError / RuntimeError
        raise StageFailed(stage, root_cause(error)) from None
    if isinstance(result, int) and result != 0:
        raise StageFailed(stage, f"{function.__name__} returned {result}")
    return result


def root_cause(error: Exception) -> str:
    """The toolkit wraps errors in a ValueError holding a whole traceback; keep its last error line."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.split(":", 1)[0].endswith(("Error", "Exception")):
            return line
    return f"{type(error).__name__}: {lines[-1] if lines else ''}"


def build_and_run(rknn_class, request: dict, seconds: dict) -> None:
    rknn = rknn_class(verbose=False)
    try:
        quantization = request.get("quantization")
        config = {**(request.get("config") or {}), "target_platform": request["platform"]}
        if quantization:
            config.update(
                quantized_dtype=quantization["dtype"],
                quantized_algorithm=quantization["algorithm"],
                quantized_method=quantization["method"],
            )
        timed(seconds, "config", call, "load", rknn.config, **config)
        load = {**(request.get("load_onnx") or {}), "model": request["onnx"]}
        if request.get("input_shapes"):
            load.update(inputs=request["input_names"], input_size_list=request["input_shapes"])
        timed(seconds, "load", call, "load", rknn.load_onnx, **load)
        if quantization and quantization.get("float_layers"):
            built = timed(seconds, "build", hybrid_build, rknn_class, rknn, config, request, quantization)
            rknn.release()  # step 2 built in a new RKNN object (2.5.0 refuses one that loaded the ONNX)
            rknn = built
        else:
            timed(
                seconds,
                "build",
                call,
                "build",
                rknn.build,
                **(request.get("build") or {}),
                do_quantization=bool(quantization),
                dataset=request.get("dataset"),
            )
        timed(seconds, "export", call, "export", rknn.export_rknn, request["export"])
        if request.get("analysis"):
            analysis = request["analysis"]
            timed(
                seconds,
                "analysis",
                call,
                "analysis",
                rknn.accuracy_analysis,
                inputs=analysis["inputs"],
                output_dir=analysis["output_dir"],
            )
        if request.get("inputs"):
            device = request.get("device")  # a board on adb; None runs the simulator
            runtime = {"target": device["platform"], "device_id": device["serial"]} if device else {}
            timed(seconds, "init_runtime", call, "init_runtime", rknn.init_runtime, **runtime)
            timed(seconds, "inference", infer, rknn, request)
    finally:
        with contextlib.suppress(Exception):
            rknn.release()


def hybrid_build(rknn_class, rknn, config: dict, request: dict, quantization: dict):
    """Hybrid quantization: step 1 writes `<model>.quantization.cfg` (and a model and data file)
    into the working directory; the tensors it lists under the names asked for, and the toolkit's
    own names derived from them (`name-rs`, `name_rs`, ...), go to `custom_quantize_layers` as
    float16 (int16 on rv1103 / rv1106: `hybrid_layer_dtype`); step 2 builds. Only names the
    toolkit wrote are written back, never the request's.
    Step 2 runs in a new RKNN object, configured alike, as Rockchip's two-script example does
    (toolkit 2.5.0 refuses step 2 on the object that loaded the ONNX); it is returned."""
    float_layers = quantization["float_layers"]
    call("build", rknn.hybrid_quantization_step1, dataset=request.get("dataset"), proposal=False)
    stem = os.path.splitext(os.path.basename(request["onnx"]))[0]
    cfg_path = f"{stem}.quantization.cfg"
    with open(cfg_path, encoding="utf-8") as handle:
        text = handle.read()
    kept = [key for key in _cfg_tensors(text) if _asked_for(_unquoted(key), float_layers)]
    if not kept:
        raise StageFailed("build", f"none of the float_layers {float_layers[:3]} names a quantized tensor")
    dtype = hybrid_layer_dtype(config["target_platform"])
    custom = "custom_quantize_layers:\n" + "".join(f"    {name}: {dtype}\n" for name in kept)
    with open(cfg_path, "w", encoding="utf-8") as handle:
        handle.write(text.replace("custom_quantize_layers: {}\n", custom, 1))
    second = rknn_class(verbose=False)
    try:
        call("build", second.config, **config)
        call(
            "build",
            second.hybrid_quantization_step2,
            model_input=f"{stem}.model",
            data_input=f"{stem}.data",
            model_quantization_cfg=cfg_path,
        )
    except BaseException:
        with contextlib.suppress(Exception):
            second.release()
        raise
    return second


def _cfg_tensors(text: str) -> list:
    """The tensor keys under `quantize_parameters:` (four-space keys, as step 1 writes them), as
    written: YAML quotes a name that would read as a number (`'368':`, PyTorch's numbered
    tensors), and custom_quantize_layers must write it so again."""
    names, inside = [], False
    for line in text.splitlines():
        if not line.startswith(" "):
            inside = line.startswith("quantize_parameters:")
        elif inside and line.startswith("    ") and not line.startswith("     ") and line.endswith(":"):
            names.append(line.strip()[:-1])
    return names


def _unquoted(key: str) -> str:
    """A YAML key's name: `'368'` is the tensor 368 (CenterFace's numbered tensors matched none
    of the layers asked for while the quotes stayed on)."""
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
        return key[1:-1]
    return key


def _asked_for(name: str, asked: list) -> bool:
    return any(name == a or (name.startswith(a) and name[len(a)] in "-_") for a in asked)


def infer(rknn, request: dict) -> None:
    import numpy as np

    with np.load(request["inputs"], allow_pickle=False) as archive:
        inputs = [archive[name] for name in request["input_names"]]
    samples = inputs[0].shape[0]
    per_sample = []
    for index in range(samples):
        feed = [np.asarray(array[index]) for array in inputs]  # a 0-d input's sample stays an array
        # image fixtures are NHWC pixels, as the board gets them; other fixtures the ONNX layout
        formats = request.get("data_formats") or ["nchw"] * len(feed)
        # through `call`: the toolkit's error as one line, not the worker's whole traceback
        outputs = call("inference", rknn.inference, inputs=feed, data_format=formats)
        if outputs is None:
            raise StageFailed("inference", "inference returned None (unsupported input dtype or rank?)")
        per_sample.append(outputs)
    names = request["output_names"]
    if len(per_sample[0]) != len(names):
        raise StageFailed(
            "inference",
            f"the built model has {len(per_sample[0])} outputs, the ONNX model {len(names)}: {names}",
        )
    stacked = {name: np.stack([np.asarray(run[i]) for run in per_sample]) for i, name in enumerate(names)}
    np.savez(request["outputs"], **stacked)


def timed(seconds: dict, key: str, function, *args, **kwargs):
    start = time.perf_counter()
    try:
        return function(*args, **kwargs)
    finally:
        seconds[key] = round(time.perf_counter() - start, 4)


def serve(rknn_class, response_fd: int) -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        seconds: dict = {}
        response = {"id": request.get("id"), "ok": True, "stage": "done", "error": None}
        os.chdir(request["workdir"])  # the toolkit drops files into the working directory
        with redirected_output(os.path.join(request["workdir"], "toolkit.log")):
            try:
                build_and_run(rknn_class, request, seconds)
            except StageFailed as failure:
                response.update(ok=False, stage=failure.stage, error=str(failure))
            except Exception:  # a bug here must not kill the worker; report it instead
                response.update(ok=False, stage="worker", error=traceback.format_exc(limit=3))
        response["seconds"] = seconds
        os.write(response_fd, (json.dumps(response) + "\n").encode())


def versions() -> dict:
    import importlib.metadata as metadata
    import platform

    found = {"python": platform.python_version()}
    for name in ("rknn-toolkit2", "onnx", "onnxruntime", "numpy", "torch"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    summary = metadata.metadata("rknn-toolkit2").get("Summary", "")
    if "commit:" in summary:  # "Rockchip Neural Network Toolkit2. (commit: b8aa19d9)"
        found["rknn-toolkit2-commit"] = summary.split("commit:", 1)[1].strip(" )")
    return found


def main() -> None:
    response_fd = int(sys.argv[1])
    start = time.perf_counter()
    try:
        with redirected_output(sys.argv[2]) if len(sys.argv) > 2 else contextlib.nullcontext():
            from rknn.api import RKNN
    except Exception as error:  # a damaged environment: say why, instead of dying silently
        os.write(response_fd, (json.dumps({"ready": False, "error": root_cause(error)}) + "\n").encode())
        sys.exit(1)
    ready = {
        "ready": True,
        "versions": versions(),
        "import_seconds": round(time.perf_counter() - start, 3),
    }
    os.write(response_fd, (json.dumps(ready) + "\n").encode())
    serve(RKNN, response_fd)
    # stdin closed: every answer is written (os.write, unbuffered) and each request's log closed.
    # An orderly interpreter exit would unload the toolkit, torch and onnxruntime for ~0.4-0.8 s
    # (measured) while baseline waits; nothing of it matters, so leave at once.
    os._exit(0)


if __name__ == "__main__":
    main()
