"""onnxruntime on the CPU: the float reference every other backend is measured against."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from baseline.backends.base import Backend, BackendJob, BackendRun


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"

    def run_impl(self, job: BackendJob) -> BackendRun:
        try:
            session = _session(job)
            names = [output.name for output in session.get_outputs()]
            samples = next(iter(job.inputs.values())).shape[0]
            per_sample = [
                session.run(names, {name: array[index] for name, array in job.inputs.items()})
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
    options = ort.SessionOptions()
    options.use_deterministic_compute = True
    options.log_severity_level = 3  # errors only: warnings about unused initializers are noise
    return ort.InferenceSession(str(job.onnx_path), sess_options=options, providers=["CPUExecutionProvider"])
