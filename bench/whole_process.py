"""Whole-process rows: baseline as a user runs it beside the tool or script a user would run
instead, each a complete process tree measured by `measure`, each run checked for its results.

- a kernel row (a library call, not a command): convert + simulate the demo models through
  baseline's toolkit worker vs a bare toolkit script;
- `baseline verify` (onnxruntime only) vs `polygraphy run --onnxrt` on a ~50 MB CNN;
- the main process of that verify, its own peak memory, vs `python -c "import numpy"`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from measure import Run, RunFailed, interleaved, measure

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "fixtures" / "demo"
CORPUS = REPO / "bench" / ".corpus"

# Each script prints, per model, whether it built and a checksum of every output it inferred,
# so that the bench can check both did the same real work (an inference that failed has none).
BARE_SCRIPT = """
import sys, json, numpy as np
from rknn.api import RKNN
done = {}
for onnx_path, inputs_path, names in json.loads(sys.argv[1]):
    rknn = RKNN(verbose=False)
    rknn.config(target_platform="rk3588")
    with np.load(inputs_path) as data:
        arrays = [data[k] for k in data.files]
        # the shapes the fixtures have (one sample each), as a model with dynamic dims needs
        shapes = [list(a.shape[1:]) for a in arrays]
        assert rknn.load_onnx(model=onnx_path, inputs=list(data.files), input_size_list=shapes) == 0
    try:
        built = rknn.build(do_quantization=False) == 0
    except ValueError:  # the toolkit raises for graphs it refuses (nms_head)
        built = False
    if not built:
        rknn.release(); done[onnx_path] = None; continue
    assert rknn.export_rknn("/tmp/bare.rknn") == 0
    assert rknn.init_runtime() == 0
    runs = [rknn.inference(inputs=[a[i] for a in arrays], data_format=["nchw"] * len(arrays))
            for i in range(arrays[0].shape[0])]
    assert all(run is not None and len(run) == len(names) for run in runs), "inference failed"
    done[onnx_path] = [float(np.nansum(np.abs(np.stack([r[k] for r in runs]).astype("float64"))))
                       for k in range(len(names))]
    rknn.release()
print(json.dumps(done))
"""

OURS_SCRIPT = """
import sys, json
import numpy as np
from pathlib import Path
from baseline.backends import BackendJob, get_backend
from baseline.models.intent import TargetSpec, ToolkitSettings
from baseline.files.tensors import load_tensors
backend = get_backend("rknn-sim")
done = {}
for onnx_path, inputs_path, names in json.loads(sys.argv[1]):
    job = BackendJob(model=Path(onnx_path).stem, onnx_path=Path(onnx_path),
                     inputs=load_tensors(Path(inputs_path)), output_names=names,
                     target=TargetSpec(name="rk3588", platform="rk3588"), toolkit=ToolkitSettings())
    run = backend.run(job)
    built = run.build is not None and run.build.compiled
    assert built == (run.outputs is not None), run.error
    done[onnx_path] = None if not built else [
        float(np.nansum(np.abs(run.outputs[n].astype("float64")))) for n in names]
print(json.dumps(done))
"""


def output_names(path: Path) -> list[str]:
    import onnx

    return [value.name for value in onnx.load(str(path), load_external_data=False).graph.output]


def same_results(ours: Run, bare: Run) -> None:
    """Both built the same models and inferred outputs that agree (checksums within 1e-3)."""
    # the last line: the toolkit prints its own log lines before it
    mine, theirs = (json.loads(run.stdout.strip().splitlines()[-1]) for run in (ours, bare))
    if mine.keys() != theirs.keys() or not any(mine.values()):
        raise RunFailed(f"different or no work: {mine} vs {theirs}")
    for model, sums in mine.items():
        other = theirs[model]
        if (sums is None) != (other is None) or (
            sums and not all(math.isclose(a, b, rel_tol=1e-3) for a, b in zip(sums, other, strict=True))
        ):
            raise RunFailed(f"{model}: baseline {sums} vs bare script {other}")


def bench_toolkit_overhead(repeat: int) -> tuple[str, Run, Run]:
    from baseline.toolchain.provision import DEFAULT_VERSION, ensure_toolchain

    toolchain = ensure_toolchain(DEFAULT_VERSION)
    models = ["classifier", "detector", "nms_head", "overflow"]
    work = [
        [
            str(DEMO / f"{m}.onnx"),
            str(next((DEMO / "tensors" / m).glob("inputs.*.npz"))),
            output_names(DEMO / f"{m}.onnx"),
        ]
        for m in models
    ]
    scratch = Path(tempfile.mkdtemp(prefix="baseline-bench-"))
    bare_env = {**os.environ, "TQDM_DISABLE": "1"}
    bare_env.pop("PYTHONPATH", None)  # the toolkit's environment, as baseline's worker runs it
    ours_env = {**os.environ, "PYTHONPATH": str(REPO)}
    argument = json.dumps(work)
    try:
        ours, bare = interleaved(
            lambda: measure([sys.executable, "-c", OURS_SCRIPT, argument], scratch, ours_env),
            lambda: measure([str(toolchain.python), "-c", BARE_SCRIPT, argument], scratch, bare_env),
            repeat,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    same_results(ours, bare)
    # a kernel row: the library call under `verify`, without the lock, hashing, the onnxruntime
    # reference or any comparison (`bench/commands.py` times the command itself)
    return (
        "kernel (library call): convert + simulate the 4 demo models (rk3588 fp16, outputs checked)",
        ours,
        bare,
    )


# --- verify beside polygraphy run ------------------------------------------------------------

CNN_WHEEL = "ddddocr==1.6.1"
CNN_MEMBER = "ddddocr/common.onnx"
"""A 54 MB CNN shipped on PyPI (ddddocr's OCR model: 21 convolutions, a swish backbone, one
LSTM, opset 12, exported by PyTorch); input 1x1x64xW, fixed here to W = 256."""
CNN_SHAPE = [1, 1, 64, 256]


def cnn_model(folder: Path) -> Path:
    """The CNN, from the wheel cached in bench/.corpus/wheels (downloaded by pip once)."""
    wheels = CORPUS / "wheels"
    wheel = next(wheels.glob("ddddocr-1.6.1-*.whl"), None)
    if wheel is None:
        import subprocess

        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), CNN_WHEEL],
            check=True,
        )
        wheel = next(wheels.glob("ddddocr-1.6.1-*.whl"))
    target = folder / "models" / "cnn.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive, archive.open(CNN_MEMBER) as source, target.open("wb") as out:
        shutil.copyfileobj(source, out)
    return target


def polygraphy_command() -> list[str]:
    found = shutil.which("polygraphy") or str(Path(sys.executable).with_name("polygraphy"))
    return [sys.executable, found]


def cnn_project() -> tuple[Path, Path]:
    """A locked project of the CNN (onnxruntime only) and polygraphy's copy of its fixtures."""
    import numpy as np
    from polygraphy.json import save_json

    root = Path(tempfile.mkdtemp(prefix="baseline-cnn-"))
    model = cnn_model(root)
    (root / "baseline.toml").write_text(
        '[defaults]\ntargets = ["rk3588"]\nbackends = ["onnxruntime"]\n'
        f"fixtures = {{ samples = 1, shapes = {{ input1 = {CNN_SHAPE} }} }}\n\n"
        '[[models]]\nname = "cnn"\nonnx = "models/cnn.onnx"\n'
    )
    measure([sys.executable, "-m", "baseline", "lock"], root, _env())
    [fixtures] = (root / "tensors" / "cnn").glob("inputs.*.npz") or root.glob("**/cnn/inputs.*.npz")
    with np.load(fixtures) as data:
        feeds = [{name: data[name][index] for name in data.files} for index in range(data["input1"].shape[0])]
    save_json(feeds, str(root / "inputs.json"))
    measure(
        [
            *polygraphy_command(),
            "run",
            str(model),
            "--onnxrt",
            "--load-inputs",
            "inputs.json",
            "--save-outputs",
            "golden.json",
        ],
        root,
    )
    return root, model


def bench_verify_vs_polygraphy(repeat: int) -> tuple[str, Run, Run]:
    compile_baseline()
    root, model = cnn_project()
    size = model.stat().st_size / 1e6
    polygraphy = [
        *polygraphy_command(),
        "run",
        str(model),
        "--onnxrt",
        "--load-inputs",
        "inputs.json",
        "--load-outputs",
        "golden.json",
    ]
    try:
        ours, peer = interleaved(
            lambda: _checked_verify(root),
            lambda: _checked(measure(polygraphy, root), "PASSED", "polygraphy run"),
            repeat,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    name = f"verify, onnxruntime only, a {size:.0f} MB CNN (ddddocr), whole process, cold"
    return name, ours, peer


def bench_main_process_memory(repeat: int) -> tuple[str, Run, Run]:
    """The main process of a cold onnxruntime-only `verify` (its own peak, not its ONNX
    helper's) beside a Python that imports numpy, the floor any numpy tool pays."""
    compile_baseline()
    root, _ = cnn_project()
    floor = [sys.executable, "-c", "import numpy"]
    try:
        ours, numpy_only = interleaved(lambda: _checked_verify(root), lambda: measure(floor, root), repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return "verify's main process, cold, onnxruntime only (ddddocr CNN), own peak memory", ours, numpy_only


def compile_baseline() -> None:
    """Byte-compile baseline's modules, as installing a wheel does: polygraphy runs from its
    installed .pyc files, and a checkout run with PYTHONDONTWRITEBYTECODE set would
    otherwise compile baseline's ~200 modules from source in every measured run (~0.2 s CPU)."""
    import compileall

    compileall.compile_dir(str(REPO / "baseline"), quiet=1)


def _checked_verify(root: Path) -> Run:
    run = measure(
        [sys.executable, "-m", "baseline", "verify", "--no-cache", "--format", "json"], root, _env()
    )
    report = json.loads(run.stdout)
    statuses = {result["gate"]: result["status"] for result in report["results"]}
    if not {"drift", "static", "integrity"} <= statuses.keys() or set(statuses.values()) != {"pass"}:
        raise RunFailed(f"baseline verify: {statuses}")
    return run


def _checked(run: Run, word: str, what: str) -> Run:
    if word not in run.stdout:
        raise RunFailed(f"{what}: no {word!r} in its output: {run.stdout[-300:]}")
    return run


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}
