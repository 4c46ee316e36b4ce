"""A package only so that `tests/sync/test_car.py` and `tests/cli/test_car.py` can share a name."""
