"""Config presets, JSON/TOML loading, validation and overrides."""

import json

import pytest

from fidia_jax.errors import ConfigError
from fidia_jax.projects import fidia


@pytest.mark.parametrize("name", ["tiny", "demo", "small", "default"])
def test_presets_are_valid_and_round_trip(name):
    cfg = fidia.get_config(name)
    assert fidia.config_from_dict(fidia.config_to_dict(cfg)) == cfg
    assert fidia.load_config(name) == cfg


def test_json_and_toml_files(tmp_path):
    js = tmp_path / "run.json"
    js.write_text(json.dumps({"base": "tiny", "method": "grpo", "train": {"num_steps": 7}}))
    cfg = fidia.load_config(js)
    assert (cfg.method, cfg.train.num_steps, cfg.train.n_samples) == ("grpo", 7, 4)
    toml = tmp_path / "run.toml"
    toml.write_text('base = "demo"\nseed = 3\n[eval]\nns = [1, 2]\nbon_n = 2\n')
    cfg = fidia.load_config(toml)
    assert (cfg.seed, cfg.eval.ns, cfg.eval.bon_n, cfg.train.k_bon) == (3, (1, 2), 2, 8)


@pytest.mark.parametrize(
    "values",
    [
        {"method": "ppo"},
        {"train": {"k_bon": 5, "n_samples": 4}},
        {"train": {"bogus": 1}},
        {"eval": {"ns": [1, 64]}},
        {"base": "nope"},
    ],
)
def test_invalid_configs_raise(values):
    with pytest.raises(ConfigError):
        fidia.config_from_dict(values)


def test_override_and_missing_file(tmp_path):
    cfg = fidia.override_config(fidia.get_config("tiny"), ["train.beta_kl=0.5", "method=rloo"])
    assert (cfg.train.beta_kl, cfg.method) == (0.5, "rloo")
    with pytest.raises(ConfigError):
        fidia.override_config(cfg, ["train.nope=1"])
    # a list written without JSON quotes arrives as a string: refused, not split into characters
    with pytest.raises(ConfigError, match="must be a list"):
        fidia.override_config(cfg, ["data.eval_names=[rfdiffusion/5TPN]"])
    assert fidia.override_config(cfg, ['data.eval_names=["5TPN"]']).data.eval_names == ("5TPN",)
    with pytest.raises(ConfigError):
        fidia.load_config(tmp_path / "absent.toml")
