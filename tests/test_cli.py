"""The ``fidia-jax`` command line: the project registry, the verb protocol, the short forms.

The numbers of each command are tested with its project (``tests/projects/*/test_*``); here: what
the parser lists, where each command is dispatched, and how errors come out.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from fidia_jax import cli
from fidia_jax.projects import PROJECTS, Project


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fidia-jax: error: "), err
    return err[0]


def test_help_lists_projects_without_importing_them():
    code = textwrap.dedent("""
        import sys
        from fidia_jax import cli
        try:
            cli.main(["--help"])
        except SystemExit as e:
            assert e.code == 0, e.code
        print(sorted(m for m in sys.modules if m.startswith("fidia_jax.projects.")))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "COLUMNS": "100"})  # fmt: skip
    *help_lines, imported = res.stdout.strip().splitlines()
    assert imported == "[]"
    for name, project in PROJECTS.items():  # one line each: name and summary
        assert any(line.split() == [name, *project.summary.split()] for line in help_lines), name
    assert {"fidia", "proteinmpnn"} <= set(PROJECTS)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["nope", "train"], "argument PROJECT: invalid choice: 'nope'"),
        (["fidia", "nope"], "argument VERB: invalid choice: 'nope'"),
        (["proteinmpnn", "train"], "argument VERB: invalid choice: 'train'"),
        (["fidia"], "the following arguments are required: VERB"),
        ([], "the following arguments are required: PROJECT"),
    ],
)
def test_bad_project_or_verb_is_a_usage_error(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and needle in capsys.readouterr().err


@pytest.mark.parametrize(
    "short, project, verb, func",
    [
        (["sample", "--out", "o"], "proteinmpnn", "sample", "_sample"),
        (["score", "--fasta", "f"], "proteinmpnn", "score", "_score"),
        (["train"], "fidia", "train", "_train"),
        (["evaluate", "--checkpoint", "c"], "fidia", "evaluate", "_evaluate"),
        (["design", "--checkpoint", "c"], "fidia", "design", "_design"),
        (["demo"], "fidia", "demo", "_demo"),
    ],
)
def test_short_forms_parse_as_the_project_form(short, project, verb, func):
    old = cli._parse_args(short)
    new = cli._parse_args([project, *short])
    assert vars(old) == vars(new)
    assert (old.project, old.verb, old.run.__name__) == (project, verb, func)


def test_train_both_forms_dispatch_the_same_run(monkeypatch, tmp_path):
    from fidia_jax.projects.fidia import commands, get_config

    calls = []
    monkeypatch.setattr(commands, "run_train", lambda *a, **kw: calls.append((a, kw)))
    for prefix in ([], ["fidia"]):
        assert cli.main([*prefix, "train", "--config", "tiny", "--workdir", str(tmp_path)]) == 0
    assert calls[0] == calls[1]
    (config, workdir), kw = calls[0]
    assert config == get_config("tiny") and workdir == str(tmp_path)
    assert kw == {"resume": True, "quiet": False}


def test_demo_runs_fidia_demo(monkeypatch, tmp_path):
    from fidia_jax.projects.fidia import demo

    calls = []
    monkeypatch.setattr(demo, "run_demo", lambda out, **kw: calls.append((out, kw)) or {})
    assert cli.main(["demo", "--out", str(tmp_path / "d"), "--quiet", "--seed", "3"]) == 0
    assert (
        cli.main(["fidia", "demo", "--workdir", str(tmp_path / "d"), "--quiet", "--seed", "3"]) == 0
    )
    for out, kw in calls:
        assert pathlib.Path(out) == tmp_path / "d" and kw == {"seed": 3, "quiet": True}


@pytest.mark.slow
def test_fidia_train_tiny_runs(tmp_path):
    """``fidia-jax fidia train --config tiny --workdir W`` trains for real (about a minute)."""
    assert (
        cli.main(["fidia", "train", "--config", "tiny", "--workdir", str(tmp_path), "--quiet"]) == 0
    )
    assert json.loads((tmp_path / "config.json").read_text())["train"]["num_steps"] == 2
    assert {"metrics.jsonl", "eval_after.json", "checkpoints"} <= {
        p.name for p in tmp_path.iterdir()
    }


# ----------------------------------------------------------------------------- the convention
_TOY_CONFIGS = """
import dataclasses
from fidia_jax import config as config_lib

@dataclasses.dataclass(frozen=True)
class Data:
    data_dir: str | None = None

@dataclasses.dataclass(frozen=True)
class Train:
    steps: int = 100
    lr: float = 1e-3

@dataclasses.dataclass(frozen=True)
class Config:
    seed: int = 0
    data: Data = Data()
    train: Train = Train()

PRESETS = {"tiny": {"train": {"steps": 2}}, "demo": {"train": {"steps": 5}}, "default": {}}

def load_config(name_or_path):
    return config_lib.load_config(Config, PRESETS, name_or_path)

CONFIGS = config_lib.ConfigSet(Config, PRESETS)
get_config = CONFIGS.get_config
"""
_TOY_TRAIN = """
import json, pathlib
from fidia_jax.config import config_to_dict

def {func}(config, workdir):
    path = pathlib.Path(workdir)
    path.mkdir(parents=True, exist_ok=True)
    (path / "{func}.json").write_text(json.dumps(config_to_dict(config)))
"""


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A driver package following the convention (configs.py, train.py; no commands.py)."""
    root = tmp_path_factory.mktemp("toy")
    pkg = root / "cli_toy_project"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A toy driver."""\n')
    (pkg / "configs.py").write_text(_TOY_CONFIGS)
    (pkg / "train.py").write_text(_TOY_TRAIN.format(func="train_and_evaluate"))
    sys.path.insert(0, str(root))
    yield pkg
    sys.path.remove(str(root))
    for name in [m for m in sys.modules if m.startswith("cli_toy_project")]:
        del sys.modules[name]


@pytest.fixture()
def registered(toy, monkeypatch):
    monkeypatch.setitem(PROJECTS, "toy", Project("cli_toy_project", "a toy driver"))
    return toy


def test_convention_train_set_data_dir(registered, tmp_path, capsys):
    argv = [
        "toy",
        "train",
        "--config",
        "tiny",
        "--set",
        "train.lr=1",
        "--set",
        "seed=7",
        "--data-dir",
        "/data",
        "--workdir",
        str(tmp_path),
    ]
    assert cli.main(argv) == 0
    got = json.loads((tmp_path / "train_and_evaluate.json").read_text())
    assert got == {"seed": 7, "data": {"data_dir": "/data"}, "train": {"steps": 2, "lr": 1.0}}


def test_convention_demo_uses_the_demo_preset_and_no_evaluate_without_evaluate_py(
    registered, tmp_path, capsys
):
    assert cli.main(["toy", "demo", "--workdir", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "train_and_evaluate.json").read_text())["train"]["steps"] == 5
    with pytest.raises(SystemExit):
        cli.main(["toy", "--help"])
    verbs = [
        line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("    ")
    ]
    assert verbs == ["train", "demo", "config"]


def test_convention_evaluate_from_evaluate_py(registered, tmp_path):
    (registered / "evaluate.py").write_text(_TOY_TRAIN.format(func="evaluate"))
    try:
        assert cli.main(["toy", "evaluate", "--config", "demo", "--workdir", str(tmp_path)]) == 0
    finally:
        (registered / "evaluate.py").unlink()
    assert json.loads((tmp_path / "evaluate.json").read_text())["train"]["steps"] == 5


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--set", "train.bogus=1"], "override 'train.bogus=1': unknown key 'bogus'"),
        (["--set", 'train.steps="abc"'], "train.steps must be int, got 'abc'"),
        (["--config", "nope"], "'nope' is neither a config preset"),
    ],
)
def test_convention_errors_one_line_exit_2(registered, extra, needle, tmp_path, capsys):
    assert cli.main(["toy", "train", "--workdir", str(tmp_path / "w"), *extra]) == 2
    assert needle in _one_error_line(capsys)
    assert not (tmp_path / "w").exists()


def test_data_dir_is_set_or_noted(capsys):
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Flat:
        data_dir: str | None = None

    @dataclasses.dataclass(frozen=True)
    class NoData:
        seed: int = 0

    assert cli._with_data_dir(Flat(), "/d") == Flat("/d")
    assert capsys.readouterr().err == ""
    assert cli._with_data_dir(NoData(), "/d") == NoData()  # accepted, unchanged, with a note
    assert "note: --data-dir is not used: NoData reads no data directory" in capsys.readouterr().err


# ----------------------------------------------------------------------------- warnings
_NAN_O_PDB = """\
ATOM      1  N   ALA A   1       0.000   0.000   0.000  1.00 20.00           N
ATOM      2  CA  ALA A   1       1.458   0.000   0.000  1.00 20.00           C
ATOM      3  C   ALA A   1       2.009   1.422   0.000  1.00 20.00           C
ATOM      4  O   ALA A   1       2.910   1.743   0.776  1.00 20.00           O
ATOM      5  N   ALA A   2       1.463   2.263  -0.872  1.00 20.00           N
ATOM      6  CA  ALA A   2       1.899   3.650  -0.974  1.00 20.00           C
ATOM      7  C   ALA A   2       1.768   4.370   0.364  1.00 20.00           C
ATOM      8  O   ALA A   2         nan   5.057   0.797  1.00 20.00           O
ATOM      9  N   ALA A   3       0.618   4.205   1.008  1.00 20.00           N
ATOM     10  CA  ALA A   3       0.364   4.838   2.297  1.00 20.00           C
ATOM     11  C   ALA A   3       1.421   4.443   3.323  1.00 20.00           C
ATOM     12  O   ALA A   3       1.958   5.298   4.027  1.00 20.00           O
ATOM     13  N   ALA A   4       1.711   3.149   3.398  1.00 20.00           N
ATOM     14  CA  ALA A   4       2.704   2.639   4.337  1.00 20.00           C
ATOM     15  C   ALA A   4       4.057   3.309   4.126  1.00 20.00           C
ATOM     16  O   ALA A   4       4.696   3.743   5.085  1.00 20.00           O
END
"""


@pytest.mark.filterwarnings("default::UserWarning")
def test_cli_prints_warnings_and_our_log_warnings_as_one_line(monkeypatch, tmp_path, capsys):
    """A parser ``UserWarning`` and a WARNING record of a ``fidia_jax`` logger each come out as
    ``fidia-jax: warning: <message>`` (no ``file.py:line: UserWarning:`` and source line); absl
    INFO/WARNING records are dropped; everything is restored after ``main``."""
    import logging
    import warnings

    from fidia_jax import protein
    from fidia_jax.projects.fidia import demo

    pdb = tmp_path / "nan_o.pdb"
    pdb.write_text(_NAN_O_PDB)

    def fake_demo(out, **kw):
        protein.load_structure(pdb)
        logging.getLogger("fidia_jax.projects.fidia.commands").warning("ours %s", 1)
        logging.getLogger("absl").warning("Metadata file does not exist: /abs/path")
        return {}

    monkeypatch.setattr(demo, "run_demo", fake_demo)
    before = warnings.showwarning
    assert cli.main(["demo", "--quiet"]) == 0
    assert warnings.showwarning is before and logging.getLogger("fidia_jax").propagate
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"fidia-jax: warning: {pdb}: 1 residue(s) with non-finite backbone coordinates get mask 0 "
        "(those atoms are treated as missing and set to 0.0): A2 (O)",
        "fidia-jax: warning: ours 1",
    ], err


@pytest.mark.parametrize(
    "env, want",
    [
        ({"HOME": "/h"}, "/h/.cache/fidia_jax/jax"),
        ({"HOME": "/h", "XDG_CACHE_HOME": "/x"}, "/x/fidia_jax/jax"),
        ({"HOME": "/h", "FIDIA_COMPILATION_CACHE": "/tmp/c"}, "/tmp/c"),
        ({"HOME": "/h", "FIDIA_COMPILATION_CACHE": "off"}, None),
        ({"HOME": "/h", "FIDIA_COMPILATION_CACHE": ""}, None),
        ({"HOME": "/h", "JAX_COMPILATION_CACHE_DIR": "/j"}, None),  # JAX's own setting stays
        ({"HOME": "/h", "JAX_COMPILATION_CACHE_DIR": "/j", "FIDIA_COMPILATION_CACHE": "/f"}, "/f"),
    ],
)
def test_compilation_cache_directory(env, want, monkeypatch):
    monkeypatch.setenv("HOME", env["HOME"])  # expanduser reads HOME
    assert cli._compilation_cache_dir(env) == want


def test_cli_turns_on_the_persistent_cache(monkeypatch, tmp_path):
    import jax

    monkeypatch.setenv("FIDIA_COMPILATION_CACHE", str(tmp_path / "cache"))
    saved = jax.config.jax_compilation_cache_dir
    monkeypatch.setattr(cli, "_parse_args", lambda argv: argparse.Namespace(run=lambda a: None))
    try:
        cli.main([])
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "cache")
    finally:
        jax.config.update("jax_compilation_cache_dir", saved)


def test_cli_cache_keeps_small_programs(tmp_path):
    """Issue 44: programs that compile in well under a second (slices, PRNG seeds, the small
    jitted helpers of every run) are stored too, so a warm CLI process compiles nothing; JAX's
    default threshold (1 s) would skip them."""
    code = (
        "import jax, jax.numpy as jnp\n"
        "from fidia_jax import cli\n"
        "cli._use_compilation_cache()\n"
        "jax.jit(lambda x: x * 2 + 1)(jnp.arange(3.0)).block_until_ready()\n"
    )
    env = {**os.environ, "FIDIA_COMPILATION_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    assert list((tmp_path / "cache").iterdir()), "the tiny program was not cached"


def _library_failure(kind: str, tmp_path: pathlib.Path):
    """A real exception raised inside a library, as a driver would meet it."""
    if kind == "gguf":
        import gguf

        bad = tmp_path / "model.gguf"
        bad.write_bytes(b"not a gguf file at all" * 4)
        gguf.GGUFReader(bad)
    elif kind == "orbax":
        import orbax.checkpoint as ocp

        ocp.StandardCheckpointer().restore(tmp_path / "no_such_checkpoint")
    else:
        _ = 1 / 0  # a bug of ours: never hidden


@pytest.mark.parametrize("kind", ["gguf", "orbax"])
def test_library_errors_are_one_line_exit_2_and_debug_shows_the_traceback(
    kind, monkeypatch, tmp_path, capsys
):
    monkeypatch.delenv("FIDIA_DEBUG", raising=False)
    run = argparse.Namespace(run=lambda args: _library_failure(kind, tmp_path))
    monkeypatch.setattr(cli, "_parse_args", lambda argv: run)
    assert cli.main(["toy", "train"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"fidia-jax: error: {kind}: "), err
    assert "--debug" in lines[0]
    assert cli.main(["toy", "train", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1].startswith(f"fidia-jax: error: {kind}: ")


def test_a_bug_of_ours_is_not_hidden(monkeypatch, tmp_path):
    run = argparse.Namespace(run=lambda args: _library_failure("ours", tmp_path))
    monkeypatch.setattr(cli, "_parse_args", lambda argv: run)
    with pytest.raises(ZeroDivisionError):
        cli.main(["toy", "train"])


# ----------------------------------------------------------------------------- discoverability
def _exit_code(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_version_and_python_dash_m(capsys):
    from fidia_jax import __version__

    code, out, _ = _exit_code(["--version"], capsys)
    assert code == 0 and out.strip() == f"fidia-jax {__version__}"
    run = subprocess.run([sys.executable, "-m", "fidia_jax", "--version"], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert run.stdout.strip() == f"fidia-jax {__version__}"


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["toy", "trian"], "invalid choice: 'trian'"),
        (
            ["toy", "train", "--workdri", "x"],
            "unrecognized arguments: --workdri x (did you mean --workdir?)",
        ),
        (["toy", "train", "--work", "x"], "unrecognized arguments: --work x"),  # no abbreviations
        (
            ["toy", "train", "--conf", "tiny"],
            "unrecognized arguments: --conf tiny (did you mean --config?)",
        ),
    ],
)
def test_a_wrong_flag_shows_the_subcommand_usage_and_a_suggestion(registered, argv, needle, capsys):
    code, _, err = _exit_code(argv, capsys)
    assert code == 2 and needle in err, err
    assert err.startswith(f"usage: fidia-jax toy {argv[1] if argv[1] == 'train' else ''}".rstrip())
    if argv[1] == "trian":
        assert "(did you mean train?)" in err


def test_config_verb_prints_the_resolved_config_and_help_lists_presets_and_keys(registered, capsys):
    assert cli.main(["toy", "config", "--config", "tiny", "--set", "train.lr=0.5"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == {"seed": 0, "data": {"data_dir": None}, "train": {"steps": 2, "lr": 0.5}}
    code, out, _ = _exit_code(["toy", "train", "--help"], capsys)
    assert code == 0 and "presets: default, demo, tiny" in out
    assert "train.steps = 100" in out and "train.lr = 0.001" in out
    assert cli.main(["toy", "config", "--set", "train.lrr=1"]) == 2
    assert "did you mean 'lr'? (valid: lr, steps)" in _one_error_line(capsys)


def test_help_works_without_the_projects_extra(registered, monkeypatch, capsys):
    """On the core install every project's --help lists its verbs and flags and names the extra;
    running a verb still stops with the one-line missing-extra error."""
    monkeypatch.setattr(cli, "missing_extras", lambda name: [("lm", "gguf")])
    code, out, _ = _exit_code(["toy", "--help"], capsys)
    assert code == 0 and "pip install 'fidia_jax[lm]'" in out
    assert {"train", "demo", "config"} <= set(out.split())
    code, out, _ = _exit_code(["toy", "train", "--help"], capsys)
    assert code == 0 and "--config" in out and "presets:" in out
    assert cli.main(["toy", "train"]) == 2
    assert "fidia_jax[lm]" in _one_error_line(capsys)
    # `config` only prints the resolved config: it works before the extra is installed
    assert cli.main(["toy", "config", "--config", "tiny"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["steps"] == 2


def test_a_project_command_of_its_own_is_labelled_in_tiny_mode(monkeypatch, capsys):
    """Every verb run with ``--config tiny`` (a project's own commands, FIDIA's ``train`` among
    them, not only the convention verbs) prints the smoke-test line above its tables."""
    from fidia_jax import train

    monkeypatch.delenv("FIDIA_SMOKE", raising=False)
    monkeypatch.delenv("FIDIA_NOTEBOOK_TINY", raising=False)
    shown = argparse.Namespace(
        config="tiny", run=lambda a: train.print_table("scores", ["m"], [(0.5,)])
    )
    monkeypatch.setattr(cli, "_parse_args", lambda argv: shown)
    assert cli.main([]) == 0
    assert "smoke test (tiny settings)" in capsys.readouterr().out
    assert "FIDIA_SMOKE" not in os.environ


def test_a_closed_pipe_is_not_an_error(monkeypatch):
    """``fidia-jax ... config | head``: the reader leaves early; no traceback, exit code 0."""

    def run(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "_parse_args", lambda argv: argparse.Namespace(run=run))
    saved = os.dup(1)
    try:
        assert cli.main([]) == 0
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def test_a_tiny_run_says_its_tables_are_not_results(registered, monkeypatch, tmp_path, capsys):
    from fidia_jax import train

    monkeypatch.delenv("FIDIA_SMOKE", raising=False)
    monkeypatch.delenv("FIDIA_NOTEBOOK_TINY", raising=False)
    module = __import__("cli_toy_project.train", fromlist=["train_and_evaluate"])
    monkeypatch.setattr(module, "train_and_evaluate",
                        lambda config, workdir: train.print_table("scores", ["m"], [(0.5,)]))  # fmt: skip
    assert cli.main(["toy", "train", "--config", "tiny", "--workdir", str(tmp_path)]) == 0
    assert "smoke test (tiny settings): the numbers below are not results" in (
        capsys.readouterr().out
    )
    assert "FIDIA_SMOKE" not in os.environ  # restored after the run
    assert cli.main(["toy", "train", "--config", "demo", "--workdir", str(tmp_path)]) == 0
    assert "smoke test" not in capsys.readouterr().out


def test_every_command_that_writes_says_where(registered, tmp_path, capsys, monkeypatch):
    """Issue 43: a command ends by naming its output folder (not when quiet, not when nothing
    was written there)."""
    monkeypatch.delenv("FIDIA_QUIET", raising=False)
    out = tmp_path / "w"
    assert cli.main(["toy", "train", "--config", "tiny", "--workdir", str(out)]) == 0
    assert (
        capsys.readouterr().err.strip().splitlines()[-1] == f"fidia-jax toy train: outputs in {out}"
    )
    assert cli.main(["toy", "config"]) == 0  # writes nothing: says nothing about outputs
    assert "outputs in" not in capsys.readouterr().err
