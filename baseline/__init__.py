"""baseline: regression baselines and artifact lockfiles for ONNX models on Rockchip NPUs."""

__version__ = "0.1.0"
