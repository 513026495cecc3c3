"""`verify --jobs 2` against `--jobs 1` on a generated zoo, cold: does a second core help?

    python bench/jobs_bench.py [--sizes 1000] [--pairs 5] [--cache no-cache|empty] [--zoo DIR] [--ray]

The last line printed is the result, e.g. `RESULT 1000 models: --jobs 2 is 1.74x --jobs 1 (...)`.

For each size: a zoo (bench/zoo.py, onnxruntime only) is made and locked, then cold verifies
with one and with two jobs run as whole processes (`measure.py`: CPU of every process waited
for, memory of the process tree), alternated A B, B A, ... so that the machine's other work
falls on both alike. `--cache no-cache` passes `--no-cache` (the project's cache exists and is
rewritten, as in bench/zoo_bench.py); `empty` points `BASELINE_CACHE` at a new empty folder
for every run (a first verify on a fresh checkout). Every run must pass every gate. The
1-minute load average is recorded beside each run: the machine is shared. Results:
bench/results/jobs.json.

`--ray`: the same on Ray, a local cluster of one worker against one of two (`ray start --head
--num-cpus 1` and `2`, both started by the bench before the first run and killed at the end,
`--executor ray --address` each). Ray's processes are not descendants of the command: the CPU
and memory columns are the driver's only, so no CPU bound is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo
from measure import load_average, measure

RESULTS = Path(__file__).resolve().parent / "results" / "jobs.json"
LOCK = "zoo.lock"


Arm = tuple[list[str], dict[str, str]]
"""What one side of the comparison adds to `verify`: its arguments and environment."""


def local_arms() -> dict[int, Arm]:
    return {jobs: (["--jobs", str(jobs)], {}) for jobs in (1, 2)}


@contextlib.contextmanager
def ray_arms() -> Iterator[dict[int, Arm]]:
    """Two local Ray clusters, of one worker and of two, running for the whole bench."""
    from perf_zoo import ray_head

    with ray_head(1) as (one, one_env), ray_head(2) as (two, two_env):
        yield {
            1: (["--executor", "ray", "--address", one], one_env),
            2: (["--executor", "ray", "--address", two], two_env),
        }


def verify_run(root: Path, jobs: int, cache: str, arm: Arm | None = None) -> dict[str, Any]:
    extra, extra_env = arm or local_arms()[jobs]
    command = [sys.executable, "-m", "baseline", "verify", "--lock", LOCK, *extra]
    env = {**os.environ, **extra_env}
    scratch = None
    if cache == "no-cache":
        command.append("--no-cache")
    else:
        scratch = Path(tempfile.mkdtemp(prefix="baseline-jobs-cache-"))
        env["BASELINE_CACHE"] = str(scratch)
    load = load_average()
    try:
        run = measure(command, root, env=env)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if "PASSED" not in run.stdout:
        raise RuntimeError(f"verify --jobs {jobs}: not every gate passed:\n{run.stdout[-1000:]}")
    return {
        "jobs": jobs,
        "seconds": run.wall_s,
        "cpu_s": run.cpu_s,
        "tree_peak_mb": run.tree_peak_mb,
        "processes": run.processes,
        "load_before": load,
        "load_after": load_average(),
    }


SPIN = "s = 0\nfor i in range(12_000_000): s += i * i\nd = {str(i): i for i in range(600_000)}"
"""Pure Python, no I/O: what two processes of it gain over one is the most two processes can
gain on this machine at that moment (a VM's two cores are not always two whole cores)."""


def two_core_limit() -> float:
    """The physical limit beside each pair: two copies of `SPIN` at once against one after the
    other (whole processes, each checked to succeed), as a throughput ratio (2.0 = two cores)."""
    command = [sys.executable, "-c", SPIN]
    started = time.perf_counter()
    for _ in range(2):
        subprocess.run(command, check=True)
    serial = time.perf_counter() - started
    started = time.perf_counter()
    both = [subprocess.Popen(command) for _ in range(2)]
    if any(process.wait() != 0 for process in both):
        raise RuntimeError("the two-core reference loop failed")
    return serial / (time.perf_counter() - started)


def cpu_bound_s(run: dict[str, Any]) -> float:
    """The least wall time a `--jobs 2` run's CPU allows on two cores: every process it waited
    for, both cores busy from its first instruction to its last. `--jobs 1` over this is the
    most `--jobs 2` could gain, whatever the scheduling: a run that takes more CPU with two jobs,
    or a `--jobs 1` that already keeps more than one core busy (its ONNX helper imports and
    computes beside the CLI), lowers it."""
    return float(run["cpu_s"]) / 2


def bench_size(root: Path, count: int, pairs: int, cache: str, arms: dict[int, Arm]) -> dict[str, Any]:
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    limits: list[float] = []
    for jobs in (1, 2):  # warm-up: the page cache, the job log, Ray's worker processes
        verify_run(root, jobs, cache, arms[jobs])
    for index in range(pairs):
        for jobs in (1, 2) if index % 2 == 0 else (2, 1):
            runs[jobs].append(run := verify_run(root, jobs, cache, arms[jobs]))
            print(
                f"  {count:5d} models --jobs {jobs}: {run['seconds']:6.2f} s, {run['cpu_s']:6.2f} s CPU, "
                f"{run['tree_peak_mb']:5.0f} MB, load {run['load_before']:.2f}",
                flush=True,
            )
        limits.append(two_core_limit())
        print(f"  two processes of pure Python at once: {limits[-1]:.2f}x one after the other", flush=True)
    one, two = (statistics.median(run["seconds"] for run in runs[jobs]) for jobs in (1, 2))
    ratios = [a["seconds"] / b["seconds"] for a, b in zip(runs[1], runs[2], strict=True)]
    bounds = [a["seconds"] / cpu_bound_s(b) for a, b in zip(runs[1], runs[2], strict=True)]
    summary = {
        "two_core_limit": statistics.median(limits),
        "two_core_limits": limits,
        "models": count,
        "cache": cache,
        "jobs_1_s": one,
        "jobs_2_s": two,
        "speed_up": one / two,
        "pair_ratios": ratios,
        "cpu_bound": statistics.median(bounds),
        "cpu_bounds": bounds,
        "jobs_1_cpu_s": statistics.median(run["cpu_s"] for run in runs[1]),
        "jobs_2_cpu_s": statistics.median(run["cpu_s"] for run in runs[2]),
        "load_median": statistics.median(run["load_before"] for rs in runs.values() for run in rs),
        "runs": runs,
    }
    print(
        f"{count} models, {cache}: --jobs 1 {one:.2f} s, --jobs 2 {two:.2f} s: {one / two:.2f}x "
        f"(pairs {min(ratios):.2f}-{max(ratios):.2f}x, load {summary['load_median']:.2f})",
        flush=True,
    )
    return summary


def locked_zoo(count: int) -> Path:
    root = zoo.make_zoo(Path(tempfile.mkdtemp(prefix="baseline-jobs-zoo-")), count)
    command = [sys.executable, "-m", "baseline", "lock", "--lock", LOCK, "--jobs", "2"]
    subprocess.run(command, cwd=root, check=True, capture_output=True)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000", help="zoo sizes, comma-separated")
    parser.add_argument("--pairs", "--repeat", type=int, default=5, help="alternated pairs (medians)")
    parser.add_argument("--cache", choices=("no-cache", "empty"), default="no-cache")
    parser.add_argument("--zoo", type=Path, action="append", default=[], help="a locked zoo to reuse")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--ray", action="store_true", help="a Ray cluster of one worker against two")
    arguments = parser.parse_args()
    given = {len(list((root / "models").glob("*.onnx"))): root for root in arguments.zoo}
    results = []
    with ray_arms() if arguments.ray else contextlib.nullcontext(local_arms()) as arms:
        for count in (int(size) for size in arguments.sizes.split(",")):
            root = given.get(count) or locked_zoo(count)
            try:
                results.append(
                    bench_size(root, count, arguments.pairs, arguments.cache, arms) | {"ray": arguments.ray}
                )
            finally:
                if root not in given.values():
                    shutil.rmtree(root, ignore_errors=True)
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(results, indent=2) + "\n")
    for summary in results:  # last, one line each: what a rerun on a quiet machine reads
        pairs, share = summary["pair_ratios"], summary["speed_up"] / summary["two_core_limit"]
        compared = "Ray, two workers vs one" if summary["ray"] else "--jobs 2 vs --jobs 1"
        bound = (
            "" if summary["ray"] else f"; the CPU the runs took allows at most {summary['cpu_bound']:.2f}x"
        )
        print(
            f"RESULT {summary['models']} models, cold verify --{summary['cache']}: {compared}: "
            f"{summary['speed_up']:.2f}x "
            f"({summary['jobs_1_s']:.2f} s -> {summary['jobs_2_s']:.2f} s, "
            f"medians of {len(pairs)} pairs {min(pairs):.2f}-{max(pairs):.2f}x, "
            f"load average {summary['load_median']:.2f}; goal >= 1.7x; the machine's own limit "
            f"beside it: {summary['two_core_limit']:.2f}x, so {share:.0%} of it{bound})"
        )


if __name__ == "__main__":
    main()
