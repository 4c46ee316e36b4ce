"""What every SQL store statement runs through: one SQL text, two dialects.

The stores' SQL is written once, in PostgreSQL's spelling: `%s` placeholders, `{s}.` before
each table (the schema), `{in}` after a column compared with a list of keys, and the upsert
forms SQLite shares (`ON CONFLICT … DO NOTHING | DO UPDATE`). A dialect (store/sql/sqlite.py,
store/sql/postgres.py) translates the text once per statement, owns the connection and the
transaction, and says how a list of keys is bound. Invariant: every statement of a
transaction runs on that transaction's connection; every driver error leaves as a
`StoreError` subclass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, Final

# what `forget` empties of one conversation (besides records, pending, blocks); the tables a
# distributed engine shards by `conv` are listed by the dialect (`CONV_TABLES`)
FORGET_TABLES: Final = ("heads", "snapshots", "equivocations", "remembered", "receipts", "gossip",
                        "pending_checks", "findings", "finding_cites", "turn_line", "turn_targets",
                        "turn_branches", "turn_hidden", "turn_hidden_as_of", "artifact_refs",
                        "block_admitted")
INDEX_INSERTS: Final = (
    "INSERT INTO {s}.turn_line VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
    "INSERT INTO {s}.turn_targets VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
    "INSERT INTO {s}.turn_branches VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
)
ARTIFACT_REFS_INSERT: Final = "INSERT INTO {s}.artifact_refs VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
META_COLS: Final = "cid, conv, actor, seq, wall, counter, parents"
PENDING_COLS: Final = "cid, reason, wall, missing, data"
ORDER_DESC: Final = " ORDER BY wall DESC, counter DESC, actor DESC, cid DESC LIMIT %s"
PAGE: Final = 1000

Batch = tuple[str, list[tuple[Any, ...]]]


class SqlCore:
    """The statement runners and transaction hooks each dialect provides; the logic modules
    (records, quarantine, index, witness, blocks, forget) call only these."""

    # how a per-record byte string is bound (SQLite binds a `bytearray` faster than `bytes`)
    _blob: Callable[[bytes], object] = bytes
    _CAST_DATA: str = "{}"  # the `data` column as read (SQLite casts to BLOB)
    _GREATEST: str = "greatest"  # the two-argument maximum
    _TAIL_CONV: str = "conv"  # `conv` in a walk of the ids after a cursor (not its index)
    _MAX_HLC: str = ""  # the newest (wall, counter) of any conversation, one probe per conversation

    def _data(self, column: str = "data") -> str:
        return self._CAST_DATA.format(column)

    # ------------------------------------------------------------ provided by the dialect

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def reading(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def in_transaction(self) -> bool:
        raise NotImplementedError

    def _q(self, text: str, *args: object, binary: bool = False) -> list[Any]:
        """The rows of one query: inside a transaction on its connection, else on any."""
        raise NotImplementedError

    def _x(self, text: str, *args: object) -> Any:
        """Run one statement inside the open transaction; its cursor."""
        raise NotImplementedError

    def _xm(self, text: str, rows: list[tuple[Any, ...]]) -> None:
        """Run one statement once per row inside the open transaction (nothing for no rows)."""
        raise NotImplementedError

    def _any(self, select: str, keys: Iterable[object], *head: object, text: bool = False) -> list[Any]:
        """The rows of `select`, its `{in}` the list `keys` (after the arguments `head`); none for
        no keys. `text`: the keys are strings, not byte strings."""
        raise NotImplementedError

    def _bumps(self) -> list[Batch]:
        """The statements that move the change token (run by `_bump` or inside a batch)."""
        raise NotImplementedError

    def _announce(self, convs: list[str]) -> list[Batch]:
        """The statements that tell listeners these conversations grew, at commit."""
        raise NotImplementedError

    def _unpend(self, cids: list[tuple[bytes]]) -> list[Batch]:
        """The statements that drop these quarantine entries and their `pending_missing` rows."""
        return [("DELETE FROM {s}.pending WHERE cid = %s", cids),
                ("DELETE FROM {s}.pending_missing WHERE cid = %s", cids)]

    def _batch(self, batches: Iterable[Batch]) -> None:
        for text, rows in batches:
            self._xm(text, rows)

    def _bump(self) -> None:
        self._batch(self._bumps())

    def _after_commit(self, added: int) -> None:
        """Called after each `commit` with the number of records it added."""
