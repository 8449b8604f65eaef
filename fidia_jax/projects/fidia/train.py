"""One training loop for FIDIA and its baselines, with checkpoints, resume, metrics and plots.

Step ``s`` (all methods, same sample budget):

1. pick ``B = data.batch_backbones`` training backbones (an epoch-wise permutation seeded by
   ``(seed, epoch)``, so the schedule is a pure function of the step);
2. rollout: ``n = train.n_samples`` sequences per backbone from the policy (from the frozen
   reference for DPO) -- backbones padded to ``data.max_length``, stacked, and split over the
   ``data`` axis of a mesh of every visible device (:mod:`fidia_jax.parallel`); the key is
   ``fold_in(PRNGKey(seed), s)``;
3. composite rewards per backbone (host side), then advantages (FIDIA: PKPO loo-1 with
   ``k = k_bon``; RLOO; GRPO) or the DPO best/worst pair;
4. ``train.ppo_epochs`` adamw steps on :func:`fidia_jax.projects.fidia.policy_loss` (or
   :func:`fidia_jax.rl.dpo_sequence_loss`), sequences teacher-forced in their own decoding order;
5. metrics appended to ``metrics.jsonl``; an orbax checkpoint (:class:`fidia_jax.train.Checkpointer`)
   every ``train.checkpoint_every`` steps and at the end.

Because every random choice is derived from ``(seed, step)`` and the checkpoint holds the
parameters and the optimiser state, a run killed at any point and resumed from its last
checkpoint ends with the same parameters as an uninterrupted run (tested with SIGKILL).
For the same reason every process of a multi-host run (launched under ``jax.distributed``,
initialised from the launcher's environment by :func:`fidia_jax.parallel.initialize_distributed`)
builds the same global batch and feeds the rows of its own devices; the host-side rewards of
the samples are split over the processes by backbone and gathered in order
(:meth:`Trainer.rewards`); process 0 writes the files.

The pieces live beside this file: ``_step.py`` (train state, schedule, jitted rollout, the
update as a :func:`fidia_jax.train.make_train_step` step), ``_checkpoints.py`` (checkpoints,
:func:`load_policy`), ``_plots.py`` (figures). Progress, tables, JSON files and figures come from
:mod:`fidia_jax.train`; the loop itself is FIDIA's (one rollout and rewards per step, then
``train.ppo_epochs`` gradient steps), not :func:`fidia_jax.train.fit`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pathlib
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import models, parallel, train
from fidia_jax._io import NON_FINITE_KEY, atomic_write_text, json_text
from fidia_jax.errors import CheckpointError, ConfigError, TrainingError
from fidia_jax.projects.fidia import _checkpoints as ckpt
from fidia_jax.projects.fidia import _evaluate as eval_lib
from fidia_jax.projects.fidia._backbones import Backbone, stack_backbones
from fidia_jax.projects.fidia._checkpoints import load_policy
from fidia_jax.projects.fidia._fold import FoldCache, build_predictor
from fidia_jax.projects.fidia._plots import plot_max_at_n, plot_training
from fidia_jax.projects.fidia._policy import omit_mask, tempered_token_log_probs
from fidia_jax.projects.fidia._step import (
    TrainState,
    make_optimizer,
    make_reference_log_probs,
    make_update,
    rollout,
    schedule,
    update_batch,
)
from fidia_jax.projects.fidia._tasks_bridge import fit_reward, load_backbones
from fidia_jax.projects.fidia.configs import (
    FidiaConfig,
    config_from_dict,
    config_to_dict,
    override_config,
)

__all__ = [
    "TrainState",
    "Trainer",
    "evaluate_params",
    "headline",
    "stage_if",
    "load_policy",
    "make_optimizer",
    "plot_max_at_n",
    "plot_training",
    "train_and_evaluate",
]


def _read_jsonl(path: pathlib.Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill
                continue
            # json_text wrote null for a non-finite metric and said what it was: restore it
            for key, what in row.pop(NON_FINITE_KEY, {}).items():
                if key in row:
                    row[key] = float(what)
            rows.append(row)
    return rows


class Trainer:
    """Holds the policy, the frozen reference, the optimiser and the backbones of one run.

    Args:
      config: the run configuration.
      train_backbones / eval_backbones: :class:`~fidia_jax.projects.fidia.Backbone` lists
        (``None``: built by :func:`~fidia_jax.projects.fidia.load_backbones` from ``config.data``).
      num_devices: cap on the devices of the ``data`` mesh axis (``0``: ``data.num_devices``,
        whose ``0`` is every visible device;
        the mesh takes the largest count that divides ``data.batch_backbones``, see
        :func:`fidia_jax.parallel.data_mesh`).
      reference: the frozen reference (``None``: ``config.model.checkpoint``).
      predictor: the structure predictor of ``reward.criteria = "structure"`` (any
        :class:`fidia_jax.protein.StructurePredictor`; ``None``: AlphaFold2 from
        ``reward.fold_params``, see :func:`~fidia_jax.projects.fidia.build_predictor`). It is
        wrapped in a :class:`~fidia_jax.projects.fidia.FoldCache` (one fold per distinct
        sequence), held as ``self.predictor``.

    Raises:
      ConfigError: a ``predictor`` with ``reward.criteria = "proxy"``, or ``"structure"``
        without a predictor or ``reward.fold_params``.
    """

    def __init__(
        self,
        config: FidiaConfig,
        *,
        train_backbones: Sequence[Backbone] | None = None,
        eval_backbones: Sequence[Backbone] | None = None,
        num_devices: int = 0,
        reference: models.ProteinMPNN | None = None,
        predictor: Any = None,
    ):
        parallel.initialize_distributed()  # before any array exists; no-op without a launcher
        self.config = config
        if config.reward.criteria == "proxy":
            if predictor is not None:
                raise ConfigError(
                    "a structure predictor was given but reward.criteria is 'proxy'; "
                    "set reward.criteria=structure"
                )
            self.predictor = None
        elif predictor is None:
            self.predictor = build_predictor(config)
        else:
            self.predictor = predictor if isinstance(predictor, FoldCache) else FoldCache(predictor)
        m = config.model
        ref_model = reference or models.ProteinMPNN.from_checkpoint(m.checkpoint, variant=m.variant)
        self.graphdef, ref_state = nnx.split(ref_model)
        ref_params = jax.tree.map(jnp.asarray, nnx.to_pure_dict(ref_state))
        try:
            self.mesh = parallel.data_mesh(
                config.data.batch_backbones, num_devices=num_devices or config.data.num_devices
            )
        except ConfigError as err:  # name the config fields
            raise ConfigError(f"data.batch_backbones / data.num_devices: {err}") from err
        self.batch_sharding = NamedSharding(self.mesh, P("data"))
        self.replicated = NamedSharding(self.mesh, P())
        self.tx = make_optimizer(config)
        self._update = make_update(self.graphdef, config)
        self._reference = make_reference_log_probs(self.graphdef, config)
        self.ref_params = self.place(ref_params)
        if train_backbones is None or eval_backbones is None:
            built_train, built_eval = load_backbones(config, self.predictor)
            if train_backbones is None:
                train_backbones = self.calibrate(built_train, 0)
            if eval_backbones is None:
                eval_backbones = self.calibrate(built_eval, 1)
        self.train_backbones = list(train_backbones)
        self.eval_backbones = list(eval_backbones)

    def calibrate(self, backbones: Sequence[Backbone], salt: int) -> list[Backbone]:
        """Fits each backbone's reward standardiser on samples of the frozen reference."""
        n = self.config.reward.calibration_samples
        b = self.config.data.batch_backbones
        key = jax.random.fold_in(jax.random.PRNGKey(self.config.seed + 20_000), salt)
        out = []
        for start in range(0, len(backbones), b):
            chunk = list(backbones[start : start + b])
            padded = chunk + [chunk[-1]] * (b - len(chunk))
            _, res = self.rollout(self.ref_params, padded, jax.random.fold_in(key, start), n)
            seqs = parallel.to_host(res.sequences)
            out += [fit_reward(bb, seqs[j, :, : bb.length]) for j, bb in enumerate(chunk)]
        return out

    def with_method(self, method: str, **train_overrides: Any) -> Trainer:
        """A trainer for another method sharing this one's reference, backbones and rewards.

        Rewards are calibrated once (same standardisation for every method); jitted samplers are
        shared, only the update step and the reference program are rebuilt (both cached on the
        settings they read).
        """
        sets = [f"method={method}"] + [
            f"train.{k}={json_text(v)}" for k, v in train_overrides.items()
        ]
        other = copy.copy(self)
        other.config = override_config(self.config, sets)
        if other.config.train.param_sharding != self.config.train.param_sharding:
            raise ConfigError(
                "with_method: train.param_sharding must stay the same "
                "(the reference is placed once)"
            )
        other.tx = make_optimizer(other.config)
        other._update = make_update(self.graphdef, other.config)
        other._reference = make_reference_log_probs(self.graphdef, other.config)
        return other

    # ---- state -------------------------------------------------------------------------------

    def init_state(self) -> TrainState:
        """Initial training state: step 0, policy = reference weights, fresh adamw state."""
        params = jax.tree.map(jnp.array, self.ref_params)  # a copy
        params, opt_state = self.place((params, self.tx.init(params)))
        return TrainState(step=0, params=params, opt_state=opt_state)

    def place(self, tree: Any) -> Any:
        """Puts parameters / optimiser state (any pytree, or a :class:`TrainState`) on the mesh
        as ``train.param_sharding`` says (fixed placement: no recompilation)."""
        if isinstance(tree, TrainState):
            return tree._replace(
                params=self.place(tree.params), opt_state=self.place(tree.opt_state)
            )
        return parallel.place_params(tree, self.mesh, self.config.train.param_sharding)

    # ---- rollout / rewards -------------------------------------------------------------------

    def _put(self, tree):
        return parallel.shard_batch(tree, self.mesh)

    def rollout(self, params, backbones: Sequence[Backbone], key, num_samples: int):
        """Samples ``num_samples`` sequences per backbone, the batch split over the mesh.

        Returns:
          ``(stacked, result)``: the padded :class:`StackedBackbones` and a ``SampleResult``
          (device arrays) with leading axes ``(B, num_samples)``.
        """
        m = self.config.model
        stacked = stack_backbones(backbones, self.config.data.max_length)
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(len(backbones)))
        out = rollout(
            self.graphdef,
            params,
            self._put(keys),
            self._put(stacked.inputs),
            self._put(stacked.fixed),
            num_samples=num_samples,
            temperature=m.temperature,
            omit_aas=m.omit_aas,
        )
        return stacked, out

    @staticmethod
    def rewards(backbones: Sequence[Backbone], seqs_BxNxL: np.ndarray):
        """Host-side composite rewards and success verdicts (proxy or structure), ``(B, N)``.

        Across processes the backbones are split (process ``p`` of ``n`` scores rows
        ``p::n``, :func:`fidia_jax.parallel.split_map`) and the results gathered
        on every process in order: the same arrays as one process, each judged or folded once.

        Raises:
          ValueError: ``seqs_BxNxL`` has not one row per backbone.
        """
        seqs_BxNxL = np.asarray(seqs_BxNxL)
        if len(seqs_BxNxL) != len(backbones):
            raise ValueError(f"{len(backbones)} backbones but {len(seqs_BxNxL)} rows of samples")

        def one(j):
            bb = backbones[j]
            r, ok = bb.reward(seqs_BxNxL[j][:, : bb.length])
            return np.asarray(r, np.float32), np.asarray(ok, bool)

        pairs = parallel.split_map(one, len(backbones))
        return np.stack([r for r, _ in pairs]), np.stack([ok for _, ok in pairs])

    # ---- one step ----------------------------------------------------------------------------

    def step(self, state: TrainState) -> tuple[TrainState, dict[str, float]]:
        """Training step ``state.step`` (rollout, rewards, advantages, ``ppo_epochs`` updates).

        Returns:
          ``(state, metrics)``: the state after the step (``step + 1``) and its metrics.
        """
        cfg, t, m = self.config, self.config.train, self.config.model
        step = int(state.step)
        t0 = time.perf_counter()
        idx = schedule(step, len(self.train_backbones), cfg.data.batch_backbones, cfg.seed)
        backbones = [self.train_backbones[i] for i in idx]
        key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), step)
        sampler_params = self.ref_params if cfg.method == "dpo" else state.params
        stacked, out = self.rollout(sampler_params, backbones, key, t.n_samples)
        seqs, orders, log_probs = parallel.to_host(
            (out.sequences, out.decoding_order, out.log_probs)
        )
        folds_before = self.predictor.counters() if self.predictor is not None else None
        rewards, passes = self.rewards(backbones, seqs)
        designed = np.broadcast_to(stacked.designed[:, None, :], seqs.shape).astype(np.float32)

        metrics: dict[str, float] = {
            "step": step,
            **reward_metrics(rewards, t.k_bon),
            "pass_rate": float(passes.mean()),
        }
        if folds_before is not None:  # predictor time and work of this step's rewards
            now = self.predictor.counters()
            mine = {k: now[k] - folds_before[k] for k in now}
            every = parallel.gather_in_order(
                [mine], jax.process_count()
            )  # summed over the processes
            metrics.update({k: float(sum(c[k] for c in every)) for k in mine})
        # log pi_old (or log pi_ref for DPO) of the sampled tokens: the sampler's own T=1
        # log-softmax, tempered and token-masked like the loss (equal to teacher forcing ~1e-5).
        sample_logp = np.asarray(
            tempered_token_log_probs(
                jnp.asarray(log_probs),
                jnp.asarray(seqs),
                temperature=m.temperature,
                omit_21=omit_mask(m.omit_aas),
            )
        )
        batch = update_batch(cfg, rewards, seqs, orders, designed, sample_logp)
        batch = {k: self._put(jnp.asarray(v)) for k, v in batch.items()}
        batch["inputs"] = self._put(stacked.inputs)
        if cfg.method != "dpo":  # the reference's log pi, once per step (forward-only program)
            batch["ref"] = self._reference(
                self.ref_params, batch["inputs"], batch["seqs"], batch["orders"]
            )

        params, opt_state = state.params, state.opt_state
        checks = []
        for _ in range(t.ppo_epochs):
            params, opt_state, aux = self._update(params, opt_state, self.ref_params, batch)
            params, opt_state = self.place(params), self.place(opt_state)
            checks.append((aux.pop("nonfinite"), aux["loss"]))
        aux, checks = parallel.to_host((aux, checks))
        for epoch, (nonfinite, loss) in enumerate(checks):
            if nonfinite:  # the library's policy: the update was skipped, training stops
                raise TrainingError(
                    f"{cfg.method}: the loss or gradient at step {step + 1} (update {epoch + 1} "
                    f"of {t.ppo_epochs}) is not finite (loss {float(loss)}); the update was "
                    "skipped and training stopped"
                )
        metrics.update({k: float(v) for k, v in aux.items()})
        metrics["seconds"] = time.perf_counter() - t0
        return TrainState(step=step + 1, params=params, opt_state=opt_state), metrics

    # ---- evaluation --------------------------------------------------------------------------

    def evaluate(
        self,
        params,
        backbones: Sequence[Backbone] | None = None,
        *,
        seed_offset: int = 10_000,
        with_samples: bool = False,
    ):
        """Held-out metrics (see :mod:`fidia_jax.projects.fidia._evaluate`) of ``params``.

        The evaluation key depends only on ``config.seed`` (paired comparison before/after and
        across methods).

        Returns:
          ``{"per_backbone": [...], "summary": {...}, "by_kind": {kind: summary}}``.
        """
        return evaluate_params(
            self,
            params,
            self.eval_backbones if backbones is None else backbones,
            seed_offset=seed_offset,
            with_samples=with_samples,
        )


def evaluate_params(
    trainer: Trainer,
    params,
    backbones: Sequence[Backbone],
    *,
    seed_offset: int = 10_000,
    with_samples: bool = False,
):
    """Samples ``eval.n_samples`` per backbone with ``params`` and computes every metric.

    Backbones go through the trainer's rollout in batches of ``data.batch_backbones`` (the last
    one padded with copies, so every batch has the compiled shape).

    Returns:
      ``{"per_backbone", "summary", "by_kind"}``; with ``with_samples`` also ``"samples"``: per
      backbone, in order, ``(tokens, rewards, passes)`` -- ``(eval.n_samples, length)`` int8,
      ``(eval.n_samples,)`` float32 composite rewards and bool proxy verdicts (not JSON).
    """
    cfg, e = trainer.config, trainer.config.eval
    b = cfg.data.batch_backbones
    key = jax.random.PRNGKey(cfg.seed + seed_offset)
    per, samples = [], []
    for start in range(0, len(backbones), b):
        chunk = list(backbones[start : start + b])
        real = len(chunk)
        chunk = chunk + [chunk[-1]] * (b - real)  # pad the last batch (same compiled shapes)
        stacked, out = trainer.rollout(params, chunk, jax.random.fold_in(key, start), e.n_samples)
        seqs = parallel.to_host(out.sequences)
        rewards, passes = trainer.rewards(chunk, seqs)
        for j in range(real):
            bb = chunk[j]
            L = bb.length
            met = eval_lib.backbone_metrics(
                rewards[j],
                passes[j],
                seqs[j, :, :L],
                bb.native,
                bb.designed_mask,
                bb.fixed,
                ns=e.ns,
                bon_n=e.bon_n,
            )
            best = int(np.argmax(rewards[j]))
            met.update(name=bb.name, kind=bb.kind, length=L, best_reward=float(rewards[j, best]))
            per.append(met)
            samples.append((np.asarray(seqs[j, :, :L], np.int8), rewards[j], passes[j]))
    kinds = sorted({m["kind"] for m in per})
    by_kind = {k: eval_lib.summarise([m for m in per if m["kind"] == k]) for k in kinds}
    out = {"per_backbone": per, "summary": eval_lib.summarise(per), "by_kind": by_kind}
    if with_samples:
        out["samples"] = samples
    return out


def _record_curve(
    trainer: Trainer,
    params,
    step: int,
    workdir: pathlib.Path,
    log,
    result: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluates ``params`` (or takes ``result``, which must hold samples), saves the samples
    to ``samples/step_<step>.npz`` (``names`` and, per backbone ``i``, ``seqs_i`` / ``rewards_i``
    / ``passes_i``) and appends the metrics to ``eval_curve.jsonl`` (``log``)."""
    result = result if result is not None else trainer.evaluate(params, with_samples=True)
    if log is not None:
        folder = workdir / "samples"
        folder.mkdir(exist_ok=True)
        names = [m["name"] for m in result["per_backbone"]]
        tmp = folder / f".step_{step:06d}.npz"
        arrays = {}
        for i, (seqs, rewards, passes) in enumerate(result["samples"]):
            arrays.update({f"seqs_{i}": seqs, f"rewards_{i}": rewards, f"passes_{i}": passes})
        np.savez_compressed(tmp, names=np.asarray(names), **arrays)
        os.replace(tmp, folder / f"step_{step:06d}.npz")
        row = {"step": step, **{k: result[k] for k in ("summary", "by_kind", "per_backbone")}}
        log.write(json_text(row) + "\n")
        log.flush()
    return result


def _same_config(previous: dict[str, Any], config: FidiaConfig) -> bool:
    """``config.json`` of an earlier run describes ``config`` (fields added since: defaults)."""
    try:
        return config_from_dict(previous) == config
    except ConfigError:
        return False


def stage_if(description: str, show: bool):
    """:func:`fidia_jax.train.stage` when ``show`` (the run prints), else nothing."""
    return train.stage(description) if show else contextlib.nullcontext()


def reward_metrics(rewards_BxN: np.ndarray, k: int) -> dict[str, float]:
    """The reward entries of a training step's metrics, with the missing rewards counted.

    A non-finite reward is a missing sample (the rule of :mod:`fidia_jax.rl`): the advantages
    exclude it, and so do these means, so ``reward_mean`` stays a mean of real rewards and
    ``rewards_missing`` says how many were left out (a run where half the rewards were NaN
    does not look clean).

    Args:
      rewards_BxN: ``(B, N)`` float rewards of one step (``B`` backbones, ``N`` samples).
      k: the Best-of-k of ``max@k``.

    Returns:
      ``reward_mean`` (mean of the finite rewards), ``reward_max`` (mean over backbones with a
      finite reward of their best one), ``max@k`` (:func:`_evaluate.max_at_n`, ``nan`` when no
      backbone has ``k`` finite rewards), ``rewards_missing`` (count) and ``rewards_total``.
      Means over no finite reward are ``nan``.
    """
    rewards_BxN = np.asarray(rewards_BxN, np.float64)
    finite = np.isfinite(rewards_BxN)
    kept = np.where(finite, rewards_BxN, np.nan)
    rows = finite.any(axis=1)
    best = [float(np.max(r[np.isfinite(r)])) for r in kept[rows]]
    at_k = [
        eval_lib.max_at_n(r[np.isfinite(r)], k) for r in rewards_BxN if np.isfinite(r).sum() >= k
    ]
    return {
        "reward_mean": float(kept[finite].mean()) if finite.any() else float("nan"),
        "reward_max": float(np.mean(best)) if best else float("nan"),
        f"max@{k}": float(np.mean(at_k)) if at_k else float("nan"),
        "rewards_missing": int((~finite).sum()),
        "rewards_total": int(finite.size),
    }


def headline(
    config: FidiaConfig,
    before: dict | None,
    after: dict,
    history: Sequence[dict[str, float]] = (),
) -> dict[str, Any]:
    """The numbers of ``summary.json``: the method, its steps, the success criteria
    (``reward.criteria``), the evaluation summaries (max@N, success and precision,
    identity, recovery ...) before and after training, and the training rewards that were
    missing (non-finite, excluded) over the steps of ``history`` (the run's ``metrics.jsonl``
    rows, resumed steps included)."""
    return {
        "method": config.method,
        "num_steps": 0 if config.method == "bon" else config.train.num_steps,
        "num_eval_backbones": len(after["per_backbone"]),
        "criteria": config.reward.criteria,
        "training_rewards_missing": int(sum(h.get("rewards_missing", 0) for h in history)),
        "training_rewards_total": int(sum(h.get("rewards_total", 0) for h in history)),
        "before": None if before is None else before["summary"],
        "after": after["summary"],
    }


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
    ``checkpoints/<step>/`` (orbax, :class:`fidia_jax.train.Checkpointer`),
    ``eval_before.json`` / ``eval_after.json``, ``summary.json`` (:func:`headline`), with
    ``eval.every > 0`` also ``eval_curve.jsonl`` and ``samples/step_<step>.npz`` (held-out
    evaluations during training, see :class:`~fidia_jax.projects.fidia.EvalConfig`),
    ``training.png`` and ``max_at_n.png``. The batch is split over every visible device
    (:func:`fidia_jax.parallel.data_mesh`); under a multi-host launcher every process runs this
    function and process 0 writes the files. With ``progress`` the stages (loading and reward
    calibration, evaluations) and a :class:`fidia_jax.train.FitProgress` bar (compilation, then
    steps/s, reward, max@k, KL and ETA) go to stderr.

    Args:
      config: the run configuration.
      workdir: output directory (created).
      resume: continue from the newest complete checkpoint in ``workdir`` when there is one
        (newer incomplete step folders, e.g. left by a save killed before it wrote, are removed
        with a warning); ``False`` deletes the checkpoints and cached evaluation of a previous
        run in ``workdir``.
      progress: show the stages and the progress bar.
      trainer: a prepared :class:`Trainer` (tests reuse one; built from ``config`` otherwise).
      on_step: called after each step with ``(step, metrics)``.

    Returns:
      ``{"config", "final_step", "before", "after", "params"}`` (``before`` is ``None`` when
      ``eval.before_training`` is false; ``params`` is the trained pure-dict parameter tree).

    Raises:
      ConfigError, DataError, CheckpointError: bad config, missing data, unusable checkpoint.
      TrainingError: a non-finite loss or gradient (the update is skipped and the run stops,
        the library's policy, see :mod:`fidia_jax.train`); the files written so far stay
        consistent (the last checkpoint is the last finite state).
    """
    parallel.initialize_distributed()
    workdir = pathlib.Path(workdir)
    primary = parallel.is_primary()
    show = progress and primary
    cfg_path = workdir / "config.json"
    if resume and cfg_path.is_file() and not _same_config(json.loads(cfg_path.read_text()), config):
        raise CheckpointError(
            f"{workdir}: holds a run with a different config; use a new workdir or resume=False"
        )
    # Build the trainer (loads data and weights) before touching the workdir, so bad input
    # leaves nothing behind.
    if trainer is None:
        m = config.model
        with stage_if(
            f"{config.method}: loading ProteinMPNN {m.checkpoint}, backbones, judges; "
            "calibrating rewards",
            show,
        ):
            trainer = Trainer(config)
    if trainer.config != config:
        raise CheckpointError("train_and_evaluate: trainer was built for a different config")
    if primary:
        workdir.mkdir(parents=True, exist_ok=True)
        if not resume:  # start over: old checkpoints and the cached "before" evaluation go
            shutil.rmtree(workdir / "checkpoints", ignore_errors=True)
            (workdir / "eval_before.json").unlink(missing_ok=True)
        train.write_json(cfg_path, config_to_dict(config))
    parallel.sync("fidia:workdir")
    t = config.train
    num_steps = 0 if config.method == "bon" else t.num_steps
    n_eval = len(trainer.eval_backbones)

    state = trainer.init_state()
    checkpoints = ckpt.checkpointer(workdir, config)
    latest = checkpoints.latest_step(remove_incomplete=primary) if resume else None
    if latest is not None:
        state = trainer.place(ckpt.restore(checkpoints, latest, state))
    start = state.step
    metrics_path = workdir / "metrics.jsonl"
    history = [m for m in _read_jsonl(metrics_path) if m["step"] < start]
    if primary:
        atomic_write_text(metrics_path, "".join(json_text(m) + "\n" for m in history))

    before = None
    if config.eval.before_training:
        before_path = workdir / "eval_before.json"
        if before_path.is_file():
            before = json.loads(before_path.read_text())
        else:
            with stage_if(f"evaluating the reference policy on {n_eval} backbone(s)", show):
                before = trainer.evaluate(trainer.ref_params)
            if primary:
                train.write_json(before_path, before)

    every = config.eval.every
    curve_path = workdir / "eval_curve.jsonl"
    curve_done = (
        {c["step"] for c in _read_jsonl(curve_path) if c["step"] <= start} if every else set()
    )
    if primary and every:  # lines past the restored step belong to a run that did not save them
        atomic_write_text(
            curve_path,
            "".join(
                json_text(c) + "\n" for c in _read_jsonl(curve_path) if c["step"] in curve_done
            ),
        )
    log_file = metrics_path.open("a") if primary else contextlib.nullcontext()
    curve_file = curve_path.open("a") if primary and every else contextlib.nullcontext()
    try:
        with log_file as log, curve_file as curve_log:
            if every and start < num_steps and start % every == 0 and start not in curve_done:
                _record_curve(trainer, state.params, start, workdir, curve_log)
            bar = None
            if start < num_steps:
                bar = train.FitProgress(
                    config.method,
                    num_steps,
                    start,
                    show=("reward_mean", f"max@{t.k_bon}", "kl", "rewards_missing"),
                    quiet=not progress,  # process i > 0: one status line at the end
                )
            try:
                while state.step < num_steps:
                    state, metrics = trainer.step(state)
                    if state.step == start + 1:
                        bar.compiled()
                    if log is not None:
                        log.write(json_text(metrics) + "\n")
                        log.flush()
                    history.append(metrics)
                    if state.step % t.checkpoint_every == 0 or state.step == num_steps:
                        ckpt.save(checkpoints, state)
                    bar.update(state.step, metrics)
                    if on_step is not None:
                        on_step(metrics["step"], metrics)
                    if every and state.step % every == 0 and state.step < num_steps:
                        _record_curve(trainer, state.params, state.step, workdir, curve_log)
            finally:
                if bar is not None:
                    last = history[-1] if history else {}
                    missing = sum(h.get("rewards_missing", 0) for h in history)
                    total = sum(h.get("rewards_total", 0) for h in history)
                    bar.close(
                        f"reward {last['reward_mean']:+.3f}, max@{t.k_bon} "
                        f"{last[f'max@{t.k_bon}']:+.3f} at step {state.step}"
                        + (
                            f"; {missing} of {total} rewards missing (non-finite)"
                            if missing
                            else ""
                        )
                        if "reward_mean" in last
                        else None
                    )
            with stage_if(f"evaluating the {config.method} policy on {n_eval} backbone(s)", show):
                after = trainer.evaluate(state.params, with_samples=bool(every))
            if every and num_steps not in curve_done:
                _record_curve(trainer, state.params, num_steps, workdir, curve_log, result=after)
            after.pop("samples", None)
    finally:
        checkpoints.close()

    if primary:
        train.write_json(workdir / "eval_after.json", after)
        train.write_summary(workdir, headline(config, before, after, history))
        if history:
            plot_training(history, workdir / "training.png", k_bon=t.k_bon)
        curves = {"after" if before is not None else config.method: after["summary"]}
        if before is not None:
            curves = {"before (reference)": before["summary"], **curves}
        plot_max_at_n(curves, config.eval.ns, workdir / "max_at_n.png")
    return {
        "config": config,
        "final_step": num_steps,
        "before": before,
        "after": after,
        "params": state.params,
    }
