"""Batches that allocate many short-lived objects run with Python's cyclic collector paused.

A verified batch builds tens of thousands of container objects (decoded maps, records, plan
entries) that live until the batch lands and are then freed by reference counting. While they
live, each 700 allocations start a collection, and the survivors they pile up make the
collector trace the whole heap again and again: 5-20% of ingest's time, growing with what the
process holds (bench/profile_ingest.py shows it as "in gc"). Mercurial's `util.nogc` pauses the
collector around the same kind of work. Invariant: the collector is left as it was found, so a
caller that disabled it keeps it disabled, and cycles made meanwhile are collected afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic collector for the block; nested or concurrent pauses only delay it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
