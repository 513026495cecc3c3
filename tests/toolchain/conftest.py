"""Fixtures for tests that drive the real RKNN-Toolkit2 (installed on first use, then cached)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from baseline.backends import BackendJob, get_backend
from baseline.backends.rknn_sim import RknnSimBackend
from baseline.models.intent import QuantizationSpec, TargetSpec, ToolkitSettings
from baseline.toolchain.provision import DEFAULT_VERSION, Toolchain, ensure_toolchain

RK3588 = TargetSpec(name="rk3588", platform="rk3588")
RK3588_W8A8 = TargetSpec(name="rk3588-w8a8", platform="rk3588", quantization=QuantizationSpec())


@pytest.fixture(scope="session")
def toolchain() -> Toolchain:
    return ensure_toolchain(DEFAULT_VERSION)


@pytest.fixture
def rknn(toolchain: Toolchain) -> RknnSimBackend:
    backend = get_backend("rknn-sim")
    assert isinstance(backend, RknnSimBackend)
    return backend


def maxpool3d_model(path: Path) -> Path:
    """A 3-D MaxPool: RKNN-Toolkit2 2.5.0's native compiler aborts (SIGABRT) on it (measured)."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    graph = helper.make_graph(
        [node],
        "maxpool3d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 4, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, str(path))
    return path


@pytest.fixture
def make_job() -> Callable[..., BackendJob]:
    def make(
        onnx_path: Path,
        inputs: dict[str, np.ndarray],
        outputs: list[str],
        target: TargetSpec = RK3588,
        timeout: float = 120.0,
    ) -> BackendJob:
        return BackendJob(
            model=onnx_path.stem,
            onnx_path=onnx_path,
            inputs=inputs,
            output_names=outputs,
            target=target,
            toolkit=ToolkitSettings(timeout=timeout),
        )

    return make
