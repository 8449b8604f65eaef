"""``python -m fidia_jax``: the ``fidia-jax`` command line (:mod:`fidia_jax.cli`)."""

import sys

from fidia_jax.cli import main

if __name__ == "__main__":
    sys.exit(main())
