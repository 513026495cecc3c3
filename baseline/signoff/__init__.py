"""Sign-off: what a release pins, what the gates measured, what changed, what is left to do by hand.

`build_signoff` gathers the numbers from a lock, the `Report` of verifying it and, optionally,
the lock it replaces (`records` holds the result, `changes` the comparison with that lock);
`render_signoff_markdown` and `render_signoff_html` (`render`) only render them.
"""

from baseline.signoff.build import build_signoff
from baseline.signoff.changes import lock_changes
from baseline.signoff.records import (
    ConversionRecord,
    GateCheck,
    ModelRecord,
    ReleaseChange,
    Signoff,
)
from baseline.signoff.render import render_signoff_html, render_signoff_markdown

__all__ = [
    "ConversionRecord",
    "GateCheck",
    "ModelRecord",
    "ReleaseChange",
    "Signoff",
    "build_signoff",
    "lock_changes",
    "render_signoff_html",
    "render_signoff_markdown",
]
