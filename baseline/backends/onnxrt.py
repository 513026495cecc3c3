"""onnxruntime on the CPU: the float reference every other backend is measured against."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from baseline.backends.base import Backend, BackendJob, BackendRun
from baseline.errors import BaselineError
from baseline.isolated import run_limited
from baseline.models.intent import ToolkitSettings
from baseline.tensors import TensorSet

if TYPE_CHECKING:  # onnxruntime is imported by the helper process only
    import onnxruntime as ort


class OnnxRuntimeBackend(Backend):
    """Runs in the ONNX helper process under `toolkit.onnx_timeout`: a graph can loop for ever."""

    name = "onnxruntime"

    def run_impl(self, job: BackendJob) -> BackendRun:
        limit = (job.toolkit or ToolkitSettings()).onnx_timeout
        try:
            run: BackendRun = run_limited(
                "baseline.backends.onnxrt:golden_run",
                (job.onnx_path.absolute(), job.inputs),  # the helper has its own cwd
                limit,
                f"model {job.model!r}: onnxruntime",
                "raise toolkit.onnx_timeout in the intent file if the model is only slow",
            )
        except BaselineError as error:
            return BackendRun(outputs=None, error=str(error))
        return run


def golden_run(onnx_path: Path, inputs: TensorSet) -> BackendRun:
    """Every fixture sample through onnxruntime (in the helper process), stacked per output."""
    try:
        session = _session(onnx_path)
        names = [output.name for output in session.get_outputs()]
        samples = next(iter(inputs.values())).shape[0]
        per_sample = [
            session.run(names, {name: array[index] for name, array in inputs.items()})
            for index in range(samples)
        ]
    except Exception as error:  # onnxruntime's own exception types are not importable API
        return BackendRun(outputs=None, error=f"onnxruntime: {str(error).strip()[:500]}")
    shapes = {name: {run[i].shape for run in per_sample} for i, name in enumerate(names)}
    varying = [name for name, found in shapes.items() if len(found) > 1]
    if varying:
        return BackendRun(
            outputs=None,
            error=(
                f"output {varying[0]!r} changes shape between fixture samples (data-dependent); "
                "set fixtures.samples = 1 for this model"
            ),
        )
    outputs = {name: np.stack([run[i] for run in per_sample]) for i, name in enumerate(names)}
    return BackendRun(outputs=outputs)


def _session(onnx_path: Path) -> ort.InferenceSession:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.use_deterministic_compute = True
    options.log_severity_level = 3  # errors only: warnings about unused initializers are noise
    return ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])
