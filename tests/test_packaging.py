"""What a user installs: the distribution's name and version, its data files, its extras."""

from __future__ import annotations

import fnmatch
import sys
from importlib import resources
from pathlib import Path

import pytest

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
