"""``fidia-jax`` command line: parses the arguments and dispatches to a project's driver.

::

  fidia-jax <project> <verb> [--config NAME|FILE] [--set a.b=v ...] [--workdir DIR] [--data-dir DIR]
  fidia-jax --help                  # the projects, one line each
  fidia-jax <project> --help        # the project's verbs

Projects come from the registry :data:`fidia_jax.projects.PROJECTS`; only the project named on
the command line is imported, and its verbs are found as :mod:`fidia_jax.projects` describes
(``commands.add_commands`` and the ``configs`` / ``train`` / ``evaluate`` convention). The
commands of earlier releases still run as short forms: ``sample`` and ``score`` are
``proteinmpnn sample|score``; ``train``, ``evaluate``, ``design`` and ``demo`` are
``fidia train|...`` (``make demo`` runs ``fidia-jax demo``).

Every :class:`fidia_jax.errors.FidiaError` becomes one line ``fidia-jax: error: ...`` on stderr
and exit code 2; so does an exception raised inside one of the libraries we read files and
checkpoints with (orbax, haiku, gguf, safetensors, tokenizers, sentencepiece, AlphaFold, biotite,
tensorstore): ``fidia-jax: error: <library>: <type>: <message>``. ``--debug`` (anywhere on the
command line) or ``FIDIA_DEBUG=1`` prints the full traceback before that line. So does a
project whose pip extra is missing (checked before the project is
imported, from :data:`fidia_jax.projects.PROJECT_EXTRAS`): ``fidia-jax: error: ... pip install
'fidia_jax[<extra>]'``; a bad project, verb or option is argparse's usage error (also exit code 2).
While a command runs, a Python warning (``UserWarning`` of the structure parser, a skipped
incomplete checkpoint, ...) and a WARNING record of a ``fidia_jax`` logger are printed as one
line ``fidia-jax: warning: <message>`` on stderr, and the INFO / WARNING log lines of absl
(orbax's checkpoint chatter, with absolute paths) are silenced.

Compiled programs are kept in JAX's persistent compilation cache, so a second run with the same
shapes skips compilation: ``$FIDIA_COMPILATION_CACHE`` if set (``off`` disables it), else
``$XDG_CACHE_HOME/fidia_jax/jax`` (``~/.cache/fidia_jax/jax``); a cache directory set for JAX
itself (``JAX_COMPILATION_CACHE_DIR``) is left as it is. Every program is stored, however short
its compile (JAX's own minimum compile time is lowered to 0 for this cache).
``fidia-jax proteinmpnn sample`` also keeps a start-up cache beside it (the parsed structure, the
weights as arrays and the compiled sampler: ``$FIDIA_MPNN_CACHE``, ``off`` disables it, else
``proteinmpnn/`` inside the compilation cache's directory).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import logging
import os
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence

from fidia_jax.errors import FidiaError, MissingExtraError
from fidia_jax.projects import EXTRAS, PROJECTS, missing_extras

__all__ = ["main"]

_PROG = "fidia-jax"

#: Short forms: first word -> project (``fidia-jax train ...`` = ``fidia-jax fidia train ...``).
_SHORT_FORMS = {
    "sample": "proteinmpnn", "score": "proteinmpnn",
    "train": "fidia", "evaluate": "fidia", "design": "fidia", "demo": "fidia",
}  # fmt: skip


# ----------------------------------------------------------------------------- convention verbs
def _load_config(module: str, args: argparse.Namespace):
    """``configs.load_config(--config)`` + ``--set`` overrides + ``--data-dir``."""
    from fidia_jax.config import override_config

    config = importlib.import_module(f"{module}.configs").load_config(args.config)
    if args.set:
        config = override_config(config, args.set)
    if args.data_dir:
        config = _with_data_dir(config, args.data_dir)
    return config


def _with_data_dir(config, data_dir: str):
    """``config`` with ``data.data_dir`` (or a top-level ``data_dir``) set to ``data_dir``.

    A project whose config reads no data directory (its data are generated or ship with the
    package) accepts the option too: the config is returned unchanged, with a note on stderr.
    """
    data = getattr(config, "data", None)
    if dataclasses.is_dataclass(data) and any(
        f.name == "data_dir" for f in dataclasses.fields(data)
    ):
        return dataclasses.replace(config, data=dataclasses.replace(data, data_dir=data_dir))
    if any(f.name == "data_dir" for f in dataclasses.fields(config)):
        return dataclasses.replace(config, data_dir=data_dir)
    print(
        f"{_PROG}: note: --data-dir is not used: {type(config).__name__} reads no data directory "
        "(its data are generated or ship with the package)",
        file=sys.stderr,
    )
    return config


def _convention_verb(module: str, file: str, function: str):
    def run(args: argparse.Namespace):
        data_dir, args.data_dir = args.data_dir, None
        config = _load_config(module, args)  # a bad config: one error line and nothing else
        from fidia_jax import parallel

        primary = (parallel.launcher_process() or (0, 1))[0] == 0  # only process 0 speaks
        # the first line within seconds of the start: the driver, JAX and the data load longer
        if primary:
            print(f"{_PROG} {args.project} {args.verb}: config {args.config}, "
                  f"workdir {args.workdir}", file=sys.stderr, flush=True)  # fmt: skip
        if data_dir:  # after the first line: a note when the project reads no data directory
            config = _with_data_dir(config, data_dir)
        return getattr(importlib.import_module(f"{module}.{file}"), function)(config, args.workdir)

    return run


def _add_convention_verbs(verbs, name: str, module: str, *, guarded: bool = False) -> None:
    """``train`` / ``evaluate`` / ``demo`` from ``configs.py`` + ``train.py`` / ``evaluate.py``,
    and ``config`` (print the resolved config)."""

    def exists(sub: str) -> bool:
        try:
            return importlib.util.find_spec(f"{module}.{sub}") is not None
        except ModuleNotFoundError:
            return False

    if not exists("configs"):
        return
    listing = _config_listing(module, guarded=guarded)
    entry = None
    for verb, file, function, help in (
        ("train", "train", "train_and_evaluate", "train and evaluate a config in WORKDIR"),
        ("evaluate", "evaluate", "evaluate", "evaluate a config (results in WORKDIR)"),
    ):
        if not exists(file):
            continue
        entry = entry or (file, function)
        if verb not in verbs.choices:
            p = verbs.add_parser(verb, help=help, epilog=listing, formatter_class=_Formatter)
            _add_config_args(p, name, verb, default_config="default")
            p.set_defaults(run=_convention_verb(module, file, function))
    if entry is not None and "demo" not in verbs.choices:
        p = verbs.add_parser("demo", help=f"{entry[0]} the 'demo' preset (a short CPU run)",
                             epilog=listing, formatter_class=_Formatter)  # fmt: skip
        _add_config_args(p, name, "demo", default_config=None)
        p.set_defaults(run=_convention_verb(module, *entry), config="demo")
    if "config" not in verbs.choices:
        p = verbs.add_parser("config", help="print the resolved config as JSON (nothing runs)",
                             epilog=listing, formatter_class=_Formatter)  # fmt: skip
        _add_config_args(p, name, "config", default_config="default", workdir=False)
        p.set_defaults(run=_print_config(module))


def _config_listing(module: str, *, guarded: bool) -> str | None:
    """The presets and the config keys with the defaults of ``default`` (a ``--help`` epilog)."""
    from fidia_jax._io import json_text
    from fidia_jax.config import config_to_dict

    try:
        configs = importlib.import_module(f"{module}.configs")
    except ModuleNotFoundError:
        if guarded:
            return None
        raise
    names = getattr(getattr(configs, "CONFIGS", None), "names", None)
    if names is None:
        return None
    flat: list[str] = []

    def walk(d: dict, prefix: str) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat.append(f"  {prefix}{k} = {json_text(v)}")

    walk(config_to_dict(configs.get_config("default")), "")
    return (f"presets: {', '.join(names)}\n\nconfig keys (--set KEY=VALUE), with the "
            "'default' preset's values:\n" + "\n".join(flat))  # fmt: skip


def _print_config(module: str):
    def run(args: argparse.Namespace):
        from fidia_jax._io import json_text
        from fidia_jax.config import config_to_dict

        data_dir, args.data_dir = args.data_dir, None
        config = _load_config(module, args)
        if data_dir:
            config = _with_data_dir(config, data_dir)
        print(json_text(config_to_dict(config), indent=2))

    return run


def _add_config_args(
    p: argparse.ArgumentParser, project: str, verb: str, default_config, *, workdir: bool = True
) -> None:
    if default_config is not None:
        p.add_argument("--config", default=default_config,
                       help=f"preset name or .json/.toml file (default: {default_config})")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="A.B=VALUE",
                   help="override a config value (repeatable), e.g. train.num_steps=20")  # fmt: skip
    if workdir:
        p.add_argument("--workdir", default=f"out/{project}/{verb}",
                       help="output directory (default: %(default)s, under the current one)")  # fmt: skip
    p.add_argument(
        "--data-dir",
        default=None,
        help="shared data directory (sets data.data_dir; else $FIDIA_DATA_DIR; a note when the "
        "project reads none)",
    )


# ----------------------------------------------------------------------------- parsing
class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's lines; puts each project (verb) and its summary on one line."""

    def __init__(self, prog: str):
        super().__init__(prog, max_help_position=32)

    def add_argument(self, action):
        super().add_argument(action)
        # argparse sizes the help column without the extra indent of subcommand names
        for sub in getattr(action, "_get_subactions", list)():
            width = len(self._format_action_invocation(sub)) + self._current_indent
            self._action_max_length = max(self._action_max_length, width + self._indent_increment)


def _parser(selected: str | None = None, *, help_only: bool = False) -> argparse.ArgumentParser:
    """The parser; only the ``selected`` project is imported to add its verbs. With
    ``help_only`` a project whose extra is missing still lists its verbs and flags (whatever
    can be imported without the extra) and says which extra to install."""
    from fidia_jax import __version__

    short = "\n".join(f"  {_PROG} {k:<9} = {_PROG} {v} {k}" for k, v in _SHORT_FORMS.items())
    parser = _Parser(
        prog=_PROG,
        description="JAX implementations of FIDIA and companion ICML 2026 methods.",
        epilog=f"'{_PROG} PROJECT --help' lists a project's verbs; '{_PROG} PROJECT config' "
        f"prints a resolved config; --debug prints tracebacks.\n\nshort forms:\n{short}",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"{_PROG} {__version__}")
    projects = parser.add_subparsers(dest="project", metavar="PROJECT", required=True,
                                     title="projects", parser_class=_Parser)  # fmt: skip
    for name, project in PROJECTS.items():
        p = projects.add_parser(
            name, help=project.summary, description=project.summary, formatter_class=_Formatter
        )
        if name == selected:
            verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True, title="verbs",
                                     parser_class=_Parser)  # fmt: skip
            missing = missing_extras(name)
            if missing and not help_only:
                _check_extras(name)
            if missing:
                extra, module = missing[0]
                p.description = (
                    f"{project.summary}\n\nnot runnable here: needs the '{extra}' extra "
                    f"({module} is missing): pip install 'fidia_jax[{extra}]'"
                )
            _add_project_verbs(verbs, name, project.module, guarded=bool(missing))
    return parser


def _add_project_verbs(verbs, name: str, module: str, *, guarded: bool) -> None:
    """The project's own commands and the convention verbs; ``guarded``: a module that needs a
    missing extra is skipped (``--help`` on the core install)."""
    try:
        importlib.import_module(module)
        if importlib.util.find_spec(f"{module}.commands") is not None:
            importlib.import_module(f"{module}.commands").add_commands(verbs)
    except ModuleNotFoundError:
        if not guarded:
            raise
    _add_convention_verbs(verbs, name, module, guarded=guarded)


def _check_extras(project: str) -> None:
    """Raises :class:`MissingExtraError` naming the first missing extra of ``project``."""
    missing = missing_extras(project)
    if missing:
        extra, module = missing[0]
        raise MissingExtraError(module, extra, f"'{_PROG} {project}'")


def _missing_extra(e: ModuleNotFoundError) -> MissingExtraError | None:
    """The extra that brings the module ``e`` misses, if one does (the smallest such extra)."""
    top = (e.name or "").split(".")[0]
    extras = sorted((len(mods), extra) for extra, mods in EXTRAS.items() if top in mods)
    return MissingExtraError(top, extras[0][1]) if extras else None


def _parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _SHORT_FORMS:
        argv.insert(0, _SHORT_FORMS[argv[0]])
    selected = argv[0] if argv and argv[0] in PROJECTS else None
    help_only = any(a in ("-h", "--help") for a in argv)
    # `PROJECT config` only prints the resolved config: it works before the extra is installed
    config_only = selected is not None and len(argv) > 1 and argv[1] == "config"
    parser = _parser(selected, help_only=help_only or config_only)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the subcommand's own usage, with the closest options it knows
        sub = _subparser(parser, [a for a in (getattr(args, "project", None),
                                              getattr(args, "verb", None)) if a])  # fmt: skip
        hints = [_did_you_mean(u, _option_strings(sub)) for u in unknown]
        sub.error(f"unrecognized arguments: {' '.join(unknown)}" + "".join(h for h in hints if h))
    return args


def _subparser(parser: argparse.ArgumentParser, path: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of ``path`` (project, verb) below ``parser``, as deep as it exists."""
    for name in path:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or name not in actions[0].choices:
            break
        parser = actions[0].choices[name]
    return parser


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions for o in a.option_strings]


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``" (did you mean --x?)"`` for the closest of ``choices``, or ``""``."""
    import difflib

    close = difflib.get_close_matches(word.split("=")[0], list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class _Parser(argparse.ArgumentParser):
    """argparse with abbreviations off and a "did you mean" on a bad choice."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D102 - argparse's hook
        import re

        bad = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if bad:
            message += _did_you_mean(bad.group(1), re.findall(r"'([^']*)'", bad.group(2)))
        super().error(message)


def _one_line(message) -> str:
    return " ".join(str(message).split())


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` of the CLI: ``fidia-jax: warning: <message>`` (one line)."""
    print(f"{_PROG}: warning: {_one_line(message)}", file=sys.stderr if file is None else file)


class _WarningLines(logging.Handler):
    """WARNING records of the ``fidia_jax`` loggers as ``fidia-jax: warning: <message>``."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"{_PROG}: warning: {_one_line(record.getMessage())}", file=sys.stderr)
        except Exception:  # pragma: no cover - logging must never raise
            self.handleError(record)


@contextlib.contextmanager
def _cli_output() -> Iterator[None]:
    """Warnings as one line each, absl/orbax log noise off; restored afterwards."""
    ours, absl = logging.getLogger("fidia_jax"), logging.getLogger("absl")
    saved = (warnings.showwarning, ours.propagate, absl.level)
    handler = _WarningLines(logging.WARNING)
    warnings.showwarning = _show_warning
    ours.addHandler(handler)
    ours.propagate = False
    absl.setLevel(logging.ERROR)
    try:
        yield
    finally:
        ours.removeHandler(handler)
        warnings.showwarning, ours.propagate, _ = saved
        absl.setLevel(saved[2])


def _compilation_cache_dir(environ: dict | None = None) -> str | None:
    """The persistent compilation cache directory of a CLI run, or ``None`` (no cache set here).

    ``FIDIA_COMPILATION_CACHE`` (``off`` / ``0`` / ``none`` / empty: disabled), else ``None``
    when ``JAX_COMPILATION_CACHE_DIR`` is set (JAX reads it itself), else
    ``$XDG_CACHE_HOME/fidia_jax/jax`` or ``~/.cache/fidia_jax/jax``.
    """
    env = os.environ if environ is None else environ
    mine = env.get("FIDIA_COMPILATION_CACHE")
    if mine is not None:
        return None if mine.strip().lower() in ("", "0", "off", "none", "false") else mine
    if env.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fidia_jax", "jax")


def _use_compilation_cache() -> None:
    path = _compilation_cache_dir()
    if path is None:
        return
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


#: Libraries whose exceptions reach the user as one error line (top-level module names).
_LIBRARIES = ("orbax", "haiku", "gguf", "safetensors", "tokenizers", "sentencepiece",
              "alphafold", "biotite", "tensorstore")  # fmt: skip


def _library_of(e: BaseException) -> str | None:
    """The library of :data:`_LIBRARIES` that raised ``e`` (its class's module, or the innermost
    frame of its traceback that lies in one of them), else ``None``."""
    top = type(e).__module__.split(".")[0]
    if top in _LIBRARIES:
        return top
    tb, found = e.__traceback__, None
    while tb is not None:
        name = str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0]
        if name in _LIBRARIES:
            found = name
        tb = tb.tb_next
    return found


def _say_where_outputs_are(args: argparse.Namespace) -> None:
    """Every command that wrote files ends by saying where (process 0 only, not when quiet)."""
    from fidia_jax import parallel

    out = getattr(args, "workdir", None) or getattr(args, "out", None)
    if out is None or getattr(args, "quiet", False) or os.environ.get("FIDIA_QUIET", "0") != "0":
        return
    if (parallel.launcher_process() or (0, 1))[0] != 0 or not os.path.exists(out):
        return
    print(f"{_PROG} {args.project} {getattr(args, 'verb', '')}: outputs in {out}", file=sys.stderr)


def _take_debug(argv: Sequence[str] | None) -> tuple[list[str], bool]:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("FIDIA_DEBUG", "") not in ("", "0")
    return [a for a in argv if a != "--debug"], debug


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fidia-jax``; returns the exit code (0 ok, 2 on a user error: a
    FidiaError, a missing extra, or an exception of a file/checkpoint library)."""
    argv, debug = _take_debug(argv)
    try:
        args = _parse_args(argv)
        _use_compilation_cache()
        # a tiny run's tables (every project's, its own commands too) say that their numbers
        # are not results
        smoke = getattr(args, "config", None) == "tiny" and "FIDIA_SMOKE" not in os.environ
        if smoke:
            os.environ["FIDIA_SMOKE"] = "1"
        try:
            with _cli_output():
                args.run(args)
        finally:
            if smoke:
                os.environ.pop("FIDIA_SMOKE", None)
        _say_where_outputs_are(args)
    except BrokenPipeError:  # `fidia-jax ... | head`: the reader left; not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except FidiaError as e:
        if debug:
            traceback.print_exc()
        print(f"{_PROG}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:  # an optional module imported without needs_extra
        if (missing := _missing_extra(e)) is None:
            raise
        print(f"{_PROG}: error: {_one_line(missing)}", file=sys.stderr)
        return 2
    except Exception as e:
        if (library := _library_of(e)) is None:
            raise
        if debug:
            traceback.print_exc()
        hint = "" if debug else " (--debug prints the traceback)"
        print(f"{_PROG}: error: {library}: {type(e).__name__}: {_one_line(e)}{hint}",
              file=sys.stderr)  # fmt: skip
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
