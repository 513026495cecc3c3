"""Shared pydantic configuration for every file format baseline reads."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, StringConstraints

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=128)]
"""A model, target or part name: safe in paths, reports and CI logs."""
RelPath = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class Record(BaseModel):
    """A strict record: unknown keys are errors, so a typo in a file never passes silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


RecordT = TypeVar("RecordT", bound=Record)
ModelT = TypeVar("ModelT", bound=BaseModel)


def replaced(record: ModelT, **changes: Any) -> ModelT:
    """`record` with `changes`, validated as if read from a file: an unknown key or a wrong type
    fails here, where `model_copy(update=...)` would keep either silently."""
    fields = type(record).model_fields
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {unknown[0]!r}")
    current = {name: getattr(record, name) for name in fields if name in record.model_fields_set}
    return type(record).model_validate({**current, **changes})


def merge_set_fields(base: RecordT, override: Record | None) -> RecordT:
    """`base` updated with only the fields the user wrote in `override`, nested records merged.

    This is how `[defaults]` and per-output tolerances compose: a model that sets only
    `drift.rtol` keeps every other default.
    """
    if override is None:
        return base
    updates: dict[str, Any] = {}
    for field in override.model_fields_set:
        value = getattr(override, field)
        current = getattr(base, field, None)
        if isinstance(value, Record) and isinstance(current, Record):
            value = merge_set_fields(current, value)
        updates[field] = value
    return base.model_copy(update=updates)
