"""Reading a board's NPU software over adb: SoC, kernel, driver, runtime library, rknn_server.

The commands and output formats are the ones Rockchip documents (rknn-facts.md §2.3).
Every probe is read-only; nothing is installed or started on the board.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from baseline.compat import runtime_library
from baseline.errors import BaselineError, ConfigError
from baseline.models.lock import MAX_BOARD_FIELD, ObservedBoard

ADB_ENV = "BASELINE_ADB"
ADB_TIMEOUT = 30.0
MAX_FIELD = MAX_BOARD_FIELD
"""Characters kept of a free-text board field (model name, kernel release)."""

DRIVER_COMMAND = (
    "cat /sys/kernel/debug/rknpu/version 2>/dev/null || cat /proc/rknpu/version 2>/dev/null || "
    "cat /sys/kernel/debug/rknpu/driver_version 2>/dev/null || dmesg | grep -i 'rknpu driver'"
)
LIBRARY_PATHS = {
    "librknnrt": ("/usr/lib/librknnrt.so", "/usr/lib64/librknnrt.so", "/vendor/lib64/librknnrt.so"),
    "librknnmrt": ("/oem/usr/lib/librknnmrt.so", "/usr/lib/librknnmrt.so"),
}
SERVER_PATHS = ("/usr/bin/rknn_server", "/oem/usr/bin/rknn_server", "/vendor/bin/rknn_server")
VERSION = r"v?(\d+\.\d+\.\d+(?:b\d+)?)"


class BoardError(BaselineError):
    """The board could not be reached or read."""


def adb_executable() -> str:
    found = os.environ.get(ADB_ENV) or shutil.which("adb")
    if not found:
        raise ConfigError(f"adb not found; install it (apt install adb) or set {ADB_ENV}")
    return found


def adb(serial: str, *args: str) -> str:
    command = [adb_executable(), "-s", serial, *args]
    try:
        # a board's files are bytes: decode what is not UTF-8 as U+FFFD rather than crash
        result = subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=ADB_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise BoardError(
            f"board {serial}: `adb {' '.join(args)}` timed out after {ADB_TIMEOUT:.0f} s"
        ) from None
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise BoardError(f"board {serial}: `adb {' '.join(args)}` failed: {message[-1] if message else ''}")
    return result.stdout


def shell(serial: str, command: str) -> str:
    return adb(serial, "shell", command)


def probe_board(serial: str) -> ObservedBoard:
    """Everything baseline records about a board's NPU software."""
    _require_attached(serial)
    soc = parse_soc(shell(serial, "cat /proc/device-tree/compatible"))
    library = runtime_library(soc or "")
    library_path = _first_existing(serial, LIBRARY_PATHS[library])
    server_path = _first_existing(serial, SERVER_PATHS)
    return ObservedBoard(
        serial=serial,
        soc=soc,
        model=_field(shell(serial, "cat /proc/device-tree/model")),
        kernel=_field(shell(serial, "uname -r")),
        driver=parse_version(shell(serial, DRIVER_COMMAND), r"RKNPU driver:?\s*"),
        runtime_library=library,
        runtime=_embedded_version(serial, library_path, f"{library} version") if library_path else None,
        runtime_sha256=_sha256(serial, library_path) if library_path else None,
        rknn_server=_embedded_version(serial, server_path, "rknn_server version") if server_path else None,
    )


def _require_attached(serial: str) -> None:
    try:
        listing = subprocess.run(
            [adb_executable(), "devices"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=ADB_TIMEOUT,
        ).stdout
    except subprocess.TimeoutExpired:
        raise BoardError(
            f"board {serial}: `adb devices` timed out after {ADB_TIMEOUT:.0f} s; restart the adb "
            "server (`adb kill-server`) and check the cable"
        ) from None
    states = dict(line.split()[:2] for line in listing.splitlines()[1:] if len(line.split()) >= 2)
    if states.get(serial) != "device":
        known = ", ".join(f"{s} ({state})" for s, state in states.items()) or "none"
        raise BoardError(
            f"board {serial} is not attached (adb devices: {known}); check the cable and `adb devices`"
        )


def _field(text: str) -> str | None:
    """A free-text board field as the lock stores it: its first line, printable, bounded (a
    board, or a fake one, can answer megabytes; the lock is reviewed by people)."""
    line = text.strip("\x00\n ").split("\n", 1)[0].split("\x00", 1)[0].strip()
    line = "".join(c if c.isprintable() else "\ufffd" for c in line)
    return line[:MAX_FIELD] or None


def _first_existing(serial: str, paths: tuple[str, ...]) -> str | None:
    for path in paths:
        if shell(serial, f"test -e {path} && echo yes || true").strip() == "yes":
            return path
    return None


def _embedded_version(serial: str, path: str, marker: str) -> str | None:
    # `strings` is missing on many board images; grep -a finds the same bytes
    text = shell(
        serial, f"strings {path} 2>/dev/null | grep -i '{marker}' || grep -ao '{marker}: [^ ]*' {path}"
    )
    return parse_version(text, re.escape(marker) + r":?\s*")


def _sha256(serial: str, path: str) -> str | None:
    match = re.match(r"^([0-9a-f]{64})\b", shell(serial, f"sha256sum {path}").strip())
    return match.group(1) if match else None


def parse_soc(compatible: str) -> str | None:
    """The SoC from a device tree `compatible` list (NUL-separated, most specific first)."""
    entries = [entry.strip() for entry in compatible.replace("\x00", "\n").splitlines() if entry.strip()]
    socs = [m.group(1) for e in entries if (m := re.fullmatch(r"rockchip,((?:rk|rv)\d{4}[a-z]?)", e))]
    return socs[-1] if socs else None


def parse_version(text: str, prefix: str) -> str | None:
    match = re.search(prefix + VERSION, text, re.IGNORECASE)
    return match.group(1) if match else None
