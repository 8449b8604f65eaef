"""The command line of a benchmark that is one driver run: preset, overrides, table, JSON.

``run_driver_benchmark(name, driver, table, doc)`` parses ``--smoke`` (the ``tiny`` preset),
``--config NAME``, ``--set key=value ...`` and ``--out PATH``, runs
``driver.train_and_evaluate(config, tmpdir)``, prints ``table(results, config)`` and writes the
results with the config and preset name to ``benchmarks/results/<name>[_smoke].json``, with
the command, date, machine, commit and load average (``benchmarks/_results.py``) and the tables
``tables(results, config)`` gives (``{key: {"columns", "rows", "formats"?}}``, none by default),
which docs pages render (``tools/render_tables.py``).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
from collections.abc import Callable
from types import ModuleType

from fidia_jax.config import config_to_dict, override_config

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import load_average, write_results  # noqa: E402

RESULTS = pathlib.Path(__file__).parent / "results"


def run_driver_benchmark(
    name: str,
    driver: ModuleType,
    table: Callable[[dict, object], str],
    doc: str,
    argv=None,
    *,
    tables: Callable[[dict, object], dict] | None = None,
) -> dict:
    load_start = load_average()
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny preset (seconds)")
    parser.add_argument("--config", default=None, help="preset name (default: default)")
    parser.add_argument("--set", nargs="*", default=[], help="overrides key=value")
    parser.add_argument(
        "--out", default=None, help=f"JSON path (default benchmarks/results/{name}[_smoke].json)"
    )
    args = parser.parse_args(argv)
    preset = args.config or ("tiny" if args.smoke else "default")
    config = override_config(driver.get_config(preset), args.set)
    with tempfile.TemporaryDirectory() as workdir:
        results = driver.train_and_evaluate(config, workdir)
    print(table(results, config))
    out = (
        pathlib.Path(args.out)
        if args.out
        else RESULTS / f"{name}{'_smoke' if args.smoke else ''}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    extra = {**results, "config": config_to_dict(config), "preset": preset}
    write_results(
        out.stem,
        tables(results, config) if tables is not None else {},
        command=None if argv is None else f"python benchmarks/{name}.py {' '.join(argv)}".strip(),
        load_start=load_start,
        extra=extra,
        out=out,
    )
    print(f"wrote {out}")
    return results
