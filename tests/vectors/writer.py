"""The command line every vector generator shares: write the JSON file, or `--check` it."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def render(obj: Any) -> str:
    """The committed text of a vector file: one JSON document, indent 1, UTF-8 as is."""
    return json.dumps(obj, indent=1, ensure_ascii=False) + "\n"


def main(doc: str | None, build: Callable[[], Any], path: Path, generator: str, argv: list[str] | None) -> int:
    """Write `build()` to `path`, or with `--check` exit 1 when the committed file differs."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed file")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        if not path.exists() or path.read_text("utf-8") != text:
            print(f"{path.name} differs from what {generator} produces", file=sys.stderr)
            return 1
        return 0
    path.write_text(text, "utf-8")
    print(f"wrote {path}")
    return 0
