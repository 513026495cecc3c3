"""Developer and CI tasks. `nox -s demo` runs the demo, `nox -s tests` the test suite.

`nox -s tests_lowest` and `nox -s wheel` test what users install: the lowest versions
pyproject.toml admits, and the built wheel in a clean environment. `.ci/run` runs them all.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

DEPENDENCY_SETS = {
    "latest": [],
    # the libraries RKNN-Toolkit2 2.5.0 pins; baseline must work inside its environments too
    "toolkit-pins": ["numpy==1.26.4", "onnx==1.18.0", "onnxruntime==1.20.1"],
}


@nox.session
def demo(session: nox.Session) -> None:
    """Verify the demo lock: every gate on every demo model."""
    session.install("-e", ".")
    session.run("baseline", "verify", "--lock", "lockfiles/demo/baseline.lock", *session.posargs)


@nox.session
@nox.parametrize("deps", list(DEPENDENCY_SETS))
def tests(session: nox.Session, deps: str) -> None:
    """The test suite, with current libraries and with the toolkit's pinned ones."""
    session.install("-e", ".[test]", *DEPENDENCY_SETS[deps])
    session.run("pytest", *session.posargs)


@nox.session
def tests_lowest(session: nox.Session) -> None:
    """The test suite with the lowest version of every direct dependency pyproject.toml declares.

    uv's `lowest-direct` resolution takes each floor as written (transitive libraries stay at
    their newest, as a user's would): a floor the code no longer works with fails here.
    """
    session.install("uv")
    python = str(Path(session.virtualenv.location) / "bin" / "python")
    session.run("uv", "pip", "install", "--python", python, "--resolution", "lowest-direct", "-e", ".[test]")
    session.run("uv", "pip", "list", "--python", python)
    session.run("pytest", *session.posargs)


@nox.session(reuse_venv=False)
def wheel(session: nox.Session) -> None:
    """Build the wheel, install it (not editable) in a clean environment, run the demo and the tests.

    Both run in a copy of the checkout without the `baseline/` source folder, so every
    `import baseline` is the installed wheel's: a file missing from the wheel fails here.
    """
    # outside the repository (not session.create_tmp(), which also moves TMPDIR there): tests make
    # projects in temporary folders and find their root by the nearest .git or pyproject.toml
    tmp = Path(tempfile.gettempdir()) / "baseline-nox-wheel"
    dist, checkout = tmp / "dist", tmp / "checkout"
    for folder in (dist, checkout):
        shutil.rmtree(folder, ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--wheel", "--outdir", str(dist))
    (built,) = dist.glob("rknn_baseline-*.whl")
    session.install(f"{built}[test]")
    copy_checkout(checkout, skip="baseline/")
    session.chdir(checkout)
    installed = "import baseline; assert 'site-packages' in baseline.__file__, baseline.__file__"
    session.run("python", "-c", installed)
    session.run("baseline", "--version")
    session.run("baseline", "verify", "--lock", "lockfiles/demo/baseline.lock")
    session.run("pytest", *session.posargs)


def copy_checkout(destination: Path, skip: str) -> None:
    """The checkout's tracked and untracked-but-not-ignored files, less those under `skip`."""
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        capture_output=True,
        check=True,
    )
    for name in listing.stdout.decode().split("\0"):
        source = Path(name)
        if not name or name.startswith(skip) or not source.is_file():
            continue
        (destination / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination / source)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against the real toolkit and peers; results land in bench/results/."""
    # psutil: memory of whole process trees; ray: the Ray row; polygraphy and uv: the peers
    session.install("-e", ".[ray]", "polygraphy", "psutil", "uv")
    session.run("python", "bench/performance.py", *session.posargs)
    # the commands users run (lock, verify, lock --check, accept) as whole processes, real models
    session.run("python", "bench/commands.py")
    session.run("python", "bench/agreement.py")
    session.run("python", "bench/check_time.py")
    # generated zoos of 10, 100 and 1,000 models, beside `uv lock --check` on 1,000 packages
    session.run("python", "bench/zoo_bench.py")
    # zero false alarms: calibrate, lock, five unchanged verify --no-cache, five faults (~30 min)
    session.run("python", "bench/battery.py")
    # red means a regression: 23 unseen PyPI models, lock, verify, five verify --no-cache (~6 min)
    session.run("python", "bench/unseen_battery.py")


@nox.session
def docs(session: nox.Session) -> None:
    """Regenerate docs/intent-reference.md and docs/baseline.schema.json from the intent's records."""
    session.install("-e", ".")
    session.run("python", "-m", "baseline.reference_docs", "docs")


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    paths = ["baseline", "tests", "fixtures", "bench", "scripts", "noxfile.py"]
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[test]", "mypy")
    session.run("mypy", "baseline", "tests")
