#!/usr/bin/env bash
# The package as a pip user gets it: builds the wheel, checks that LICENSE and NOTICE are inside,
# installs it with no extras into a fresh virtual environment in a temporary directory, and, from
# that directory (no repository on the path), imports fidia_jax.optim, fidia_jax.rl and
# fidia_jax.kernels without flax or any optional package, and checks that a project whose extra
# is missing says which one to install. Run by .ci/run; locally: tools/check_wheel.sh
# (PYTHON=python3.12 tools/check_wheel.sh for another interpreter). Needs PyPI. The notebooks,
# each from its own install cell in a fresh venv, run in tests/test_notebooks.py
# (`make test-integration`).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS

"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$tmp/dist" .
wheel=$(ls "$tmp"/dist/fidia_jax-*.whl)
"$PYTHON" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for want in ("licenses/LICENSE", "licenses/NOTICE", "fidia_jax/protein/data/5PTI.cif.gz",
             "fidia_jax/py.typed", "fidia_jax/__main__.py"):
    assert any(n.endswith(want) for n in names), f"{want} is not in the wheel"
print(f"wheel: {sys.argv[1].rsplit('/', 1)[-1]}, {len(names)} files, LICENSE and NOTICE inside")
PY

"$PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
cd "$tmp"
env -u PYTHONPATH "$tmp/venv/bin/python" - <<'PY'
import sys
import fidia_jax.kernels, fidia_jax.optim, fidia_jax.rl
assert fidia_jax.optim.__file__.startswith(sys.prefix), fidia_jax.optim.__file__
loaded = {m.split(".")[0] for m in sys.modules}
unwanted = loaded & {"flax", "matplotlib", "biotite", "Bio", "sklearn", "pandas", "ott", "PIL"}
assert not unwanted, f"import fidia_jax.optim/rl/kernels loaded {sorted(unwanted)}"
print("core install: fidia_jax.optim, rl and kernels import without flax or any extra")
PY
set +e
msg=$(env -u PYTHONPATH "$tmp/venv/bin/fidia-jax" causal train --config tiny 2>&1)
code=$?
set -e
if [[ $code -ne 2 || $msg != *"pip install 'fidia_jax[sciml]'"* ]]; then
  echo "fidia-jax causal without the sciml extra: exit $code, output: $msg" >&2
  exit 1
fi
echo "missing extra: $msg"
echo "check_wheel: ok in $((SECONDS - start)) s"
