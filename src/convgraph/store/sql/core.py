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

import secrets
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, Final

from convgraph.errors import LockOrderError, StoreBusyError

# what `forget` empties of one conversation besides its records and blocks (`convs` stays: its
# arrivals keep the cursors handed out valid); store/sql/schema.py lists every conversation table
FORGET_TABLES: Final = ("heads", "pending", "pending_missing", "snapshots", "equivocations", "remembered",
                        "receipts", "gossip",
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
TOKEN_BITS: Final = 40  # a conversation's change token: random, so a rolled-back one never recurs

Batch = tuple[str, list[tuple[Any, ...]]]


class ConvRow:
    """A conversation's `convs` row as a writer holds it locked: what its commit updates."""

    __slots__ = ("arrivals", "conv", "key_count", "key_sum", "token")

    def __init__(self, conv: str, arrivals: int, token: int, key_sum: bytes, key_count: int) -> None:
        self.conv, self.arrivals, self.token = conv, int(arrivals), int(token)
        self.key_sum, self.key_count = int.from_bytes(bytes(key_sum), "little"), int(key_count)

    def copy(self) -> ConvRow:
        row = ConvRow(self.conv, self.arrivals, self.token, b"", self.key_count)
        row.key_sum = self.key_sum
        return row

    def params(self) -> tuple[int, int, bytes, int, str]:
        """`UPDATE_CONV`'s parameters."""
        return (self.arrivals, self.token, (self.key_sum % (1 << 256)).to_bytes(32, "little"),
                self.key_count, self.conv)


UPDATE_CONV: Final = ("UPDATE {s}.convs SET arrivals = %s, token = %s, key_sum = %s, key_count = %s"
                      " WHERE conv = %s")


class SqlCore:
    """The statement runners and transaction hooks each dialect provides; the logic modules
    (records, quarantine, index, witness, blocks, forget) call only these."""

    # how a per-record byte string is bound (SQLite binds a `bytearray` faster than `bytes`)
    _blob: Callable[[bytes], object] = bytes
    _CAST_DATA: str = "{}"  # the `data` column as read (SQLite casts to BLOB)
    _GREATEST: str = "greatest"  # the two-argument maximum
    _MAX_HLC: str = ""  # the newest (wall, counter) of any conversation, one probe per conversation
    _FOR_UPDATE: str = ""  # what makes a read of a `convs` row lock it until the transaction ends
    _NOWAIT: str = ""  # what makes that lock fail at once rather than wait

    def _data(self, column: str = "data") -> str:
        return self._CAST_DATA.format(column)

    # ------------------------------------------------------------ provided by the dialect

    def transaction(self, *convs: str) -> AbstractContextManager[None]:
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

    def _moved(self) -> None:
        """Called whenever a change token moves (SQLite counts them for `change_token`)."""

    def _announce(self, convs: list[str]) -> list[Batch]:
        """The statements that tell listeners these conversations grew, at commit."""
        raise NotImplementedError

    def _unpend(self, cids: list[tuple[bytes]]) -> list[Batch]:
        """The statements that drop these quarantine entries and their `pending_missing` rows."""
        return [("DELETE FROM {s}.pending WHERE cid = %s", cids),
                ("DELETE FROM {s}.pending_missing WHERE cid = %s", cids)]  # by its index on cid

    def _batch(self, batches: Iterable[Batch]) -> None:
        for text, rows in batches:
            self._xm(text, rows)

    def _held_rows(self) -> dict[str, ConvRow] | None:
        """The `convs` rows the open transaction holds already (None outside one)."""
        return None

    def _held(self) -> set[str] | None:
        """The conversations whose rows the open transaction locked (None: the dialect has one
        writer at a time and keeps no such locks apart, so it holds every conversation)."""
        rows = self._held_rows()
        return set(rows) if self._NOWAIT and rows is not None else None

    def _held_row(self, conv: str) -> ConvRow | None:
        """`conv`'s row if this thread's open transaction holds it (the dialect makes sure no
        other thread's transaction answers)."""
        kept = self._held_rows()
        return None if kept is None else kept.get(conv)

    def _hold(self, convs: Iterable[str]) -> dict[str, ConvRow]:
        """The `convs` rows of `convs` (made if missing), locked until the transaction ends: what
        serialises the writers of one conversation, and only them. A row is locked and read once
        a transaction (`_lock_rows`): every write of it goes through the `ConvRow` held
        (`_written`), so that one read stays the row's value until the end. Each caller gets
        copies: a row it changes but never writes (a commit refused half-way) leaves no trace."""
        wanted = sorted(set(convs))
        kept = self._held_rows()
        rows = {c: kept[c] for c in wanted if kept is not None and c in kept}
        rows.update(self._lock_rows([c for c in wanted if c not in rows]))
        return {c: rows[c].copy() for c in wanted}

    def _written(self, rows: Iterable[ConvRow]) -> list[tuple[int, int, bytes, int, str]]:
        """`UPDATE_CONV`'s parameters for `rows`, about to be written: the rows the transaction
        holds become these."""
        kept, out = self._held_rows(), []
        for row in rows:
            if kept is not None:
                kept[row.conv] = row.copy()
            out.append(row.params())
        return out

    def _lock_rows(self, convs: Iterable[str]) -> dict[str, ConvRow]:
        """Lock the rows of `convs` that this transaction does not hold yet, in sorted order;
        their rows. Where rows are locked apart (`_NOWAIT`), one that sorts before a row held
        already is taken only if free at once (`LockOrderError` else): a writer waits only for
        locks above every lock it holds, so no two writers ever wait for each other."""
        kept, wanted = self._held_rows(), sorted(set(convs))
        out: dict[str, ConvRow] = {}
        for conv in wanted:
            if kept is not None and conv in kept:
                out[conv] = kept[conv]
                continue
            late = bool(self._NOWAIT) and bool(kept) and conv < max(kept or ())
            try:
                row = self._lock_row(conv, late=late)
            except StoreBusyError as exc:
                if not late:
                    raise
                needed = tuple(sorted({*(kept or ()), *wanted}))
                raise LockOrderError(f"the lock of conversation {conv!r} was needed out of order and "
                                     "another writer held it", convs=needed) from exc
            out[conv] = row
            if kept is not None:
                kept[conv] = row
        return out

    def _lock_row(self, conv: str, *, late: bool) -> ConvRow:
        """Make `conv`'s row if missing and lock it; `late`: fail at once if another holds it."""
        self._x("INSERT INTO {s}.convs VALUES (%s, 0, 0, %s, 0) ON CONFLICT DO NOTHING", conv, bytes(32))
        lock = "SELECT conv, arrivals, token, key_sum, key_count FROM {s}.convs WHERE conv = %s"
        return ConvRow(*self._x(lock + self._FOR_UPDATE + (self._NOWAIT if late else ""), conv).fetchone())

    def _bump(self, *convs: str) -> None:
        """Move the change tokens of `convs` (locking their rows)."""
        rows = self._hold(convs)
        for row in rows.values():
            row.token = secrets.randbits(TOKEN_BITS)
        self._xm(UPDATE_CONV, self._written(rows.values()))
        self._moved()

    def _after_commit(self, added: int) -> None:
        """Called after each `commit` with the number of records it added."""
