"""Every benchmark script in bench/ runs, in its quickest mode, so that none can rot unseen.

`QUICK` names each script's quickest arguments (seconds, not minutes; their figures mean
nothing): a new script in bench/ fails here until it has an entry. `{json}` and `{tmp}` stand
for a JSON file and a scratch folder of the test's own, so a run never rewrites the committed
bench/results-*.json nor caches into bench/out/. Each run has a TMPDIR of its own, which it
must leave empty (every scratch store, server home and snapshot of src/ removed), and must
leave bench/ as it found it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
QUICK: dict[str, tuple[str, ...]] = {
    "agents_session.py": ("--quick",),
    "append.py": ("--smoke", "--json", "{json}", "--tmp", "{tmp}"),
    "artifacts.py": ("--size-mib", "1", "--runs", "1", "--json", "{json}", "--tmp", "{tmp}"),
    "authority.py": ("--smoke", "--json", "{json}"),
    "compaction.py": ("--quick", "--out", "{json}"),
    "deletion.py": ("--quick", "--out", "{json}"),
    "hol.py": ("--smoke", "--json", "{json}"),
    "hol_alone.py": ("--records", "150", "--part", "50"),
    "http_path.py": ("-n", "50", "--repeat", "1"),
    "import_thread.py": ("--quick", "--json", "{json}"),
    "instructions.py": ("--smoke",),  # without valgrind: under it, each child takes minutes
    "langgraph_cold.py": ("--quick", "--cache", "{tmp}", "--json", "{json}"),
    "load.py": ("--clients", "4", "--seconds", "2", "--json", "{json}"),
    "profile_ingest.py": ("-n", "200", "--repeat", "1"),
    "profile_sync_server.py": ("--clients", "3", "--rounds", "2", "--no-profile"),
    "resume.py": ("--smoke", "--json", "{json}", "--tmp", "{tmp}"),
    "resume_warm.py": ("--steps", "100", "--rounds", "1", "--calls", "5", "--json", "{json}"),
    "session_window.py": ("40",),
    "startup.py": ("--quick", "--cache", "{tmp}", "--json", "{json}"),
    "sync.py": ("--smoke", "--cache", "{tmp}", "--json", "{json}", "--tmp", "{tmp}"),
    "sync_exchanges.py": ("--clients", "3", "--rounds", "2"),
    "sync_artifacts.py": ("--records", "20", "--artifacts", "3", "--json", "{json}"),
    "sync_idle.py": ("--sizes", "50,200", "--repeat", "3", "--json", "{json}", "--tmp", "{tmp}"),
    "system_prompt.py": ("200",),
    "thread_search.py": ("--quick", "--runs", "1", "--cache", "{tmp}", "--json", "{json}"),
    "views.py": ("--smoke", "--json", "{json}"),
    "write_latency.py": ("--quick", "--citus", "", "--json", "{json}"),  # plain PostgreSQL only
    "witness.py": ("--base", "50", "--step", "50", "--runs", "1", "--tmp", "{tmp}"),
}


# more modes of scripts QUICK runs already: `{pg}` is the test PostgreSQL, and `src` stands in
# for a baseline checkout's src/ (the same code: what is tested is that both sides run)
MODES: dict[str, tuple[str, tuple[str, ...]]] = {
    "sync-idle": ("sync.py", ("--idle", "--sizes", "50,200", "--repeat", "3", "--baseline-src", "src",
                              "--baseline-repeat", "2", "--json", "{json}", "--tmp", "{tmp}")),
    "load-both": ("load.py", ("--clients", "3", "--seconds", "2", "--both", "--db", "{pg}", "--baseline-src",
                              "src", "--json", "{json}")),
    "load-instances": ("load.py", ("--clients", "3", "--seconds", "2", "--instances", "1,2", "--db", "{pg}",
                                   "--json", "{json}")),  # plain PostgreSQL only: Citus is not on every machine
}


def scripts() -> list[str]:
    """The scripts in bench/ (`_common.py` and its like are imported by them, never run)."""
    return sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def _bench_files() -> dict[str, tuple[int, int]]:
    """Size and mtime of every file under bench/ but the bytecode caches."""
    return {str(p.relative_to(BENCH)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in BENCH.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_every_quick_mode_names_a_script_there_is() -> None:
    assert sorted(QUICK) == scripts()


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("script", scripts())
def test_the_bench_script_runs_in_its_quickest_mode(script: str, tmp_path: Path) -> None:
    assert script in QUICK, f"bench/{script} has no quick mode: add its quickest arguments to QUICK"
    _runs(script, QUICK[script], tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_other_modes_run_at_tiny_sizes(mode: str, tmp_path: Path) -> None:
    script, args = MODES[mode]
    _runs(script, args, tmp_path)


def _runs(script: str, quick: tuple[str, ...], tmp_path: Path) -> None:
    import pg

    out, scratch, temp = tmp_path / "figures.json", tmp_path / "scratch", tmp_path / "tmp"
    scratch.mkdir()
    temp.mkdir()
    dsn = pg.dsn() if "{pg}" in quick else ""
    args = [a.replace("{json}", str(out)).replace("{tmp}", str(scratch)).replace("{pg}", dsn) for a in quick]
    before = _bench_files()
    env = {**os.environ, "TMPDIR": str(temp), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=BENCH.parent, env=env,
                          capture_output=True, text=True, timeout=840, check=False)
    assert done.returncode == 0, f"bench/{script} {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if "{json}" in quick:
        assert json.loads(out.read_text()), f"bench/{script} wrote no figures"
    assert sorted(p.name for p in temp.iterdir()) == [], f"bench/{script} left temporary files behind"
    assert _bench_files() == before, f"bench/{script} changed files under bench/"
