"""What to do next, for the errors a person at the command line meets most.

An error says what was wrong; a hint, printed under it, says what to try. Pure: an error
in, a line or None out; a command a hint names comes from `convgraph.core.suggestions`.
"""

from __future__ import annotations

from convgraph.core import suggestions
from convgraph.errors import (
    ArtifactTooLargeError,
    ConvgraphError,
    ForbiddenError,
    PatchApplyError,
    SizeLimitError,
    StoreBusyError,
)


def hint(exc: ConvgraphError) -> str | None:
    """The next step for `exc`, when there is a usual one."""
    if isinstance(exc, SizeLimitError) and exc.message.startswith("record too large"):
        return (f"a record holds at most {exc.limit} bytes (docs/format.md): split the content over several "
                f"turns, or store it as an artifact the turn names: `{suggestions.SAY_ATTACH}`")
    if isinstance(exc, StoreBusyError):
        return "another convgraph process is writing to this replica: try again when it is done"
    if isinstance(exc, ArtifactTooLargeError):
        return "the replica's Config.max_artifact_bytes bounds an artifact (at most 1 GiB): split the file"
    if isinstance(exc, ForbiddenError) and exc.hint:  # the server's: which `--allow` rule would admit it
        return exc.hint
    if isinstance(exc, PatchApplyError):
        return f"make the diff against the base itself: `{suggestions.REDIFF}`"
    return None
