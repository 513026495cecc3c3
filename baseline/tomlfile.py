"""Reading TOML files with errors a person can act on, and validating them with pydantic."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from baseline.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

ModelT = TypeVar("ModelT", bound=BaseModel)


def read_toml(path: Path, what: str, fix: str) -> dict[str, Any]:
    """Parse a TOML file; every failure is a `ConfigError` naming the file and the fix."""
    return parse_toml(read_config_bytes(path, what, fix), path, what, fix)


MAX_CONFIG_BYTES = 64 << 20
"""A lock of thousands of models is a few MB; anything past 64 MiB is not one."""


def read_config_bytes(path: Path, what: str, fix: str) -> bytes:
    """The file's bytes, if it is a regular file of sane size (never a FIFO or `/dev/zero`)."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found; {fix}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected the {what}") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the {what} ({error.strerror})") from None
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"{path}: is a directory, expected the {what}")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: is not a regular file, expected the {what}; {fix}")
        data = stream.read(MAX_CONFIG_BYTES + 1)  # the size may change after fstat
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {what} is larger than {MAX_CONFIG_BYTES} bytes; {fix}")
    return data


def parse_toml(raw: bytes, path: Path | str, what: str, fix: str) -> dict[str, Any]:
    """Parse TOML bytes that came from `path` (a file, or `file@revision`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: {what} is not valid UTF-8 (byte {error.start}); {fix}") from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: {what} is not valid TOML ({error}); {fix}") from None
    except RecursionError:  # `a = [[[[...` 3,000 deep: the parser recurses per level
        raise ConfigError(f"{path}: {what} nests arrays or tables too deeply to read; {fix}") from None


def _printable(part: object) -> str:
    """A key as written, or quoted when it holds newlines or other control characters."""
    text = str(part)
    return text if text.isprintable() else repr(text)


def validate(model: type[ModelT], data: dict[str, Any], path: Path | str, what: str) -> ModelT:
    """Validate `data`; the first problem is reported with its dotted key path."""
    try:
        return model.model_validate(data)
    except RecursionError:
        raise ConfigError(f"{path}: {what} nests values too deeply to validate") from None
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(_printable(part) for part in first["loc"]) or "(top level)"
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        message = " ".join(str(first["msg"]).split())  # one line, whatever the input held
        if first["type"] == "extra_forbidden":
            message = "unknown key"
        raise ConfigError(f"{path}: {what} key {key}: {message}{more}") from None
