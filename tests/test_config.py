"""fidia_jax.config: typed presets, JSON/TOML files with ``base``, ``--set`` overrides."""

from __future__ import annotations

import dataclasses
import doctest
import json

import pytest

from fidia_jax import config
from fidia_jax.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Train:
    num_steps: int = 100
    lr: float = 1e-3
    ns: tuple[int, ...] = (1, 4)
    checkpoint: str = "v_48_020"
    resume: bool = True
    data_dir: str | None = None


@dataclasses.dataclass(frozen=True)
class Run:
    seed: int = 0
    train: Train = Train()

    def __post_init__(self):
        if self.train.num_steps < 0:
            raise ConfigError(f"train.num_steps must be >= 0, got {self.train.num_steps}")


PRESETS = {"tiny": {"train": {"num_steps": 2, "ns": (1,)}}, "default": {}}


def test_docstring_example_runs():
    assert doctest.testmod(config, raise_on_error=True).attempted > 0


def test_presets_and_round_trip():
    tiny = config.get_config(Run, PRESETS, "tiny")
    assert tiny == Run(train=Train(num_steps=2, ns=(1,)))
    assert config.get_config(Run, PRESETS) == Run()
    assert config.get_config(Run, PRESETS, "tiny", seed=3).seed == 3
    as_dict = config.config_to_dict(tiny)
    assert as_dict["train"]["ns"] == [1]  # JSON-ready: tuples become lists
    assert config.config_from_dict(Run, PRESETS, {"base": "tiny", **as_dict}) == tiny
    with pytest.raises(ConfigError, match=r"unknown config 'big'; presets: \['default', 'tiny'\]"):
        config.get_config(Run, PRESETS, "big")


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"train": {"bogus": 1}}, "unknown config key(s) ['bogus'] in train"),
        ({"bogus": 1}, "unknown config key(s) ['bogus'] in config"),
        ({"train": 3}, "train must be a table/object"),
        ({"train": {"num_steps": "abc"}}, "train.num_steps must be int, got 'abc' (str)"),
        ({"train": {"num_steps": 2.5}}, "train.num_steps must be int, got 2.5"),
        ({"train": {"num_steps": True}}, "train.num_steps must be int, got True (bool)"),
        ({"train": {"resume": 1}}, "train.resume must be bool"),
        ({"train": {"lr": "fast"}}, "train.lr must be float"),
        ({"train": {"ns": "1,4"}}, "train.ns must be a list"),
        ({"train": {"ns": [1, "x"]}}, "train.ns[1] must be int"),
        ({"train": {"data_dir": 5}}, "train.data_dir must be str | None"),
        ({"train": {"num_steps": -1}}, "train.num_steps must be >= 0"),  # __post_init__
        ({"base": "nope"}, "unknown base config 'nope'"),
    ],
)
def test_bad_keys_and_values_are_named(values, needle):
    with pytest.raises(ConfigError) as exc:
        config.config_from_dict(Run, PRESETS, values)
    assert needle in str(exc.value)


def test_override_values_are_typed():
    base = config.get_config(Run, PRESETS, "tiny")
    got = config.override_config(base, ["train.lr=1", "seed=4", "train.ns=[2, 8]",
                                        "train.checkpoint=020", "train.resume=false",
                                        "train.data_dir=/data"])  # fmt: skip
    assert got.train.lr == 1.0 and isinstance(got.train.lr, float)  # int accepted for float
    assert (got.seed, got.train.ns, got.train.resume, got.train.data_dir) == (
        4,
        (2, 8),
        False,
        "/data",
    )
    assert got.train.checkpoint == "020"  # a string field keeps the text as written
    assert config.override_config(Run(), ["train.data_dir=null"]).train.data_dir is None
    assert base.train.lr == 1e-3  # configs are immutable; overrides return a new one


@pytest.mark.parametrize(
    "assignment, needle",
    [
        ('train.num_steps="abc"', "train.num_steps must be int, got 'abc'"),
        ("train.num_steps=abc", "train.num_steps must be int, got 'abc'"),
        ("train.ns=[1,x]", "train.ns must be a list"),  # not JSON: refused, not split into chars
        ("train.ns=1", "train.ns must be a list"),
        ("train.bogus=1", "override 'train.bogus=1': unknown key 'bogus'"),
        ("model.depth=1", "override 'model.depth=1': unknown group 'model'"),
        ("seed.x=1", "unknown group 'seed'"),
        ("num_steps", "must look like group.key=value"),
        ("=3", "must look like group.key=value"),
    ],
)
def test_bad_overrides_are_named(assignment, needle):
    with pytest.raises(ConfigError) as exc:
        config.override_config(Run(), [assignment])
    assert needle in str(exc.value)


def test_files_with_base(tmp_path):
    js = tmp_path / "run.json"
    js.write_text(json.dumps({"base": "tiny", "seed": 2, "train": {"lr": 1}}))
    got = config.load_config(Run, PRESETS, js)
    assert got == Run(seed=2, train=Train(num_steps=2, ns=(1,), lr=1.0))
    toml = tmp_path / "run.toml"
    toml.write_text("seed = 5\n[train]\nns = [3, 6]\n")  # no base: "default"
    assert config.load_config(Run, PRESETS, toml) == Run(seed=5, train=Train(ns=(3, 6)))
    assert config.load_config(Run, PRESETS, "tiny") == config.get_config(Run, PRESETS, "tiny")


@pytest.mark.parametrize(
    "name, text, needle",
    [
        ("absent.toml", None, "neither a config preset"),
        ("run.yaml", "seed: 1\n", "must end in .json or .toml"),
        ("bad.toml", "seed = \n", "bad.toml: cannot parse config"),
        ("list.json", "[1, 2]", "top level must be a table"),
        ("typed.toml", '[train]\nnum_steps = "abc"\n', "train.num_steps must be int"),
    ],
)
def test_bad_files(tmp_path, name, text, needle):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        config.load_config(Run, PRESETS, path)
    assert needle in str(exc.value)


def test_group_default_instance_supplies_the_defaults_of_a_partial_table():
    """``model: Size = Size(layers=2)``: a file or preset giving only ``model.dim`` keeps 2 layers."""
    import dataclasses as dc

    from fidia_jax import config as cfg

    @dc.dataclass(frozen=True)
    class Size:
        dim: int = 128
        layers: int = 4

    @dc.dataclass(frozen=True)
    class Run:
        model: Size = Size(layers=2)

    got = cfg.config_from_dict(Run, {"default": {}}, {"model": {"dim": 32}})
    assert got.model == Size(dim=32, layers=2)
    assert cfg.override_config(Run(), ["model.dim=16"]).model == Size(dim=16, layers=2)
