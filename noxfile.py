"""Developer and CI tasks. `nox -s demo` runs the demo, `nox -s tests` the test suite."""

from __future__ import annotations

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
def bench(session: nox.Session) -> None:
    """Benchmarks against the real toolkit and peers; results land in bench/results/."""
    session.install("-e", ".", "polygraphy")
    session.run("python", "bench/performance.py", *session.posargs)
    session.run("python", "bench/agreement.py")


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
