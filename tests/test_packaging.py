"""What a user installs: the distribution's name and version, its data files, its extras."""

from __future__ import annotations

import configparser
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata, resources
from pathlib import Path

import pytest
from packaging.version import Version

import baseline
from baseline import versions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_distribution_is_not_the_unrelated_baseline_on_pypi() -> None:
    assert PYPROJECT["project"]["name"] == baseline.DISTRIBUTION == "rknn-baseline"
    assert PYPROJECT["project"]["scripts"] == {"baseline": "baseline.launch:main"}


def test_the_version_has_one_source() -> None:
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "baseline.__version__"}


def test_the_license_is_an_spdx_expression_with_its_file() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert "Apache License" in (REPO / "LICENSE").read_text()


@pytest.mark.skipif(not (REPO / "baseline").is_dir(), reason="needs the source tree")
def test_every_data_file_is_package_data() -> None:
    """package-data globs do not recurse: a file in a new data folder would silently be left out."""
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["baseline"]
    package = REPO / "baseline"
    data = [
        path.relative_to(package).as_posix()
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"}
    ]
    assert "data/op_support/rknn-toolkit2-2.5.0.json" in data
    missing = [name for name in data if not any(fnmatch.fnmatch(name, pattern) for pattern in patterns)]
    assert missing == []


def test_the_operator_table_is_installed() -> None:
    """Under `nox -s wheel` this reads the installed wheel: `baseline check` needs the table."""
    table = resources.files("baseline").joinpath("data/op_support/rknn-toolkit2-2.5.0.json")
    assert table.is_file()
    assert resources.files("baseline").joinpath("data/compat.toml").is_file()


STRICTNESS_PROBE = """
import pytest


@pytest.mark.xfail(reason="was broken")
def test_fixed_since():
    pass


@pytest.mark.tookit
def test_misspelt_marker():
    pass
"""


def test_the_suite_s_pytest_options_are_strict(pytester: pytest.Pytester) -> None:
    """This repository's own [tool.pytest.ini_options], in a project of three mistakes: an
    xfail that passes, a misspelt marker, an unknown ini key."""
    options = {k: v for k, v in PYPROJECT["tool"]["pytest"]["ini_options"].items() if k != "testpaths"}
    lines = [
        f"{key} = {value!r}" if isinstance(value, str) else f"{key} = {value}"
        for key, value in options.items()
    ]
    ini = "[tool.pytest.ini_options]\n" + "\n".join(lines).replace("True", "true") + "\n"
    pytester.makepyprojecttoml(ini)
    pytester.makepyfile(test_probe=STRICTNESS_PROBE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:baseline", "-k", "fixed_since")
    assert "'tookit' not found in `markers` configuration option" in result.stdout.str() + result.stderr.str()
    pytester.makepyfile(test_probe=STRICTNESS_PROBE.split("@pytest.mark.tookit")[0])
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:baseline").assert_outcomes(failed=1)
    pytester.makepyprojecttoml(ini + "junit_familly = 'xunit2'\n")
    typo = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:baseline")
    assert typo.ret != 0 and "junit_familly" in typo.stderr.str()


def test_the_ray_extra_matches_what_the_tests_use() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert extras["ray"] == [r for r in extras["test"] if r.startswith("ray")]


def test_version_prints_the_version_and_the_distribution(tmp_path: Path, cli) -> None:
    code, out, err = cli(tmp_path, "--version")
    assert (code, err) == (0, "")
    assert out == f"baseline {baseline.__version__} (rknn-baseline)\n"


def test_version_warns_when_the_other_baseline_is_installed_too(
    tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(versions, "clashing_distribution", lambda: "1.2.1")
    code, _, err = cli(tmp_path, "--version")
    assert code == 0
    assert "another distribution named `baseline` (1.2.1)" in err
    assert "pip uninstall baseline" in err


def test_executor_ray_without_ray_is_one_line(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # find_spec then reports it missing
    code, out, err = cli(tmp_path, "verify", "--executor", "ray", "--lock", str(tmp_path / "baseline.lock"))
    assert (code, out) == (2, "")
    assert err == (
        "error: --executor ray needs Ray, which is not installed here: "
        "pip install 'rknn-baseline[ray]' (or use --executor local)\n"
    )


def test_only_an_installed_baseline_counts_as_a_clash(tmp_path: Path) -> None:
    stale = tmp_path / "checkout" / "baseline.egg-info"  # left by an old build: installs nothing
    stale.mkdir(parents=True)
    (stale / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: baseline\nVersion: 0.1.0\n")
    assert versions.clashing_distribution([str(stale.parent)]) is None
    installed = tmp_path / "site-packages" / "baseline-1.2.1.dist-info"
    installed.mkdir(parents=True)
    (installed / "METADATA").write_text("Metadata-Version: 2.1\nName: baseline\nVersion: 1.2.1\n")
    (installed / "RECORD").write_text("baseline/__init__.py,,\n")
    assert versions.clashing_distribution([str(stale.parent), str(installed.parent)]) == "1.2.1"


SOURCES = ("pyproject.toml", "README.md", "LICENSE", "baseline", "baseline_pytest")
"""What the wheel is built from (pyproject.toml: packages, readme, license-files)."""


def source_files(root: Path) -> set[str]:
    """The package files of a source tree, as a wheel names them."""
    return {
        path.relative_to(root).as_posix()
        for package in ("baseline", "baseline_pytest")
        for path in (root / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's from-source route: pip builds a wheel of the checkout (a clean copy of its
    sources, so no `build/` or `*.egg-info` lands in the checkout and none left there leaks in)."""
    if not (REPO / "baseline").is_dir():
        pytest.skip("needs the source tree")
    tmp = tmp_path_factory.mktemp("wheel")
    source, dist = tmp / "source", tmp / "dist"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist)]
    # a setuptools >= 77 here builds in seconds; without one that can run, pip fetches one into an
    # isolated build
    if builds_here():
        command.append("--no-build-isolation")
    subprocess.run([*command, str(source)], check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = dist.glob("*.whl")
    return wheel


SDIST_EXTRAS = {
    "PKG-INFO",
    "setup.cfg",
    "MANIFEST.in",
    "CHANGELOG.md",
    "pyproject.toml",
    "README.md",
    "LICENSE",
}
"""What an sdist holds beside the package files and its egg-info (MANIFEST.in)."""


@pytest.fixture(scope="module")
def built_sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist of a copy of the checkout, tests/ included (MANIFEST.in must leave them out)."""
    if not (REPO / "baseline").is_dir() or not builds_here():
        pytest.skip("needs the source tree and a setuptools >= 77 that can run here")
    tmp = tmp_path_factory.mktemp("sdist")
    source, dist = tmp / "source", tmp / "dist"
    source.mkdir()
    for name in (*SOURCES, "MANIFEST.in", "CHANGELOG.md", "tests"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, source / name)
    build = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    run = subprocess.run(
        [sys.executable, "-c", build, str(dist)], cwd=source, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return dist / run.stdout.strip().splitlines()[-1]


def test_the_sdist_holds_the_sources_and_no_partial_test_suite(built_sdist: Path) -> None:
    top = f"rknn_baseline-{baseline.__version__}"
    assert built_sdist.name == f"{top}.tar.gz"
    with tarfile.open(built_sdist) as sdist:
        names = {member.name.removeprefix(f"{top}/") for member in sdist.getmembers() if member.isfile()}
    assert not [name for name in names if name.startswith("tests/")]
    egg_info = {name for name in names if name.startswith("rknn_baseline.egg-info/")}
    assert names - egg_info == source_files(REPO) | SDIST_EXTRAS


def test_the_sdist_builds_the_same_wheel_as_the_checkout(
    built_sdist: Path, built_wheel: Path, tmp_path: Path
) -> None:
    with tarfile.open(built_sdist) as sdist:
        if hasattr(tarfile, "data_filter"):  # no links out, no devices (Python 3.10.12+)
            sdist.extractall(tmp_path, filter="data")
        else:  # pragma: no cover - our own archive, just built
            sdist.extractall(tmp_path)
    (unpacked,) = tmp_path.iterdir()
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--no-build-isolation"]
    subprocess.run([*command, "--wheel-dir", str(tmp_path / "dist"), str(unpacked)], check=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as from_sdist, zipfile.ZipFile(built_wheel) as from_checkout:
        assert wheel.name == built_wheel.name
        assert set(from_sdist.namelist()) == set(from_checkout.namelist())


def builds_here() -> bool:
    """Whether this environment's setuptools can build the wheel: >= 77, which needs packaging >= 24.2
    (the lowest-versions environment pins packaging 23, with which setuptools 77+ fails to start)."""
    return installed_version("setuptools") >= Version("77") and installed_version("packaging") >= Version(
        "24.2"
    )


def installed_version(distribution: str) -> Version:
    try:
        return Version(metadata.version(distribution))
    except metadata.PackageNotFoundError:
        return Version("0")


def test_the_wheel_built_from_source_holds_the_package_its_data_and_the_command(built_wheel: Path) -> None:
    assert built_wheel.name == f"rknn_baseline-{baseline.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(built_wheel) as wheel:
        names = set(wheel.namelist())
        info = f"rknn_baseline-{baseline.__version__}.dist-info"
        entry_points = configparser.ConfigParser()
        entry_points.read_string(wheel.read(f"{info}/entry_points.txt").decode())
        wheel_metadata = wheel.read(f"{info}/METADATA").decode()
    packaged = {name for name in names if not name.startswith(info)}
    assert packaged == source_files(REPO), "every source and data file, nothing else"
    assert {"baseline/py.typed", "baseline/data/compat.toml"} <= packaged
    assert "baseline/data/op_support/rknn-toolkit2-2.5.0.json" in packaged
    assert dict(entry_points["console_scripts"]) == {"baseline": "baseline.launch:main"}
    assert dict(entry_points["pytest11"]) == {"baseline": "baseline_pytest"}
    assert "Name: rknn-baseline\n" in wheel_metadata and f"{info}/licenses/LICENSE" in names


def test_the_wheel_built_from_source_runs_on_its_own(built_wheel: Path, tmp_path: Path) -> None:
    """Installed without the checkout (its dependencies are this environment's): `baseline --version`."""
    site = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site)]
    subprocess.run([*install, str(built_wheel)], check=True, capture_output=True, timeout=120)
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = "import baseline, sys; print(baseline.__file__); sys.argv = ['baseline', '--version']; "
    probe += "from baseline.launch import main; main()"
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    where, version = run.stdout.splitlines()[:2]
    assert Path(where).is_relative_to(site), "the wheel's package, not the checkout's"
    assert version == f"baseline {baseline.__version__} (rknn-baseline)"


def test_the_documented_workflow_installs_the_wheel_this_route_builds(built_wheel: Path) -> None:
    """docs/github-workflow.yml installs the committed wheel until `rknn-baseline` is on PyPI."""
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((REPO / "docs" / "github-workflow.yml").read_text())
    steps = workflow["jobs"]["baseline"]["steps"]
    (install,) = [step for step in steps if step.get("name") == "Install baseline"]
    path = re.search(r'"\./tools/([^"]+\.whl)"', install["run"])
    assert path is not None, install["run"]
    assert path.group(1).replace("$BASELINE_VERSION", baseline.__version__) == built_wheel.name
    assert workflow["env"]["BASELINE_VERSION"] == baseline.__version__, "the workflow pins this release"
