"""Mutation testing of the modules that carry convgraph's promises (run through `scripts/mutate`).

Each module is mutated by mutmut in a work folder of its own, `.mutation/<module>/`, against
only the tests that concern it (`MODULES`); mutmut then runs, for each mutant, just the
tests that call the mutated function. A surviving mutant is either a test still to write or
an equivalent mutant listed, with the reason, in `tests/mutation_equivalents.toml`. Kill
rate = killed / (mutants - equivalent). Results stay in the work folder until the next run
of that module, so `--report` prints the table of every module run so far without rerunning
(judging survivors against the equivalents as listed now).

    scripts/mutate                      every module, in MODULES order
    scripts/mutate sync/auth.py core  one module, or a whole package
    scripts/mutate --report             the table and survivors of the last runs (markdown)
    MUTATE_JOBS=1 scripts/mutate ...    mutmut's worker processes (default 2)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
EQUIVALENTS = ROOT / "tests" / "mutation_equivalents.toml"
MUTMUT = Path(sys.executable).parent / "mutmut"

_CORE = ("tests/core/test_record.py", "tests/core/test_vectors.py")
_AUTHORITY = ("tests/projections/test_authority.py", "tests/projections/test_authority_orders.py",
              "tests/projections/test_authority_vectors.py", "tests/replica/test_authority.py")
# module (under src/convgraph) -> the test files that concern it; the modules other
# branches leave alone come first, so a partial run covers them
MODULES: dict[str, tuple[str, ...]] = {
    "core/record.py": (*_CORE, "tests/core/test_validation.py"),
    "core/validation.py": ("tests/core/test_validation.py",),
    "core/kinds.py": ("tests/core/test_kinds.py", *_CORE),
    "core/cid.py": ("tests/core/test_cid.py", *_CORE),
    "core/hlc.py": ("tests/core/test_hlc.py",),
    "core/keys.py": ("tests/core/test_keys.py", *_CORE),
    "server/access.py": ("tests/server/test_access.py",),
    "sync/reconcile.py": ("tests/sync/test_reconcile.py", "tests/sync/test_protocol.py",
                          "tests/sync/test_compacted.py"),  # bases and adoption
    "projections/repair.py": ("tests/projections/test_repair.py", "tests/projections/test_resume.py"),
    "sync/auth.py": ("tests/sync/test_auth.py",),
    # sync/wire.py until issue 29 split it into its messages, encoder and decoder
    "sync/encoder.py": ("tests/sync/test_wire.py", "tests/sync/test_protocol.py"),
    "sync/decoder.py": ("tests/sync/test_wire.py", "tests/sync/test_protocol.py"),
    "core/codec.py": ("tests/core/test_codec.py", *_CORE),
    "replica/ingest.py": ("tests/replica/test_ingest.py", "tests/replica/test_adoption.py"),  # adoption runs through plan_ingest
    # the report part: pushes over a live server, over a local pair, and releases after a base
    "sync/fates.py": ("tests/sync/test_fates.py", "tests/sync/test_local.py", "tests/sync/test_compacted.py"),
    # checked directly, then travelling by sync and in CAR files (compaction_of, role, cover_checkpoint)
    "replica/adoption.py": ("tests/replica/test_adoption.py", "tests/sync/test_compacted.py", "tests/sync/test_car.py"),
    # the root of trust: the id derivation and the root rules, directly and through the vectors
    "core/rooted.py": ("tests/core/test_rooted.py", "tests/core/test_vectors.py"),
    # the authority projection (issue 10), each part against the same four suites: the attacks
    # of docs/authority.md §1 one by one, every delivery order, the vectors, a replica's doors
    "projections/ancestry.py": ("tests/projections/test_ancestry.py", *_AUTHORITY),
    "projections/authority/judge.py": _AUTHORITY,
    "projections/authority/answers.py": _AUTHORITY,
    "projections/authority/rules.py": _AUTHORITY,
    "projections/authority/needs.py": _AUTHORITY,
    "projections/authority/state.py": _AUTHORITY,
    # witnessed history (issue 11): the pure core, directly, through the vectors and through the
    # replica-level checks that stand on it
    "integrity/statement.py": (
        "tests/integrity/test_statement.py", "tests/integrity/test_integrity_vectors.py",
        "tests/integrity/test_evidence.py", "tests/sync/test_statements.py",
    ),
    "integrity/consistency.py": ("tests/integrity/test_consistency.py", "tests/integrity/test_evidence.py"),
    "integrity/remembered.py": ("tests/integrity/test_remembered.py", "tests/replica/test_witnessing.py"),
    "integrity/evidence.py": ("tests/integrity/test_evidence.py", "tests/integrity/test_integrity_vectors.py",
                              "tests/replica/test_checkpointing.py"),
    "integrity/note.py": ("tests/integrity/test_note.py",),
    "integrity/checkpoints.py": ("tests/integrity/test_checkpoints.py", "tests/replica/test_checkpointing.py"),
    "projections/validity.py": ("tests/projections/test_validity.py", "tests/projections/test_resume.py"),
    # artifacts (issue 14, docs/format.md §17/§18): the pure modules, directly, through the
    # vectors, and through the replica that stores and checks them
    "artifacts/blocks.py": ("tests/artifacts/test_blocks.py", "tests/artifacts/test_artifact_vectors.py",
                            "tests/artifacts/test_put_get.py", "tests/replica/test_artifacts.py"),
    "artifacts/diff.py": ("tests/artifacts/test_diff.py",),
    "artifacts/claims.py": ("tests/artifacts/test_claims.py", "tests/integrity/test_artifact_evidence.py"),
}
KILLED = {"killed", "timeout", "segfault"}


def _slug(module: str) -> str:
    return module.removesuffix(".py").replace("/", "-")


def _select(names: list[str]) -> list[str]:
    """MODULES keys for command-line names: `core/record.py`, `core/record`, or a package `core`."""
    chosen: list[str] = []
    for name in names:
        bare = name.removeprefix("src/").removeprefix("convgraph/").rstrip("/")
        found = [m for m in MODULES if bare in (m, m.removesuffix(".py")) or m.startswith(bare + "/")]
        if not found:
            raise SystemExit(f"unknown module {name!r}; known: {', '.join(MODULES)}")
        chosen += [m for m in found if m not in chosen]
    return chosen


def _prepare(module: str) -> Path:
    folder = WORK / _slug(module)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # mutmut copies src/, tests/ (and docs/, which tests read) into mutants/ itself and reads
    # its settings from the pyproject.toml of the folder it runs in: the project's own, plus
    # this module's section
    for name in ("src", "tests", "docs", "README.md"):
        (folder / name).symlink_to(ROOT / name)
    settings = {
        "source_paths": ["src"],
        "also_copy": ["docs", "README.md"],
        "only_mutate": [f"src/convgraph/{module}"],
        "pytest_add_cli_args": ["-p", "no:xdist", "-p", "no:cacheprovider"],
        "pytest_add_cli_args_test_selection": list(MODULES[module]),
    }
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    (folder / "pyproject.toml").write_text(
        (ROOT / "pyproject.toml").read_text() + "\n[tool.mutmut]\n" + "\n".join(lines) + "\n"
    )
    return folder


def _mutmut(folder: Path, *args: str, log: Path | None = None) -> str:
    """mutmut's output; with `log`, streamed there as it runs (its progress line included)."""
    with open(log or os.devnull, "w") as sink:
        out = subprocess.run(
            [str(MUTMUT), *args], cwd=folder, text=True, check=False,
            stdout=sink if log else subprocess.PIPE, stderr=subprocess.STDOUT,
        )
    text = log.read_text() if log else out.stdout
    if out.returncode != 0:
        tail = "\n".join(text.replace("\r", "\n").splitlines()[-30:])
        raise SystemExit(f"mutmut {' '.join(args)} failed in {folder}:\n{tail}")
    return text


def _change(diff: str) -> tuple[str, str]:
    """The removed and the added lines of a mutant's diff, stripped: stable across line shifts."""
    lines = diff.splitlines()
    removed = [x[1:].strip() for x in lines if x.startswith("-") and not x.startswith("---")]
    added = [x[1:].strip() for x in lines if x.startswith("+") and not x.startswith("+++")]
    return "\n".join(removed), "\n".join(added)


def _equivalents() -> list[dict[str, str]]:
    entries: list[dict[str, str]] = tomllib.loads(EQUIVALENTS.read_text()).get("equivalent", [])
    return entries


def _why_equivalent(module: str, name: str, diff: str, known: list[dict[str, str]]) -> str | None:
    function = name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1]
    removed, added = _change(diff)
    for entry in known:
        if [entry[k] for k in ("module", "function", "from", "to")] == [module, function, removed, added]:
            return entry["why"]
    return None


def _collect(module: str, folder: Path, command: str) -> dict[str, Any]:
    statuses = dict(
        line.strip().rsplit(": ", 1)
        for line in _mutmut(folder, "results", "--all", "true").splitlines()
        if line.startswith("    ")
    )
    known = _equivalents()
    survivors = []
    for name, status in sorted(statuses.items()):
        if status in KILLED:
            continue
        diff = _mutmut(folder, "show", name).partition("\n")[2]
        why = _why_equivalent(module, name, diff, known)
        survivors.append({"name": name, "status": status, "diff": diff, "equivalent": why})
    summary = {
        "module": module,
        "tests": list(MODULES[module]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "mutmut": version("mutmut"),
        "mutants": len(statuses),
        "killed": sum(s in KILLED for s in statuses.values()),
        "equivalent": sum(s["equivalent"] is not None for s in survivors),
        "survivors": survivors,
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _rejudge(summary: dict[str, Any]) -> dict[str, Any]:
    """A stored summary with its survivors judged against the equivalents listed now."""
    known = _equivalents()
    for x in summary["survivors"]:
        x["equivalent"] = _why_equivalent(summary["module"], x["name"], x["diff"], known)
    summary["equivalent"] = sum(x["equivalent"] is not None for x in summary["survivors"])
    return summary


def _rate(s: dict[str, Any]) -> float:
    judged = s["mutants"] - s["equivalent"]
    return 100.0 * s["killed"] / judged if judged else 100.0


def _row(s: dict[str, Any]) -> str:
    survived = s["mutants"] - s["killed"] - s["equivalent"]
    return (f"| {s['module']} | {s['mutants']} | {s['killed']} | {s['equivalent']} | {survived} "
            f"| {_rate(s):.1f}% |")


def _print(summaries: list[dict[str, Any]], *, diffs: bool) -> None:
    print("| module | mutants | killed | equivalent | survived | kill rate (non-equivalent) |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in summaries:
        print(_row(s))
    for s in summaries:
        live = [x for x in s["survivors"] if x["equivalent"] is None]
        if live:
            print(f"\n## {s['module']}: {len(live)} surviving mutant(s)\n")
        for x in live:
            print(f"{x['name']} ({x['status']})")
            if diffs:
                print(re.sub(r"(?m)^", "    ", x["diff"].rstrip()))
    equivalent = [(s["module"], x) for s in summaries for x in s["survivors"] if x["equivalent"]]
    if equivalent and not diffs:
        print("\n## Equivalent mutants\n")
    for module, x in equivalent if not diffs else ():
        removed, added = (" / ".join(part.splitlines()) for part in _change(x["diff"]))
        print(f"* {module} `{x['name'].rsplit('.', 1)[-1]}`: `{removed}` → `{added}`: {x['equivalent']}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="*", help="modules under src/convgraph (default: all of MODULES)")
    parser.add_argument("--report", action="store_true", help="print the last results; run nothing")
    args = parser.parse_args()
    modules = _select(args.modules) if args.modules else list(MODULES)
    if args.report:
        found = [WORK / _slug(m) / "summary.json" for m in modules]
        _print([_rejudge(json.loads(p.read_text())) for p in found if p.exists()], diffs=False)
        return
    jobs = os.environ.get("MUTATE_JOBS", "2")
    summaries = []
    for module in modules:
        folder = _prepare(module)
        print(f"== {module}: mutmut against {' '.join(MODULES[module])}", flush=True)
        command = f"MUTATE_JOBS={jobs} scripts/mutate {module}"
        _mutmut(folder, "run", "--max-children", jobs, log=folder / "mutmut.log")
        summaries.append(_collect(module, folder, command))
        print(_row(summaries[-1]), flush=True)
    _print(summaries, diffs=True)


if __name__ == "__main__":
    main()
