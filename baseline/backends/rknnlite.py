"""Outputs captured on a board with RKNN-Toolkit-Lite2, checked before they are trusted.

Lite2 exists only on the board (aarch64), so the host never runs it: `baseline capture`
writes a bundle (the locked `.rknn`, the fixtures, `capture.py`), the board runs it, and
the bundle comes back to `<captures>/<model>/<target>/`. This backend then verifies the
manifest — the board ran exactly the locked model on exactly the locked fixtures — and
hands the outputs to the same gates as every other backend.
"""

from __future__ import annotations

import json
from pathlib import Path

from baseline.backends.base import Backend, BackendJob, BackendRun
from baseline.errors import InputError
from baseline.files.hashing import sha256_file
from baseline.files.tensors import load_tensors
from baseline.project.paths import checked_regular_file


class RknnLiteBackend(Backend):
    name = "rknnlite"

    def run_impl(self, job: BackendJob) -> BackendRun:
        if job.capture_dir is None or job.artifact is None:
            return BackendRun(outputs=None, error="no locked .rknn for this target; run `baseline lock`")
        manifest_path = job.capture_dir / "manifest.json"
        if not manifest_path.is_file():
            return BackendRun(
                outputs=None,
                error=(
                    f"no capture in {job.capture_dir}; run `baseline capture --model {job.model} "
                    f"--target {job.target_name}` and capture.py on the board"
                ),
            )
        manifest = _manifest(_capture_file(job.capture_dir, "manifest.json"))
        problem = _mismatch(job, manifest)
        if problem is not None:
            return BackendRun(outputs=None, error=f"{manifest_path}: {problem}; capture again")
        outputs = load_tensors(_capture_file(job.capture_dir, "outputs.npz"))
        return BackendRun(
            outputs=outputs,
            versions={"sdk": str(manifest.get("sdk_version", ""))},
        )


def _capture_file(folder: Path, name: str) -> Path:
    """A file of the capture folder; a symlink out of the folder or a FIFO is refused."""
    return checked_regular_file(folder, folder / name, f"capture {folder}")


MAX_MANIFEST_BYTES = 1 << 20
"""capture.py writes a few hundred bytes; a larger manifest is not its and is not parsed."""
MAX_MANIFEST_DEPTH = 8
"""capture.py writes a flat object; deeper nesting only serves to exhaust the parser's stack."""


def _manifest(path: Path) -> dict[str, object]:
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise InputError(f"{path}: capture manifest is larger than {MAX_MANIFEST_BYTES} bytes; capture again")
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: not a valid capture manifest ({error})") from None
    except RecursionError:
        raise InputError(f"{path}: capture manifest is nested too deeply; capture again") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a valid capture manifest")
    if _depth(data) > MAX_MANIFEST_DEPTH:
        raise InputError(f"{path}: capture manifest is nested too deeply; capture again")
    return data


def _depth(value: object) -> int:
    """Nesting depth of a parsed JSON value, without recursion (the value came from a file)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _mismatch(job: BackendJob, manifest: dict[str, object]) -> str | None:
    assert job.artifact is not None
    if manifest.get("model_sha256") != sha256_file(job.artifact):
        return "the board ran a different .rknn than the one pinned in the lock"
    if job.fixtures_sha256 is not None and manifest.get("inputs_sha256") != job.fixtures_sha256:
        return "the board ran different fixtures than the ones pinned in the lock"
    return None
