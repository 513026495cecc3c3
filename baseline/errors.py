"""The one exception family users ever see.

Every message names what failed and where (file, key, model) and says how to fix it.
The CLI catches `BaselineError` once and prints `str(error)` as a single line with
exit code 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class BaselineError(Exception):
    """Root of every error baseline raises on purpose."""


class ConfigError(BaselineError):
    """The intent file or the lock is missing, malformed or inconsistent."""


class InputError(BaselineError):
    """A model, fixture or tensor file is unreadable, unsafe or does not match its spec."""


class BackendUnavailable(BaselineError):
    """A backend's dependencies are not installed; the message carries the install hint."""


class EnvironmentBroken(BaselineError):
    """This machine cannot run any model (a damaged toolkit environment): the run stops here
    with one line instead of blaming every model in turn."""
