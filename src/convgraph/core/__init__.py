"""The pure core: codec, CIDs, keys, clocks, records and their validation. No I/O."""
