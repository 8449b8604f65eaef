"""Typed run configurations for every driver: presets, JSON/TOML files and ``key=value`` overrides.

A project describes a run by one frozen dataclass (nested dataclasses for groups such as
``model``, ``data``, ``train``) and a dict of named presets (``tiny`` for tests, ``demo`` for a
short CPU run, ``default`` for the paper-scale run). The functions here take that dataclass and
those presets as arguments, so this module imports no project::

    >>> import dataclasses
    >>> from fidia_jax import config
    >>> @dataclasses.dataclass(frozen=True)
    ... class Train:
    ...     steps: int = 100
    ...     lr: float = 1e-3
    >>> @dataclasses.dataclass(frozen=True)
    ... class Run:
    ...     seed: int = 0
    ...     train: Train = Train()
    >>> presets = {"tiny": {"train": {"steps": 2}}, "default": {}}
    >>> config.get_config(Run, presets, "tiny")
    Run(seed=0, train=Train(steps=2, lr=0.001))
    >>> config.override_config(config.get_config(Run, presets), ["train.lr=0.01", "seed=3"])
    Run(seed=3, train=Train(steps=100, lr=0.01))

Values are checked against the field annotations (``int``, ``float`` -- an ``int`` is accepted
and converted --, ``bool``, ``str``, ``X | None``, ``tuple[...]`` and nested dataclasses); a bad
key, a bad value type or a malformed file is a :class:`~fidia_jax.errors.ConfigError` naming the
key. A dataclass's own ``__post_init__`` may raise ``ConfigError`` for inconsistent values.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from fidia_jax.errors import ConfigError

__all__ = [
    "ConfigSet",
    "config_from_dict",
    "config_to_dict",
    "get_config",
    "load_config",
    "override_config",
    "write_summary",
]

C = TypeVar("C")
Presets = Mapping[str, Mapping[str, Any]]


def _check_scalar(hint: Any, value: Any, key: str) -> Any:
    """``value`` checked (and int -> float converted) against a scalar annotation."""
    options = (
        typing.get_args(hint)
        if typing.get_origin(hint) in (typing.Union, types.UnionType)
        else (hint,)
    )
    if value is None and type(None) in options:
        return None
    for option in options:
        if option is bool and isinstance(value, bool):
            return value
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if option is str and isinstance(value, str):
            return value
        if option is Any:
            return value
    names = " | ".join(getattr(o, "__name__", str(o)) for o in options)
    raise ConfigError(f"{key} must be {names}, got {value!r} ({type(value).__name__})")


def _field_types(cls: type) -> dict[str, Any]:
    """Resolved field annotations; falls back to the defaults' types for classes defined where
    their module's globals do not hold the annotation names (a doctest, a function body)."""
    try:
        return typing.get_type_hints(cls)
    except NameError:
        out = {}
        for f in dataclasses.fields(cls):
            if not isinstance(f.type, str):
                out[f.name] = f.type
            elif dataclasses.is_dataclass(f.default):
                out[f.name] = type(f.default)
            else:
                out[f.name] = eval(f.type, {"Any": Any})  # builtins: int, str | None, tuple[...]
        return out


def _admits_str(hint: Any) -> bool:
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return str in (typing.get_args(hint) if union else (hint,))


def _build(cls: type[C], values: Mapping[str, Any], where: str) -> C:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = _field_types(cls)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {unknown} in {where.rstrip('.') or 'config'}; "
            f"known: {sorted(fields)}"
        )
    kwargs = {}
    for name, value in values.items():
        hint, key = hints[name], f"{where}{name}"
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{key} must be a table/object, got {value!r}")
            default = fields[name].default
            if dataclasses.is_dataclass(default):  # a group's default instance sets its defaults
                value = _merge(dataclasses.asdict(default), value)
            kwargs[name] = _build(hint, value, f"{key}.")
        elif typing.get_origin(hint) is tuple:
            if not isinstance(value, (list, tuple)):
                raise ConfigError(
                    f"{key} must be a list, got {value!r} "
                    '(on the command line: a JSON list such as \'["a", "b"]\')'
                )
            args = typing.get_args(hint)
            item = args[0] if args else Any
            kwargs[name] = tuple(_check_scalar(item, v, f"{key}[{i}]") for i, v in enumerate(value))
        else:
            kwargs[name] = _check_scalar(hint, value, key)
    return cls(**kwargs)


def _merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def config_from_dict(cls: type[C], presets: Presets, values: Mapping[str, Any]) -> C:
    """Builds ``cls`` from nested dicts; a top-level ``base`` names the preset to start from.

    Args:
      cls: the project's frozen config dataclass.
      presets: preset name -> nested dict of values overriding the dataclass defaults.
      values: nested dict (a JSON/TOML file's content); ``base`` defaults to ``"default"``.

    Raises:
      ConfigError: unknown preset, unknown key, value of the wrong type, or a value the
        dataclass's ``__post_init__`` rejects.
    """
    values = dict(values)
    base = values.pop("base", "default")
    if base not in presets:
        raise ConfigError(f"unknown base config {base!r}; presets: {sorted(presets)}")
    return _build(cls, _merge(presets[base], values), "")


def config_to_dict(config: Any) -> dict[str, Any]:
    """The config as JSON-serialisable nested dicts (tuples become lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def write_summary(path: str | pathlib.Path, results: Mapping[str, Any], config: Any) -> None:
    """Writes a driver's run summary: ``{**results, "config": config_to_dict(config)}``.

    Indented JSON, written atomically (a temp file, then a rename: a reader never sees half a
    file); non-finite floats become ``null`` as :func:`fidia_jax._io.json_text` documents.
    """
    from fidia_jax._io import atomic_write_text, json_text

    atomic_write_text(path, json_text({**results, "config": config_to_dict(config)}, indent=2))


def get_config(cls: type[C], presets: Presets, name: str = "default", **overrides: Any) -> C:
    """The preset ``name`` with top-level ``overrides`` (e.g. ``seed=1``).

    Raises:
      ConfigError: unknown preset name (the message lists the presets), or bad overrides.
    """
    if name not in presets:
        raise ConfigError(f"unknown config {name!r}; presets: {sorted(presets)}")
    return config_from_dict(cls, presets, {"base": name, **overrides})


def load_config(cls: type[C], presets: Presets, name_or_path: str | pathlib.Path) -> C:
    """A preset NAME, or a ``.json`` / ``.toml`` FILE whose keys mirror the dataclasses.

    A file may start from a preset given under the top-level key ``base``.

    Raises:
      ConfigError: unknown name, unreadable or malformed file, unknown keys, bad values.
    """
    text = str(name_or_path)
    if text in presets:
        return get_config(cls, presets, text)
    path = pathlib.Path(text)
    if not path.is_file():
        raise ConfigError(f"{text!r} is neither a config preset {sorted(presets)} nor a file")
    if path.suffix not in (".toml", ".json"):
        raise ConfigError(f"{path}: config files must end in .json or .toml")
    try:
        raw = path.read_text()
        values = tomllib.loads(raw) if path.suffix == ".toml" else json.loads(raw)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot parse config: {exc}") from exc
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: top level must be a table/object")
    return config_from_dict(cls, presets, values)


def _suggest(word: str, valid) -> str:
    """``"; did you mean 'x'? valid: a, b, ..."`` for an unknown key or group."""
    import difflib

    valid = sorted(valid)
    close = difflib.get_close_matches(word, valid, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (valid: {', '.join(valid)})" if valid else hint


def override_config(config: C, assignments: Sequence[str]) -> C:
    """Applies ``group.key=value`` strings (values parsed as JSON, else kept as strings).

    Raises:
      ConfigError: malformed assignment, unknown group or key, or a value of the wrong type.
    """
    values = config_to_dict(config)
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like group.key=value")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node, cls = values, type(config)
        *parents, leaf = key.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                groups = [k for k, v in node.items() if isinstance(v, dict)]
                raise ConfigError(
                    f"override {item!r}: unknown group {part!r}{_suggest(part, groups)}"
                )
            node, cls = node[part], _field_types(cls)[part]
        if leaf not in node:
            raise ConfigError(f"override {item!r}: unknown key {leaf!r}{_suggest(leaf, node)}")
        hint = _field_types(cls)[leaf]
        if not dataclasses.is_dataclass(hint) and typing.get_origin(hint) is not tuple:
            try:
                _check_scalar(hint, value, key)
            except ConfigError:
                if not _admits_str(hint):
                    raise
                value = raw  # a string field keeps the text as written (``checkpoint=020``)
        node[leaf] = value
    return _build(type(config), values, "")


class ConfigSet(Generic[C]):
    """A project's config dataclass bound to its presets.

    A driver's ``configs.py`` ends with::

        CONFIGS = config.ConfigSet(RunConfig, PRESETS)
        get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
        config_from_dict = CONFIGS.config_from_dict

    Example:
      >>> import dataclasses
      >>> @dataclasses.dataclass(frozen=True)
      ... class Run:
      ...     steps: int = 100
      >>> configs = ConfigSet(Run, {"tiny": {"steps": 2}, "default": {}})
      >>> configs.get_config("tiny"), configs.names
      (Run(steps=2), ('default', 'tiny'))
    """

    def __init__(self, cls: type[C], presets: Presets):
        if "default" not in presets:
            raise ConfigError(
                f"{cls.__name__} presets need a 'default' entry; got {sorted(presets)}"
            )
        self.cls, self.presets = cls, presets

    @property
    def names(self) -> tuple[str, ...]:
        """The preset names, sorted."""
        return tuple(sorted(self.presets))

    def get_config(self, name: str = "default", **overrides: Any) -> C:
        """The preset ``name`` with top-level ``overrides``; see :func:`get_config`."""
        return get_config(self.cls, self.presets, name, **overrides)

    def load_config(self, name_or_path: str | pathlib.Path) -> C:
        """A preset NAME or a ``.json`` / ``.toml`` FILE; see :func:`load_config`."""
        return load_config(self.cls, self.presets, name_or_path)

    def config_from_dict(self, values: Mapping[str, Any]) -> C:
        """Nested dicts (a top-level ``base`` names the preset); see :func:`config_from_dict`."""
        return config_from_dict(self.cls, self.presets, values)
