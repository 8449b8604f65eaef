"""Builds the API reference (HTML, pdoc) from the docstrings, warnings as errors.

Usage (from the repository root; `make docs` runs it)::

  python tools/build_api_docs.py [--out site/api]

Every package and module of the public API snapshot (``tests/public_api.json``) is documented,
and every public name of that snapshot must appear in the page of its module: a name missing
from the reference fails the build, as does any warning pdoc raises while it renders (an
annotation that does not resolve, a module that does not import). One pdoc limitation is
allowed and counted: the ``__init__`` that Python synthesises for a ``NamedTuple`` declared in a
module with ``from __future__ import annotations`` carries string annotations that pdoc resolves
in the wrong namespace (``Import of Any failed``); the fields are documented all the same.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: pdoc's warning for a NamedTuple's synthesised ``__init__`` (see the module docstring).
_NAMEDTUPLE_INIT = re.compile(
    r"Error parsing type annotation .* for fidia_jax\.[\w.]+\.__init__\. Import of \w+ failed"
)


def _listed(module: str) -> bool:
    """Whether ``module``'s parent package lists it in ``__all__`` (pdoc then finds it)."""
    import importlib

    parent, _, name = module.rpartition(".")
    return name in getattr(importlib.import_module(parent), "__all__", ())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "site" / "api"))
    args = ap.parse_args(argv)
    import pdoc
    import pdoc.render

    snapshot = json.loads((ROOT / "tests" / "public_api.json").read_text())
    modules = sorted(snapshot)
    pdoc.render.configure(docformat="google", search=True, show_source=False)
    out = pathlib.Path(args.out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # "fidia_jax" brings the submodules that its packages list in __all__; the others (the
        # drivers under projects/, models.proteinmpnn) are named one by one
        specs = ["fidia_jax", *(m for m in modules if m.count(".") >= 2 and not _listed(m))]
        pdoc.pdoc(*specs, output_directory=out)
    ours = [
        w
        for w in caught
        if "fidia_jax" in str(w.message) or w.category.__module__.startswith("pdoc")
    ]
    allowed = [w for w in ours if _NAMEDTUPLE_INIT.search(str(w.message))]
    errors = [f"pdoc: {w.message}" for w in ours if w not in allowed]
    for module, names in snapshot.items():
        page = out.joinpath(*module.split(".")).with_suffix(".html")
        if not page.is_file():
            errors.append(f"{module}: no page written ({page})")
            continue
        html = page.read_text()
        missing = [n for n in names if f'id="{n}"' not in html and f">{n}<" not in html]
        if missing:
            errors.append(f"{module}: public names missing from the reference: {missing}")
    print(
        f"API reference: {len(modules)} modules in {out}; "
        f"{len(allowed)} known NamedTuple __init__ annotation warnings allowed"
    )
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
