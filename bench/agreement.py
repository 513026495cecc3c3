"""Does `baseline check` agree with the real compiler? A confusion matrix over models we did not write.

    python bench/agreement.py [--toolkit 2.5.0] [--target rk3588] [--json bench/results/agreement.json]

Corpus (collected into bench/.corpus, not committed):
  - the model files shipped inside the `onnx` package: its real CNNs (`light/`), the
    PyTorch-exported models and operators, and the simple models;
  - ONNX models shipped inside PyPI packages, fetched with `pip download --no-deps`:
    RapidOCR (a DBNet text detector, a CRNN recogniser, a direction classifier) and
    Silero VAD (an audio voice-activity model).
Each model is checked statically and then converted for real (load, build, export) through
baseline's worker; symbolic dims are fixed the same way for both.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import onnx

from baseline.errors import BaselineError
from baseline.onnx_facts import graph_inputs, load_onnx_structure
from baseline.static_check import check_model
from baseline.toolchain.client import ToolkitWorker, WorkerFailure
from baseline.toolchain.provision import ensure_toolchain

HERE = Path(__file__).parent
CORPUS = HERE / ".corpus"
PYPI_MODELS = {"rapidocr-onnxruntime==1.4.4": "rapidocr", "silero-vad==6.2.3": "silero"}
ONNX_SUITES = ("light", "pytorch-converted", "pytorch-operator", "simple")


@dataclass
class Verdict:
    model: str
    source: str
    predicted: bool
    actual: bool
    check_seconds: float
    convert_seconds: float
    reason_predicted: str
    reason_actual: str


def onnx_package_models() -> list[tuple[str, Path]]:
    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    found = []
    for suite in ONNX_SUITES:
        for path in sorted((data / suite).glob("**/*.onnx")):
            found.append((f"onnx/{suite}/{path.parent.name}", path))
    return found


def pypi_models() -> list[tuple[str, Path]]:
    found = []
    for requirement, label in PYPI_MODELS.items():
        folder = CORPUS / label
        if not folder.is_dir():
            wheels = CORPUS / "wheels"
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), requirement],
                check=True,
            )
            wheel = next(wheels.glob(f"{requirement.split('==')[0].replace('-', '_')}-*.whl"))
            with zipfile.ZipFile(wheel) as archive:
                for member in archive.namelist():
                    if member.endswith(".onnx"):
                        target = folder / member.replace("/", "__")
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(archive.read(member))
        found += [(f"pypi/{label}", path) for path in sorted(folder.glob("*.onnx"))]
    return found


def fixed_shapes(path: Path) -> dict[str, list[int]]:
    """Symbolic dims fixed for both sides: batch 1, everything else 64."""
    shapes = {}
    for value in graph_inputs(load_onnx_structure(path)):
        dims = value.type.tensor_type.shape.dim
        shapes[value.name] = [
            d.dim_value if d.dim_value > 0 else (1 if i == 0 else 64) for i, d in enumerate(dims)
        ]
    return shapes


def convert(worker: ToolkitWorker, path: Path, target: str, shapes: dict[str, list[int]]) -> tuple[bool, str]:
    workdir = Path(tempfile.mkdtemp(prefix="agreement-"))
    request = {
        "op": "build",
        "onnx": str(path),
        "platform": target,
        "workdir": str(workdir),
        "quantization": None,
        "export": str(workdir / "model.rknn"),
        "input_names": list(shapes),
        "output_names": [],
    }
    if any(size != declared for size, declared in zip(shapes.values(), _declared(path), strict=True)):
        request["input_shapes"] = list(shapes.values())
    try:
        response = worker.request(request, timeout=120).response
    except WorkerFailure as failure:
        return False, f"crash: {failure}"
    return bool(response["ok"]), "" if response["ok"] else f"{response['stage']}: {response['error']}"


def _declared(path: Path) -> list[list[int]]:
    return [
        [d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph_inputs(load_onnx_structure(path))
    ]


def evaluate(path: Path, source: str, worker: ToolkitWorker, target: str, toolkit: str) -> Verdict | None:
    try:
        shapes = fixed_shapes(path)
        report = check_model(path, target=target, toolkit=toolkit, shapes=shapes)
    except BaselineError as error:
        print(f"  skip {path.name}: {error}", file=sys.stderr)
        return None
    start = time.perf_counter()
    compiled, why = convert(worker, path, target, shapes)
    errors = report.errors()
    return Verdict(
        model=path.name,
        source=source,
        predicted=report.predicted_compile,
        actual=compiled,
        check_seconds=report.seconds,
        convert_seconds=time.perf_counter() - start,
        reason_predicted=errors[0].line() if errors else "",
        reason_actual=why.splitlines()[0][:300] if why else "",
    )


def confusion(verdicts: list[Verdict]) -> dict[str, int]:
    return {
        "predicted compile, compiled": sum(v.predicted and v.actual for v in verdicts),
        "predicted compile, failed": sum(v.predicted and not v.actual for v in verdicts),
        "predicted fail, compiled": sum(not v.predicted and v.actual for v in verdicts),
        "predicted fail, failed": sum(not v.predicted and not v.actual for v in verdicts),
    }


def markdown(matrix: dict[str, int], verdicts: list[Verdict], toolkit: str, target: str) -> str:
    check = sorted(v.check_seconds for v in verdicts)
    convert = sorted(v.convert_seconds for v in verdicts)
    return "\n".join(
        [
            f"Agreement of `baseline check` with RKNN-Toolkit2 {toolkit} on {target}, "
            f"{len(verdicts)} models:",
            "",
            "| | compiled | failed |",
            "|---|---|---|",
            f"| **predicted to compile** | {matrix['predicted compile, compiled']} | "
            f"{matrix['predicted compile, failed']} |",
            f"| **predicted to fail** | {matrix['predicted fail, compiled']} | "
            f"{matrix['predicted fail, failed']} |",
            "",
            f"Median time per model: check {check[len(check) // 2] * 1000:.0f} ms, real conversion "
            f"{convert[len(convert) // 2] * 1000:.0f} ms (worker already started).",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolkit", default="2.5.0")
    parser.add_argument("--target", default="rk3588")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "agreement.json")
    args = parser.parse_args()
    worker = ToolkitWorker(ensure_toolchain(args.toolkit))
    verdicts = []
    for source, path in [*onnx_package_models(), *pypi_models()]:
        verdict = evaluate(path, source, worker, args.target, args.toolkit)
        if verdict is not None:
            verdicts.append(verdict)
            mark = "ok " if verdict.predicted == verdict.actual else "MISS"
            print(
                f"{mark} {source}/{path.name}: predicted {verdict.predicted}, compiled {verdict.actual}",
                file=sys.stderr,
            )
    worker.close()
    matrix = confusion(verdicts)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "toolkit": args.toolkit,
                "target": args.target,
                "confusion": matrix,
                "verdicts": [asdict(v) for v in verdicts],
            },
            indent=2,
        )
        + "\n"
    )
    print(markdown(matrix, verdicts, args.toolkit, args.target))
    for verdict in verdicts:
        if verdict.predicted and not verdict.actual:
            print(f"- missed failure: {verdict.source}/{verdict.model}: {verdict.reason_actual}")


if __name__ == "__main__":
    main()
