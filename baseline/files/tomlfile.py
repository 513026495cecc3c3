"""Reading TOML files with errors a person can act on, and validating them with pydantic."""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar, get_args

# tomli rather than the standard library's tomllib (the same parser): its wheels are compiled,
# and a 1,000-model lock (2.5 MB) parses in ~0.18 s instead of ~0.4 s, before any job can start
import tomli
from pydantic import BaseModel, ValidationError

from baseline.errors import ConfigError

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
        data: dict[str, Any] = tomli.loads(text)
        return data
    except tomli.TOMLDecodeError as error:
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
        raise ConfigError(f"{path}: {what} key {_first_problem(model, error)}") from None


def _first_problem(model: type[BaseModel], error: ValidationError) -> str:
    """`<dotted key>: <what is wrong>` for the problem to fix first, on one line."""
    # an unknown key first: a misspelt `model = ...` is also a missing `models`, and the
    # spelling is what to fix
    first = min(error.errors(), key=lambda problem: problem["type"] != "extra_forbidden")
    key = ".".join(_printable(part) for part in first["loc"]) or "(top level)"
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    message = " ".join(str(first["msg"]).split())  # one line, whatever the input held
    if first["type"] == "extra_forbidden":
        known = _known_keys(model, first["loc"][:-1])
        message = "unknown key" + did_you_mean(str(first["loc"][-1]), known)
    return f"{key}: {message}{more}"


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the known name closest to a misspelt `word`, or nothing."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _known_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys a table may hold where `loc` leads: the fields of the record(s) found there.

    A list index, a table's own key (`outputs.<name>`) or a task's `kind` is not a field: the
    walk stays on the records it reached. A union (the task kinds) offers every member's fields.
    """
    records = [model]
    for part in loc:
        owners = [record for record in records if isinstance(part, str) and part in record.model_fields]
        if owners:
            records = [
                nested for owner in owners for nested in _records_in(owner.model_fields[str(part)].annotation)
            ]
    return sorted({name for record in records for name in record.model_fields})


def _records_in(annotation: object) -> list[type[BaseModel]]:
    """The records a field holds, through lists, tables, `| None` and unions."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [record for argument in get_args(annotation) for record in _records_in(argument)]
