"""onnxruntime on the CPU: the float reference every other backend is measured against."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from baseline.backends.base import Backend, BackendJob, BackendRun
from baseline.errors import BaselineError
from baseline.models.intent import ToolkitSettings
from baseline.runtime.isolated import run_limited

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
                # the helper has its own working directory
                (dataclasses.replace(job, onnx_path=job.onnx_path.absolute()),),
                limit,
                f"model {job.model!r}: onnxruntime",
                "raise toolkit.onnx_timeout in the intent file if the model is only slow",
            )
        except BaselineError as error:
            return BackendRun(outputs=None, error=str(error))
        return run


def golden_run(job: BackendJob) -> BackendRun:
    """Every fixture sample through onnxruntime (in the helper process), stacked per output.
    Image fixtures are fed as the model wants them (`golden_inputs`: normalised, ONNX layout)."""
    from baseline.files.images import golden_inputs

    try:
        session = _session(job)
        names = [output.name for output in session.get_outputs()]
        dtypes = {arg.name: _numpy_dtype(arg.type) for arg in session.get_inputs()}
        feed = golden_inputs(job.inputs, job.feeds or [], dtypes)
        samples = next(iter(feed.values())).shape[0]
        # asarray: a 0-d input's sample is a numpy scalar, which onnxruntime refuses (pymupdf-layout's
        # graph network takes a scalar `k`: "Unable to handle object of type <class 'numpy.int64'>")
        per_sample = [
            session.run(names, {name: np.asarray(array[index]) for name, array in feed.items()})
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


def _session(job: BackendJob) -> ort.InferenceSession:
    from baseline.runtime.sessions import new_session, shared_session

    # the static gate's probe of the same file (same helper) built this session already
    return new_session(_cut_model(job)) if job.cut else shared_session(job.onnx_path)


def _cut_model(job: BackendJob) -> bytes:
    """The graph cut where `load_onnx(outputs=...)` cuts it, so the golden returns what the .rknn does."""
    import onnx.utils

    with tempfile.TemporaryDirectory(prefix="baseline-cut-") as scratch:
        cut = Path(scratch) / "cut.onnx"
        onnx.utils.extract_model(str(job.onnx_path), str(cut), list(job.inputs), job.output_names)
        return cut.read_bytes()


def _numpy_dtype(onnx_type: str) -> str:
    """`tensor(float)` → `float32`: the dtype onnxruntime wants for a normalised image input."""
    names = {"float": "float32", "double": "float64", "float16": "float16"}
    inner = onnx_type.removeprefix("tensor(").removesuffix(")")
    return names.get(inner, inner)
