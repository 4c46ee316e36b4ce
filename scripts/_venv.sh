# Sourced by scripts/*: create .venv from requirements-dev.lock (the pinned development
# environment; regenerate it with scripts/lock) when absent or stale.
source scripts/_bootstrap.sh
stamp=.venv/.installed-$(cat pyproject.toml requirements-bootstrap.lock requirements-dev.lock | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "== setting up .venv from requirements-dev.lock (first run only)"
  # the project itself is built by the venv's pinned setuptools (--no-build-isolation), so
  # nothing unpinned is fetched for the build either
  if make_venv .venv \
      && venv_pip .venv install --quiet --progress-bar off --require-hashes -r requirements-dev.lock \
      && venv_pip .venv install --quiet --no-deps --no-build-isolation -e . \
      && .venv/bin/python -c "import convgraph, cbrrr, nacl, pytest"; then
    rm -f .venv/.installed-*; touch "$stamp"
  else
    echo "== setting up .venv failed (see above)" >&2
    false
  fi
fi
