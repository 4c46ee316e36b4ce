# Sourced by scripts/*: create .venv from requirements-dev.lock (the pinned development
# environment; regenerate it with scripts/lock) when absent or stale.
py=${PYTHON:-python3.11}
command -v "$py" >/dev/null 2>&1 || py=python3
stamp=.venv/.installed-$(cat pyproject.toml requirements-dev.lock | sha256sum | cut -c1-16)
_venv_pip() {  # pip, without the warnings this machine's pip configuration adds
  .venv/bin/python -m pip --disable-pip-version-check "$@" 2>&1 | sed '/is ignored/d'
  return "${PIPESTATUS[0]}"
}
if [ ! -f "$stamp" ]; then
  echo "== setting up .venv from requirements-dev.lock (first run only)"
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  if _venv_pip install --quiet --progress-bar off --require-hashes -r requirements-dev.lock \
      && _venv_pip install --quiet --no-deps -e . \
      && .venv/bin/python -c "import convgraph, cbrrr, nacl, pytest"; then
    rm -f .venv/.installed-*; touch "$stamp"
  else
    echo "== setting up .venv failed (see above)" >&2
    false
  fi
fi
