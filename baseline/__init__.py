"""baseline: regression baselines and artifact lockfiles for ONNX models on Rockchip NPUs."""

__version__ = "0.1.0"
"""The one place the version is written: pyproject.toml reads it (`[tool.setuptools.dynamic]`)."""

DISTRIBUTION = "rknn-baseline"
"""The name to `pip install`; the import package and the command are `baseline`."""
