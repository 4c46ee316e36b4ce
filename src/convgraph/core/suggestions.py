"""Every command line convgraph suggests to a person, made in one place (issue 27 §5).

An error, a hint or a note that tells someone what to run builds the command here: a
`Suggestion` is a template whose `{fields}` are filled with shell-quoted values when the
situation is known, and whose upper-case words (FILE, TITLE, DIR, BASE, NEW, TEXT, URL,
CONVERSATION, NAME, KEYHEX, TARGET) are for the reader to fill. Invariant: each suggestion,
filled, parses as printed (tests/core/test_suggestions.py runs every one), and no other module
spells a `convgraph …` command.
"""

from __future__ import annotations

import shlex
import string
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Suggestion:
    """One command line to suggest; `str(s)` is the template, `s(field=value, …)` a filled one."""

    template: str

    @property
    def fields(self) -> tuple[str, ...]:
        """The names the template takes, in order."""
        return tuple(f for _, f, _, _ in string.Formatter().parse(self.template) if f)

    def __call__(self, **values: object) -> str:
        return self.template.format(**{k: shlex.quote(str(v)) for k, v in values.items()})

    def __str__(self) -> str:
        return self.template


INIT: Final = Suggestion("convgraph init --home {home}")
INIT_HERE: Final = Suggestion("convgraph init")
INIT_NEW_KEY: Final = Suggestion("convgraph init --home {home} --new-key")
MIGRATE: Final = Suggestion("convgraph migrate {conv}")
WHY: Final = Suggestion("convgraph why {actor} {capability} --conv {conv}")
GRANT_DEVICE: Final = Suggestion("convgraph grant {actor} read write --conv {conv}")
CONVERSATIONS: Final = Suggestion("convgraph conversations")
NEW: Final = Suggestion("convgraph new TITLE")
LOG: Final = Suggestion("convgraph log")
LOG_CONV: Final = Suggestion("convgraph log --conv {conv}")
SAY_ATTACH: Final = Suggestion("convgraph say --attach FILE TEXT")
REDIFF: Final = Suggestion("convgraph cat BASE > old && diff -u old NEW | convgraph patch --base BASE -")
FINDINGS_SAVE: Final = Suggestion("convgraph findings --save DIR")
CHECKPOINT: Final = Suggestion("convgraph checkpoint")
CHECKPOINT_COMPACT: Final = Suggestion("convgraph checkpoint --compact")
CHECKPOINT_STATUS: Final = Suggestion("convgraph checkpoint status {cid}")
WITNESS_ADD: Final = Suggestion("convgraph witness add {name} {key} URL")
SERVE_SPOOL: Final = Suggestion("convgraph serve --spool {root}")
SERVE_WITNESS: Final = Suggestion("convgraph serve --witness")
SYNC_NEW_KEY: Final = Suggestion("convgraph sync {url} --accept-new-key")
VIEW: Final = Suggestion("convgraph view")
DEVICE_ADD: Final = Suggestion("convgraph device add")
SERVE_ALLOW: Final = Suggestion("convgraph serve --allow {rule}")  # more rules: ` --allow RULE` each
SERVE_ALLOW_ANY: Final = Suggestion("convgraph serve --allow {actor}=CONVERSATION")
GRANT: Final = Suggestion("convgraph grant {actor} {capability} --conv {conv}")
FINDINGS: Final = Suggestion("convgraph findings")
WITNESS_ADD_ANY: Final = Suggestion("convgraph witness add NAME KEYHEX URL")
SYNC: Final = Suggestion("convgraph sync TARGET")
DEMO_KEEP: Final = Suggestion("convgraph demo --dir DIR")
TRANSCRIPT: Final = Suggestion("convgraph transcript --conv {conv}")
LOG_HOME: Final = Suggestion("convgraph --home {home} log --conv {conv}")

ALL: Final = {name: value for name, value in sorted(globals().items()) if isinstance(value, Suggestion)}
"""Every suggestion by its name here, for the tests that run them all."""
