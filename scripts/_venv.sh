# Sourced by scripts/*: create .venv with the pinned dependencies when absent or stale.
py=${PYTHON:-python3.11}
command -v "$py" >/dev/null 2>&1 || py=python3
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "== setting up .venv (first run only)"
  [ -x .venv/bin/python ] || "$py" -m venv .venv
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev,bench]' 2>&1 | grep -v "is ignored" || true
  .venv/bin/python -c "import convgraph, cbrrr, nacl, pytest" 
  rm -f .venv/.installed-*; touch "$stamp"
fi
