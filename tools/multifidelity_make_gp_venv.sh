#!/usr/bin/env bash
# Throwaway interpreter for the co-kriging peer of benchmarks/multifidelity.py: emukit + GPy from
# PyPI (emukit 0.5.1, GPy 1.15.0 on 2026-11-30). Never a dependency of fidia_jax.
#   tools/multifidelity_make_gp_venv.sh [/tmp/peer_multifidelity]
set -euo pipefail
dest="${1:-/tmp/peer_multifidelity}"
python3 -m venv "$dest"
"$dest/bin/pip" install -q emukit GPy
"$dest/bin/python" -c "import GPy, emukit; print('GPy', GPy.__version__, 'emukit', emukit.__version__)"
echo "python benchmarks/multifidelity.py --gp-python $dest/bin/python"
