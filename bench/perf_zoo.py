"""Small generated zoos for the performance rows: `--jobs 2` against `--jobs 1`, a cached verify
against a cold one, and the same zoo on a local two-worker Ray cluster (jobs per minute).

(`bench/zoo.py` is the scale benchmark at 10-1,000 models; these zoos are a few real CNNs and
a few tiny classifiers, enough for the parallel and Ray rows.)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from measure import Run, RunFailed, interleaved, measure, median_run

REPO = Path(__file__).resolve().parent.parent
LOCK = ("--lock", "zoo.lock")


def zoo_project(sources: list[Path]) -> Path:
    """A locked project with one model per source ONNX file (each copied under its own name)."""
    root = Path(tempfile.mkdtemp(prefix="baseline-zoo-"))
    (root / "pyproject.toml").write_text("[project]\nname = 'zoo'\n")
    (root / "models").mkdir()
    entries = []
    for index, source in enumerate(sources):
        name = f"m{index:02d}-{source.stem.replace('_', '-')}"
        shutil.copyfile(source, root / "models" / f"{name}.onnx")
        entries.append(f'[[models]]\nname = "{name}"\nonnx = "models/{name}.onnx"\n')
    (root / "zoo.toml").write_text(
        '[defaults]\ntargets = ["rk3588"]\nbackends = ["onnxruntime", "rknn-sim"]\n'
        "fixtures = { samples = 1 }\n\n" + "\n".join(entries)
    )
    measure([sys.executable, "-m", "baseline", "lock", *LOCK], root, {**os.environ, "PYTHONPATH": str(REPO)})
    return root


def tiny_zoo(count: int) -> list[Path]:
    """Retrained variants of the demo classifier: ~0.1 s per conversion, fixed costs dominate."""
    folder = Path(tempfile.mkdtemp(prefix="baseline-tiny-"))
    for index in range(count):
        subprocess.run(
            [
                sys.executable,
                str(REPO / "fixtures" / "make_models.py"),
                "--out",
                str(folder / str(index)),
                "--perturb",
                f"{0.001 * (index + 1):.3f}",
                "classifier",
            ],
            check=True,
            capture_output=True,
        )
    return [folder / str(index) / "classifier.onnx" for index in range(count)]


def real_cnn_zoo(count: int) -> list[Path]:
    """The real CNN architectures shipped in the onnx package (ResNet-50, DenseNet-121, Inception-v2,
    ShuffleNet, ZFNet-512; 2-24 s per conversion and simulation), repeated to `count` models."""
    import onnx

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    names = [
        "light_resnet50",
        "light_densenet121",
        "light_inception_v2",
        "light_shufflenet",
        "light_zfnet512",
    ]
    return [folder / f"{names[index % len(names)]}.onnx" for index in range(count)]


def verify(root: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    """A checked verify: it judged every job (a failing gate is a result, exit 1: two of the
    light CNNs' gates fail), and no gate could not run."""
    command = [sys.executable, "-m", "baseline", "verify", *LOCK, "--format", "json", *args]
    run = measure(command, root, {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, codes=(0, 1))
    counts = json.loads(run.stdout)["counts"]
    if counts["pass"] == 0 or counts["error"]:
        raise RunFailed(f"verify {' '.join(args)}: {counts}")
    return run


def failed_gates(run: Run) -> int:
    return int(json.loads(run.stdout)["counts"]["fail"])


def jobs_of(run: Run) -> int:
    """Jobs a verify ran: one per model × backend × target, plus the backend-free checks."""
    report = json.loads(run.stdout)
    return len({(r["model"], r["backend"], r["target"]) for r in report["results"]})


def bench_zoo(label: str, sources: list[Path], repeat: int) -> list[dict]:
    """Cold `--jobs 1` and `--jobs 2` interleaved; a first `--jobs 2` with no job timed yet;
    then a cached verify beside the cold one."""
    from performance import row

    root = zoo_project(sources)
    try:
        (root / ".baseline-cache" / "job-times.json").unlink(missing_ok=True)  # as in a fresh clone
        first = verify(root, "--no-cache", "--jobs", "2")
        serial, parallel = _alternate(root, repeat)
        verify(root)  # fills the cache
        cached = median_run([verify(root) for _ in range(7)])  # a cached row: median of 7
    finally:
        shutil.rmtree(root)
    count, failed = len(sources), failed_gates(serial)
    return [
        row(f"cached verify of a {count}-model lock ({label})", cached, "the same verify, cold", serial)
        | _target(
            "cold / cached",
            serial.wall_s / cached.wall_s,
            "≥ 20× and < 1 s",
            serial.wall_s / cached.wall_s >= 20 and cached.wall_s < 1.0,
        ),
        row(
            f"cold {count}-model verify ({label}), --jobs 2",
            parallel,
            "--jobs 1",
            serial,
            failed_gates=failed,
        )
        | _target(
            "speed-up (--jobs 1 / --jobs 2)",
            serial.wall_s / parallel.wall_s,
            "≥ 1.7×",
            serial.wall_s / parallel.wall_s >= 1.7,
        ),
        row(f"the same, first run: no job timed yet ({label})", first, "--jobs 1", serial)
        | _target("speed-up (--jobs 1 / --jobs 2)", serial.wall_s / first.wall_s, "none (context)", None),
    ]


def _alternate(root: Path, repeat: int) -> tuple[Run, Run]:
    """--jobs 1 and --jobs 2 interleaved; no warm-up (a cold run is what is measured: the result
    cache is off, the page cache is warm after the lock)."""
    serial, parallel = [], []
    for index in range(repeat):
        order = [("1", serial), ("2", parallel)]
        for jobs, runs in order if index % 2 == 0 else reversed(order):
            runs.append(verify(root, "--no-cache", "--jobs", jobs))
    return median_run(serial), median_run(parallel)


def _target(label: str, ratio: float, target: str, met: bool | None) -> dict:
    return {"ratio_label": label, "ratio": round(ratio, 3), "target": target, "met": met}


# --- Ray ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def ray_head(cpus: int) -> Iterator[tuple[str, dict[str, str]]]:
    """`ray start --head` with `cpus` worker slots, in a session of its own that is killed
    (never `ray stop`, which would end every Ray cluster on the machine); yields its address
    and the environment a driver needs to join it (its RAY_TMPDIR holds the session's token)."""
    home = Path(tempfile.mkdtemp(prefix="bray", dir="/tmp"))  # short: socket paths ≤ 107 bytes
    # a loopback-only cluster of this run, without token authentication: with Ray 2.60's
    # default the driver was refused ("InvalidAuthToken") by a head started this way
    private = {"RAY_TMPDIR": str(home), "RAY_AUTH_MODE": "disabled"}
    env = {**os.environ, **private}
    env.pop("RAY_ADDRESS", None)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", f"--port={port}"]
    command += ["--node-ip-address=127.0.0.1", f"--num-cpus={cpus}", "--include-dashboard=false"]
    log = (home / "head.log").open("w")
    head = subprocess.Popen(
        [*command, f"--temp-dir={home}"], stdout=log, stderr=log, start_new_session=True, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while not (home / "ray_current_cluster").is_file():
            if head.poll() is not None or time.monotonic() > deadline:
                raise RunFailed(f"ray start failed: {(home / 'head.log').read_text()[-500:]}")
            time.sleep(0.2)
        time.sleep(1)
        yield f"127.0.0.1:{port}", private
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        log.close()
        shutil.rmtree(home, ignore_errors=True)


def bench_ray(count: int, repeat: int) -> dict:
    """A cold verify of a generated zoo on a running two-worker Ray cluster (as a team keeps
    one) against `--jobs 2` in this process, in jobs per minute."""
    from performance import row

    root = zoo_project(tiny_zoo(count))
    try:
        with ray_head(2) as (address, ray_env):
            on_ray, local = interleaved(
                lambda: verify(root, "--no-cache", "--executor", "ray", "--address", address, env=ray_env),
                lambda: verify(root, "--no-cache", "--jobs", "2"),
                repeat,
            )
        jobs = jobs_of(on_ray)
    finally:
        shutil.rmtree(root)
    ray_rate, local_rate = 60 * jobs / on_ray.wall_s, 60 * jobs / local.wall_s
    return row(
        f"cold verify of {count} tiny classifiers ({jobs} jobs) on a local Ray cluster, 2 workers",
        on_ray,
        "--jobs 2, local threads",
        local,
    ) | {
        "ratio_label": "jobs per minute, Ray / local",
        "ratio": round(ray_rate / local_rate, 3),
        "target": "none (context)",
        "met": None,
        "jobs_per_minute": round(ray_rate, 1),
        "local_jobs_per_minute": round(local_rate, 1),
        "note": "Ray's processes (raylet, workers) are not descendants: CPU and memory are the driver's",
    }
