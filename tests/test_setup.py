"""The README's set-up does not depend on the machine: every venv the scripts make gets the
pinned, hash-checked pip, setuptools and wheel of requirements-bootstrap.lock before anything
else, so the pip the interpreter bundles (23.2.1 from `python3.11 -m venv` on Debian 12, which
refuses requirements-dev.lock) never installs the lock; and `apt-get` waits for a held dpkg lock,
within a bound, instead of failing at once.

The venv tests run the real scripts against the package index this machine's pip is set up with,
as a fresh clone's first `scripts/test` does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
BOOTSTRAP = ROOT / "requirements-bootstrap.lock"


def _pins(lock: Path) -> dict[str, str]:
    return {name.lower(): version for name, version in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", lock.read_text(), re.M)}


def _bash(script: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "PYTHON": sys.executable, **env})


def test_the_bootstrap_lock_pins_pip_and_the_build_backend_with_hashes() -> None:
    pins = _pins(BOOTSTRAP)
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    lock_script = (ROOT / "scripts/lock").read_text()
    [pip] = re.findall(r"^BOOTSTRAP_PIP=(\S+)", lock_script, re.M)
    [wheel] = re.findall(r"^BOOTSTRAP_WHEEL=(\S+)", lock_script, re.M)
    assert pins == {"pip": pip, "wheel": wheel, **dict(r.lower().split("==") for r in backend)}
    # every pin carries at least one hash, so --require-hashes accepts the file
    blocks = re.split(r"^(?=[A-Za-z0-9._-]+==)", BOOTSTRAP.read_text(), flags=re.M)[1:]
    assert len(blocks) == len(pins) and all("--hash=sha256:" in b for b in blocks)


@pytest.mark.xdist_group("venv")
def test_a_venv_with_an_old_bundled_pip_gets_the_pinned_one_and_accepts_the_lock(tmp_path: Path) -> None:
    """The failure a fresh machine hit: a venv whose pip is the interpreter's own, then the lock."""
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    # stand in for the interpreter's bundled pip, whatever this one bundles
    old = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          "pip==23.2.1"], capture_output=True, text=True, check=False)
    assert old.returncode == 0, old.stderr
    made = _bash(f"source scripts/_bootstrap.sh && make_venv {venv}")
    assert made.returncode == 0, made.stdout + made.stderr
    installed = subprocess.run([str(venv / "bin/python"), "-c",
                                "import importlib.metadata as m; print(*(m.version(d) for d in ('pip', 'setuptools', 'wheel')))"],
                               capture_output=True, text=True, check=True).stdout.split()
    pins = _pins(BOOTSTRAP)
    assert installed == [pins["pip"], pins["setuptools"], pins["wheel"]]
    # the lock resolves under that pip as it stands, hashes checked (nothing is installed)
    dry = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "--disable-pip-version-check", "--dry-run",
                          "--quiet", "--require-hashes", "-r", str(ROOT / "requirements-dev.lock")],
                         capture_output=True, text=True, check=False, timeout=900)
    assert dry.returncode == 0, dry.stderr


def _apt_stub(tmp_path: Path, locked_for: int) -> Path:
    """An `apt-get` that reports a held lock on its first `locked_for` calls, then succeeds."""
    stub = tmp_path / "apt-get"
    stub.write_text(f"""#!/bin/bash
n=$(cat {tmp_path}/calls 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path}/calls
echo "$@" >> {tmp_path}/args
if [ "$n" -lt {locked_for} ]; then
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2; exit 100
fi
echo installed
""")
    stub.chmod(0o755)
    return stub


def test_apt_waits_for_a_held_lock_and_then_installs(tmp_path: Path) -> None:
    stub = _apt_stub(tmp_path, locked_for=2)
    done = _bash(f"source scripts/_apt.sh && apt_wait {stub} install -y chromium", APT_LOCK_POLL="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "installed\n"
    assert done.stderr.count("waiting for the apt/dpkg lock") == 2
    assert (tmp_path / "calls").read_text() == "3\n"
    # each try also asks apt itself to wait a little for the lock
    assert all(line.endswith("-o DPkg::Lock::Timeout=10") for line in (tmp_path / "args").read_text().splitlines())


def test_apt_gives_up_on_a_lock_held_past_the_bound_and_says_why(tmp_path: Path) -> None:
    stub = _apt_stub(tmp_path, locked_for=1_000)
    done = _bash(f"source scripts/_apt.sh && apt_wait {stub} update", APT_LOCK_POLL="0", APT_LOCK_WAIT="0")
    assert done.returncode == 1
    assert "lock still held after 0 s" in done.stderr and "APT_LOCK_WAIT" in done.stderr
    assert (tmp_path / "calls").read_text() == "1\n"


def test_apt_fails_at_once_on_any_other_error(tmp_path: Path) -> None:
    stub = tmp_path / "apt-get"
    stub.write_text(f"#!/bin/bash\necho x >> {tmp_path}/calls\necho 'E: Unable to locate package chromum' >&2\nexit 100\n")
    stub.chmod(0o755)
    done = _bash(f"source scripts/_apt.sh && apt_wait {stub} install chromum", APT_LOCK_POLL="0")
    assert done.returncode == 1
    assert "Unable to locate package chromum" in done.stderr and "waiting" not in done.stderr
    assert (tmp_path / "calls").read_text() == "x\n"
