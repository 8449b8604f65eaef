"""Runs one command as N JAX processes on this machine: ``python -m fidia_jax.launch``.

Kept so that ``python tools/localhost_multiprocess.py -n 2 --devices 2 -- CMD`` works from a
clone as before; the launcher itself ships with the package (:mod:`fidia_jax.launch`).
"""

import sys

from fidia_jax.launch import main

if __name__ == "__main__":
    sys.exit(main())
