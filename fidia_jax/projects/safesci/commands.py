"""Verbs of ``fidia-jax safesci``: ``evaluate`` (one model) and ``demo`` (several models)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_commands"]

_PROG = "fidia-jax"


def _config(args: argparse.Namespace):
    """The config of ``--config`` and ``--set``; then the first line on stderr (at once, before
    the records load), and a note when ``--data-dir`` is given (SafeSci reads one JSONL file,
    ``data_path``, not a data directory)."""
    from fidia_jax.config import override_config
    from fidia_jax.projects.safesci.configs import load_config

    config = load_config(args.config)
    config = override_config(config, args.set) if args.set else config
    print(f"{_PROG} safesci {args.verb}: config {args.config}, workdir {args.workdir}",
          file=sys.stderr, flush=True)  # fmt: skip
    if args.data_dir:
        print(
            f"{_PROG}: note: --data-dir is not used: SafeSci reads one JSONL file "
            "(--set data_path=FILE.jsonl; default: the bundled benign fixture)",
            file=sys.stderr,
        )
    return config


def _evaluate(args: argparse.Namespace):
    from fidia_jax.projects.safesci.evaluate import run_evaluate

    return run_evaluate(_config(args), args.workdir)


def _demo(args: argparse.Namespace):
    from fidia_jax.projects.safesci.evaluate import run_demo

    return run_demo(_config(args), args.workdir)


def add_commands(verbs) -> None:
    """Adds ``evaluate`` and ``demo`` to the project's subparsers."""
    for verb, fn, default, help in (
        (
            "evaluate",
            _evaluate,
            "default",
            "evaluate config.model on config.data_path (report.json, summary.json, a PNG)",
        ),
        ("demo", _demo, "demo",
         "compare config.demo_models on the benign fixture (demo.json, summary.json, a PNG)"),
    ):  # fmt: skip
        p = verbs.add_parser(verb, help=help)
        p.add_argument("--config", default=default,
                       help=f"preset name (tiny/demo/default/official) or .json/.toml file (default: {default})")  # fmt: skip
        p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config value (repeatable), e.g. model=llama, shuffle=unseeded")  # fmt: skip
        p.add_argument("--workdir", default=f"out/safesci/{verb}", help="output directory")
        p.add_argument("--data-dir", default=None,
                       help="accepted for every project; SafeSci reads no data directory (a note)")  # fmt: skip
        p.set_defaults(run=fn)
