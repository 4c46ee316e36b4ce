# Sourced by scripts/*: `make_venv DIR` makes a venv at DIR whose pip, setuptools and wheel are
# the pinned, hash-checked ones of requirements-bootstrap.lock. Which pip the interpreter
# bundles must not matter: pip 23.2.1 (python3.11 -m venv on Debian 12) refuses a hashed lock
# whose packages name a dependency with extras, so the lock is installed by this pip, not that one.
py=${PYTHON:-python3.11}
command -v "$py" >/dev/null 2>&1 || py=python3
make_venv() {
  local dir=$1
  [ -x "$dir/bin/python" ] || "$py" -m venv "$dir" || return 1
  venv_pip "$dir" install --quiet --progress-bar off --require-hashes --no-deps \
    -r requirements-bootstrap.lock
}
venv_pip() {  # DIR ARGS…: that venv's pip, without the warnings this machine's pip configuration adds
  local dir=$1; shift
  "$dir/bin/python" -m pip --disable-pip-version-check "$@" 2>&1 | sed '/is ignored/d; /BuildBackendWarning: Support for .\[tool.setuptools\]. in .pyproject.toml. is still \*beta\*/d; /warnings.warn(msg, _BetaConfiguration)/d'
  return "${PIPESTATUS[0]}"
}
