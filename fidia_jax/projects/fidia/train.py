"""One training loop for FIDIA and its baselines, with checkpoints, resume, metrics and plots.

Step ``s`` (all methods, same sample budget):

1. pick ``B = data.batch_backbones`` training backbones (an epoch-wise permutation seeded by
   ``(seed, epoch)``, so the schedule is a pure function of the step);
2. rollout: ``n = train.n_samples`` sequences per backbone from the policy (from the frozen
   reference for DPO) -- backbones padded to ``data.max_length``, stacked, and sharded over the
   ``data`` axis of a device mesh; the key is ``fold_in(PRNGKey(seed), s)``;
3. composite rewards per backbone (host side), then advantages (FIDIA: PKPO loo-1 with
   ``k = k_bon``; RLOO; GRPO) or the DPO best/worst pair;
4. ``train.ppo_epochs`` adamw steps on :func:`fidia_jax.projects.fidia.policy_loss` (or
   :func:`fidia_jax.projects.fidia.dpo_loss`), sequences teacher-forced in their own decoding order;
5. metrics appended to ``metrics.jsonl``; an orbax checkpoint every ``train.checkpoint_every``
   steps and at the end.

Because every random choice is derived from ``(seed, step)`` and the checkpoint holds the
parameters and the optimiser state, a run killed at any point and resumed from its last
checkpoint ends with the same parameters as an uninterrupted run (tested with SIGKILL).
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import models
from fidia_jax._io import atomic_write_text
from fidia_jax.errors import CheckpointError
from fidia_jax.projects.fidia import _advantages as adv_lib
from fidia_jax.projects.fidia import _evaluate as eval_lib
from fidia_jax.projects.fidia._backbones import Backbone, load_backbones, stack_backbones
from fidia_jax.projects.fidia.configs import FidiaConfig, config_from_dict, config_to_dict
from fidia_jax.projects.fidia._policy import (
    dpo_loss,
    omit_mask,
    policy_loss,
    policy_token_log_probs,
    tempered_token_log_probs,
)

__all__ = [
    "Trainer",
    "make_optimizer",
    "evaluate_params",
    "load_policy",
    "plot_max_at_n",
    "plot_training",
    "train_and_evaluate",
]


# --------------------------------------------------------------------------------------------
# Jitted pieces (pure functions of explicit state; compiled once per shape).
# --------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("graphdef", "num_samples", "temperature", "omit_aas"))
def _rollout(graphdef, state, keys_B, inputs_B, fixed_BxL, *, num_samples, temperature, omit_aas):
    """``B`` backbones x ``num_samples`` sequences; returns a batched ``SampleResult``."""
    model = nnx.merge(graphdef, state)

    def one(key, inputs, fixed):
        return models.sample(
            model, key, inputs, num_samples=num_samples, temperature=temperature,
            fixed_mask=fixed, omit_aas=omit_aas,
        )

    return jax.vmap(one)(keys_B, inputs_B, fixed_BxL)


def _make_update(graphdef, tx: optax.GradientTransformation, config: FidiaConfig):
    """The jitted adamw step of ``config.method`` (closure over static hyperparameters).

    FIDIA, RLOO and GRPO differ only in the advantages fed to the step, so they share one
    compiled function (cached on the hyperparameters the step reads).
    """
    t, m = config.train, config.model
    key = (graphdef, config.method == "dpo", m.temperature, m.omit_aas, t.dpo_beta, t.beta_kl,
           t.clip_eps, t.learning_rate, t.weight_decay, t.grad_clip)
    del tx  # rebuilt from the key's hyperparameters (equal keys give equal optimisers)
    return _build_update(*key)


@functools.lru_cache(maxsize=16)
def _build_update(graphdef, is_dpo, temperature, omit, dpo_beta, beta_kl, clip_eps,
                  learning_rate, weight_decay, grad_clip):
    tx = _optimizer(learning_rate, weight_decay, grad_clip)

    def token_logp(params, batch):
        return policy_token_log_probs(
            nnx.merge(graphdef, params), batch["inputs"], batch["seqs"], batch["orders"],
            temperature=temperature, omit_21=omit_mask(omit),
        )

    def loss_fn(params, ref_params, batch):
        logp = token_logp(params, batch)
        if not is_dpo:  # DPO's pairs were sampled from the reference: batch["ref"] is exact
            batch = dict(batch, ref=jax.lax.stop_gradient(token_logp(ref_params, batch)))
        if is_dpo:
            loss_b, aux = jax.vmap(functools.partial(dpo_loss, beta=dpo_beta))(
                logp, batch["ref"], batch["designed"], batch["valid"]
            )
        else:
            loss_b, aux = jax.vmap(
                functools.partial(policy_loss, beta_kl=beta_kl, clip_eps=clip_eps)
            )(logp, batch["old"], batch["ref"], batch["adv"], batch["designed"])
        return jnp.mean(loss_b), jax.tree.map(jnp.mean, aux)

    @jax.jit
    def update(params, opt_state, ref_params, batch):
        (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, ref_params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        aux = dict(aux, loss=loss, grad_norm=optax.tree.norm(grads))
        return params, opt_state, aux

    return update


def _optimizer(learning_rate: float, weight_decay: float, grad_clip: float):
    adamw = optax.adamw(learning_rate, weight_decay=weight_decay)
    if grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(grad_clip), adamw)
    return adamw


def make_optimizer(config: FidiaConfig) -> optax.GradientTransformation:
    """adamw with global-norm clipping (``train.grad_clip <= 0`` disables clipping)."""
    t = config.train
    return _optimizer(t.learning_rate, t.weight_decay, t.grad_clip)


# --------------------------------------------------------------------------------------------
# Trainer
# --------------------------------------------------------------------------------------------


def _num_devices(batch: int, requested: int) -> int:
    avail = jax.device_count() if requested <= 0 else min(requested, jax.device_count())
    return max(d for d in range(1, avail + 1) if batch % d == 0)


def _schedule(step: int, num_tasks: int, batch: int, seed: int) -> np.ndarray:
    """Training-backbone indices of ``step``: epoch-wise permutations, a pure function of step."""
    out = []
    for j in range(batch):
        flat = step * batch + j
        epoch, pos = divmod(flat, num_tasks)
        perm = np.random.default_rng([seed, epoch]).permutation(num_tasks)
        out.append(int(perm[pos]))
    return np.asarray(out, np.int64)


def _write_json(path: pathlib.Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, default=float))


class Trainer:
    """Holds the policy, the frozen reference, the optimiser and the backbones of one run.

    Args:
      config: the run configuration.
      train_backbones / eval_backbones: :class:`~fidia_jax.projects.fidia.Backbone` lists (``None``:
        built by :func:`~fidia_jax.projects.fidia.load_backbones` from ``config.data``).
      num_devices: devices of the ``data`` mesh axis (``0``: as many as divide the batch).
    """

    def __init__(
        self,
        config: FidiaConfig,
        *,
        train_backbones: Sequence[Backbone] | None = None,
        eval_backbones: Sequence[Backbone] | None = None,
        num_devices: int = 0,
        reference: models.ProteinMPNN | None = None,
    ):
        self.config = config
        m = config.model
        ref_model = reference or models.ProteinMPNN.from_checkpoint(m.checkpoint, variant=m.variant)
        self.graphdef, ref_state = nnx.split(ref_model)
        self.ref_params = jax.tree.map(jnp.asarray, nnx.to_pure_dict(ref_state))
        b = config.data.batch_backbones
        ndev = _num_devices(b, num_devices)
        self.mesh = Mesh(np.asarray(jax.devices()[:ndev]), ("data",))
        self.batch_sharding = NamedSharding(self.mesh, P("data"))
        self.replicated = NamedSharding(self.mesh, P())
        self.tx = make_optimizer(config)
        self._update = _make_update(self.graphdef, self.tx, config)
        self.ref_params = jax.device_put(self.ref_params, self.replicated)
        if train_backbones is None or eval_backbones is None:
            built_train, built_eval = load_backbones(config)
            train_backbones = train_backbones if train_backbones is not None else self.calibrate(built_train, 0)
            eval_backbones = eval_backbones if eval_backbones is not None else self.calibrate(built_eval, 1)
        self.train_backbones = list(train_backbones)
        self.eval_backbones = list(eval_backbones)

    def calibrate(self, backbones: Sequence[Backbone], salt: int) -> list[Backbone]:
        """Fits each backbone's reward standardiser on samples of the frozen reference."""
        from fidia_jax.projects.fidia._tasks_bridge import fit_reward

        n = self.config.reward.calibration_samples
        b = self.config.data.batch_backbones
        key = jax.random.fold_in(jax.random.PRNGKey(self.config.seed + 20_000), salt)
        out = []
        for start in range(0, len(backbones), b):
            chunk = list(backbones[start : start + b])
            padded = chunk + [chunk[-1]] * (b - len(chunk))
            _, res = self.rollout(self.ref_params, padded, jax.random.fold_in(key, start), n)
            seqs = np.asarray(res.sequences)
            out += [fit_reward(bb, seqs[j, :, : bb.length]) for j, bb in enumerate(chunk)]
        return out

    def with_method(self, method: str, **train_overrides: Any) -> Trainer:
        """A trainer for another method sharing this one's reference, backbones and rewards.

        Rewards are calibrated once (same standardisation for every method); jitted samplers are
        shared, only the update step is rebuilt.
        """
        import copy

        from fidia_jax.projects.fidia.configs import override_config

        sets = [f"method={method}"] + [f"train.{k}={json.dumps(v)}" for k, v in train_overrides.items()]
        other = copy.copy(self)
        other.config = override_config(self.config, sets)
        other.tx = make_optimizer(other.config)
        other._update = _make_update(self.graphdef, other.tx, other.config)
        return other

    # ---- state -------------------------------------------------------------------------------

    def init_state(self) -> dict[str, Any]:
        """Initial training state: policy = reference weights, fresh adamw state, step 0."""
        params = jax.tree.map(jnp.array, self.ref_params)  # a copy
        return self.place({"params": params, "opt_state": self.tx.init(params)})

    def place(self, state: dict[str, Any]) -> dict[str, Any]:
        """Replicates a training state over the mesh (fixed placement: no recompilation)."""
        return jax.device_put(state, self.replicated)

    # ---- rollout / rewards -------------------------------------------------------------------

    def _put(self, tree):
        return jax.device_put(tree, self.batch_sharding)

    def rollout(self, params, backbones: Sequence[Backbone], key, num_samples: int):
        """Samples ``num_samples`` sequences per backbone; returns host numpy arrays.

        Returns:
          ``(stacked, result)``: the padded :class:`StackedBackbones` and a ``SampleResult``
          with leading axes ``(B, num_samples)``.
        """
        m = self.config.model
        stacked = stack_backbones(backbones, self.config.data.max_length)
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(len(backbones)))
        out = _rollout(
            self.graphdef, params, self._put(keys), self._put(stacked.inputs),
            self._put(stacked.fixed), num_samples=num_samples, temperature=m.temperature,
            omit_aas=m.omit_aas,
        )
        return stacked, out

    @staticmethod
    def rewards(backbones: Sequence[Backbone], seqs_BxNxL: np.ndarray):
        """Host-side composite rewards and proxy verdicts, ``(B, N)`` each."""
        rewards, passes = [], []
        for bb, seqs in zip(backbones, np.asarray(seqs_BxNxL), strict=True):
            r, ok = bb.reward(seqs[:, : bb.length])
            rewards.append(np.asarray(r, np.float32))
            passes.append(np.asarray(ok, bool))
        return np.stack(rewards), np.stack(passes)

    # ---- one step ----------------------------------------------------------------------------

    def step(self, state: dict[str, Any], step: int) -> tuple[dict[str, Any], dict[str, float]]:
        """One training step (rollout, rewards, advantages, ``ppo_epochs`` updates)."""
        cfg, t, m = self.config, self.config.train, self.config.model
        t0 = time.perf_counter()
        idx = _schedule(step, len(self.train_backbones), cfg.data.batch_backbones, cfg.seed)
        backbones = [self.train_backbones[i] for i in idx]
        key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), step)
        sampler_params = self.ref_params if cfg.method == "dpo" else state["params"]
        stacked, out = self.rollout(sampler_params, backbones, key, t.n_samples)
        seqs = np.asarray(out.sequences)
        orders = np.asarray(out.decoding_order)
        rewards, passes = self.rewards(backbones, seqs)
        designed = np.broadcast_to(stacked.designed[:, None, :], seqs.shape).astype(np.float32)

        metrics: dict[str, float] = {
            "step": step,
            "reward_mean": float(rewards.mean()),
            "reward_max": float(rewards.max(axis=1).mean()),
            f"max@{t.k_bon}": float(np.mean([eval_lib.max_at_n(r, t.k_bon) for r in rewards])),
            "pass_rate": float(passes.mean()),
        }
        # log pi_old (or log pi_ref for DPO) of the sampled tokens: the sampler's own T=1
        # log-softmax, tempered and token-masked like the loss (equal to teacher forcing ~1e-5).
        sample_logp = tempered_token_log_probs(
            jnp.asarray(out.log_probs), jnp.asarray(seqs), temperature=m.temperature,
            omit_21=omit_mask(m.omit_aas))
        sample_logp = np.asarray(sample_logp)
        if cfg.method == "dpo":
            chosen, rejected, valid = jax.vmap(adv_lib.dpo_pair)(jnp.asarray(rewards))
            pick = np.stack([np.asarray(chosen), np.asarray(rejected)], axis=1)[:, :, None]  # (B,2,1)
            batch = {
                "valid": np.asarray(valid, np.float32),
                "seqs": np.take_along_axis(seqs, pick, axis=1),
                "orders": np.take_along_axis(orders, pick, axis=1),
                "designed": np.take_along_axis(designed, pick, axis=1),
                "ref": np.take_along_axis(sample_logp, pick, axis=1),
            }
        else:
            adv = jax.vmap(
                functools.partial(adv_lib.advantages, cfg.method, k=t.k_bon, grpo_eps=t.grpo_eps,
                                  fidia_group_norm=t.fidia_group_norm)
            )(jnp.asarray(rewards))
            batch = {"adv": np.asarray(adv, np.float32), "seqs": seqs, "orders": orders,
                     "designed": designed, "old": sample_logp}
        batch = {k: self._put(jnp.asarray(v)) for k, v in batch.items()}
        batch["inputs"] = self._put(stacked.inputs)

        params, opt_state = state["params"], state["opt_state"]
        for _ in range(t.ppo_epochs):
            params, opt_state, aux = self._update(params, opt_state, self.ref_params, batch)
            params, opt_state = self.place(params), self.place(opt_state)
        metrics.update({k: float(v) for k, v in aux.items()})
        metrics["seconds"] = time.perf_counter() - t0
        return {"params": params, "opt_state": opt_state}, metrics

    # ---- evaluation --------------------------------------------------------------------------

    def evaluate(self, params, backbones: Sequence[Backbone] | None = None, *, seed_offset: int = 10_000):
        """Held-out metrics (see :mod:`fidia_jax.projects.fidia._evaluate`) of ``params``.

        The evaluation key depends only on ``config.seed`` (paired comparison before/after and
        across methods).

        Returns:
          ``{"per_backbone": [...], "summary": {...}, "by_kind": {kind: summary}}``.
        """
        return evaluate_params(self, params, self.eval_backbones if backbones is None else backbones,
                               seed_offset=seed_offset)


def evaluate_params(trainer: Trainer, params, backbones: Sequence[Backbone], *, seed_offset: int = 10_000):
    """Samples ``eval.n_samples`` per backbone with ``params`` and computes every metric."""
    cfg, e = trainer.config, trainer.config.eval
    b = cfg.data.batch_backbones
    key = jax.random.PRNGKey(cfg.seed + seed_offset)
    per = []
    for start in range(0, len(backbones), b):
        chunk = list(backbones[start : start + b])
        real = len(chunk)
        chunk = chunk + [chunk[-1]] * (b - real)  # pad the last batch (same compiled shapes)
        stacked, out = trainer.rollout(params, chunk, jax.random.fold_in(key, start), e.n_samples)
        seqs = np.asarray(out.sequences)
        rewards, passes = trainer.rewards(chunk, seqs)
        for j in range(real):
            bb = chunk[j]
            L = bb.length
            met = eval_lib.backbone_metrics(
                rewards[j], passes[j], seqs[j, :, :L], bb.native, bb.designed_mask, bb.fixed,
                ns=e.ns, bon_n=e.bon_n,
            )
            best = int(np.argmax(rewards[j]))
            met.update(name=bb.name, kind=bb.kind, length=L, best_reward=float(rewards[j, best]))
            per.append(met)
    kinds = sorted({m["kind"] for m in per})
    by_kind = {k: eval_lib.summarise([m for m in per if m["kind"] == k]) for k in kinds}
    return {"per_backbone": per, "summary": eval_lib.summarise(per), "by_kind": by_kind}


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


def _manager(workdir: pathlib.Path, config: FidiaConfig):
    import orbax.checkpoint as ocp

    options = ocp.CheckpointManagerOptions(max_to_keep=config.train.keep_checkpoints, create=True,
                                           enable_async_checkpointing=False)
    return ocp.CheckpointManager((workdir / "checkpoints").absolute(), options=options)


def _save(mgr, step: int, state) -> None:
    import orbax.checkpoint as ocp

    mgr.save(step, args=ocp.args.StandardSave(state))
    mgr.wait_until_finished()


def _restore(mgr, step: int, target):
    import orbax.checkpoint as ocp

    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
    return mgr.restore(step, args=ocp.args.StandardRestore(abstract))


def load_policy(checkpoint: str | os.PathLike, *, step: int | None = None):
    """The policy of a training run directory (latest or given step), or a ProteinMPNN name.

    Args:
      checkpoint: a ``train`` workdir (with ``config.json`` and ``checkpoints/``) or a
        ProteinMPNN weight name such as ``v_48_020`` (the untrained reference).
      step: checkpoint step (``None``: the latest).

    Returns:
      ``(model, config_or_None, step_or_None)``.

    Raises:
      CheckpointError: the directory holds no checkpoint or does not match the architecture.
    """
    path = pathlib.Path(checkpoint)
    if not path.exists():
        if len(path.parts) > 1 or not re.fullmatch(r"v_\d+_\d{3}", str(checkpoint)):
            raise CheckpointError(f"{checkpoint}: no such training run directory (and not a "
                                  "ProteinMPNN weights name such as 'v_48_020')")
        return models.ProteinMPNN.from_checkpoint(str(checkpoint)), None, None
    if path.name.isdigit() and path.parent.name == "checkpoints":
        step = int(path.name) if step is None else step
        path = path.parent.parent
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"{path}: not a training run directory (no config.json)")
    config = config_from_dict(json.loads(cfg_path.read_text()))
    model = models.ProteinMPNN.from_checkpoint(config.model.checkpoint, variant=config.model.variant)
    graphdef, state = nnx.split(model)
    params = jax.tree.map(jnp.asarray, nnx.to_pure_dict(state))
    mgr = _manager(path, config)
    step = mgr.latest_step() if step is None else step
    if step is None:
        raise CheckpointError(f"{path}: no checkpoint saved yet")
    target = {"params": params, "opt_state": make_optimizer(config).init(params)}
    try:
        restored = _restore(mgr, step, target)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}: cannot restore step {step}: {exc}") from exc
    return nnx.merge(graphdef, restored["params"]), config, step


# --------------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------------


def _read_jsonl(path: pathlib.Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a kill
                continue
    return rows


def plot_training(metrics: Sequence[dict[str, Any]], out_png: pathlib.Path, *, k_bon: int) -> None:
    """Training curves: mean reward, max@k of the rollout batch, loss, KL."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("reward_mean", "mean reward"), (f"max@{k_bon}", f"batch max@{k_bon}"),
            ("loss", "loss"), ("kl", "KL (k3, per token)")]
    fig, axes = plt.subplots(1, 4, figsize=(14, 3))
    steps = [m["step"] for m in metrics]
    for ax, (key, title) in zip(axes, keys, strict=True):
        ax.plot(steps, [m.get(key, float("nan")) for m in metrics], marker=".")
        ax.set_title(title)
        ax.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)


def plot_max_at_n(curves: dict[str, dict[str, float]], ns: Sequence[int], out_png: pathlib.Path,
                  *, title: str = "held-out max@N") -> None:
    """max@N vs N, one line per label (e.g. ``before`` / ``after`` or one per method)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for label, summary in curves.items():
        ax.plot(list(ns), [summary.get(f"max@{n}", float("nan")) for n in ns], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (samples per backbone)")
    ax.set_ylabel("max@N (proxy reward)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def train_and_evaluate(
    config: FidiaConfig,
    workdir: str | os.PathLike,
    *,
    resume: bool = True,
    progress: bool = True,
    trainer: Trainer | None = None,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """Trains ``config.method`` and evaluates it on the held-out backbones.

    Writes into ``workdir``: ``config.json``, ``metrics.jsonl`` (one line per step),
    ``checkpoints/<step>/`` (orbax), ``eval_before.json`` / ``eval_after.json``,
    ``training.png`` and ``max_at_n.png``.

    Args:
      config: the run configuration.
      workdir: output directory (created).
      resume: continue from the latest checkpoint in ``workdir`` when there is one; ``False``
        deletes the checkpoints and cached evaluation of a previous run in ``workdir``.
      progress: show a rich progress bar.
      trainer: a prepared :class:`Trainer` (tests reuse one; built from ``config`` otherwise).
      on_step: called after each step with ``(step, metrics)``.

    Returns:
      ``{"config", "final_step", "before", "after", "params"}`` (``before`` is ``None`` when
      ``eval.before_training`` is false; ``params`` is the trained pure-dict parameter tree).

    Raises:
      ConfigError, DataError, CheckpointError: bad config, missing data, unusable checkpoint.
    """
    workdir = pathlib.Path(workdir)
    cfg_path = workdir / "config.json"
    if resume and cfg_path.is_file():
        previous = json.loads(cfg_path.read_text())
        if previous != config_to_dict(config):
            raise CheckpointError(f"{workdir}: holds a run with a different config; use a new workdir "
                                  "or resume=False")
    # Build the trainer (loads data and weights) before touching the workdir, so bad input
    # leaves nothing behind.
    trainer = trainer or Trainer(config)
    if trainer.config != config:
        raise CheckpointError("train_and_evaluate: trainer was built for a different config")
    workdir.mkdir(parents=True, exist_ok=True)
    if not resume:  # start over: old checkpoints and the cached "before" evaluation go
        import shutil

        shutil.rmtree(workdir / "checkpoints", ignore_errors=True)
        (workdir / "eval_before.json").unlink(missing_ok=True)
    _write_json(cfg_path, config_to_dict(config))
    t = config.train
    num_steps = 0 if config.method == "bon" else t.num_steps

    state = trainer.init_state()
    mgr = _manager(workdir, config)
    start = 0
    latest = mgr.latest_step() if resume else None
    if latest is not None:
        state = trainer.place(_restore(mgr, latest, state))
        start = latest
    metrics_path = workdir / "metrics.jsonl"
    history = [m for m in _read_jsonl(metrics_path) if m["step"] < start]
    atomic_write_text(metrics_path, "".join(json.dumps(m) + "\n" for m in history))

    before = None
    if config.eval.before_training:
        before_path = workdir / "eval_before.json"
        if before_path.is_file():
            before = json.loads(before_path.read_text())
        else:
            before = trainer.evaluate(trainer.ref_params)
            _write_json(before_path, before)

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn(f"[bold]{config.method}[/]"), BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn(), TextColumn("{task.fields[info]}"))
    with Progress(*columns, disable=not progress, transient=False) as bar, \
            metrics_path.open("a") as log:
        task = bar.add_task("train", total=num_steps, completed=start, info="")
        for step in range(start, num_steps):
            state, metrics = trainer.step(state, step)
            log.write(json.dumps(metrics) + "\n")
            log.flush()
            history.append(metrics)
            if (step + 1) % t.checkpoint_every == 0 or step + 1 == num_steps:
                _save(mgr, step + 1, state)
            bar.update(task, advance=1, info=f"reward {metrics['reward_mean']:+.3f} "
                       f"max@{t.k_bon} {metrics[f'max@{t.k_bon}']:+.3f} kl {metrics['kl'] if 'kl' in metrics else 0:.4f}")
            if on_step is not None:
                on_step(step, metrics)
    mgr.close()

    after = trainer.evaluate(state["params"])
    _write_json(workdir / "eval_after.json", after)
    if history:
        plot_training(history, workdir / "training.png", k_bon=t.k_bon)
    curves = {"after" if before is not None else config.method: after["summary"]}
    if before is not None:
        curves = {"before (reference)": before["summary"], **curves}
    plot_max_at_n(curves, config.eval.ns, workdir / "max_at_n.png")
    return {"config": config, "final_step": num_steps, "before": before, "after": after,
            "params": state["params"]}
