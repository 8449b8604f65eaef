"""The pieces of one FIDIA training step: state, schedule, jitted rollout, update batch, update.

Pure functions of explicit state, compiled once per shape; :class:`~fidia_jax.projects.fidia.Trainer`
strings them together and places their inputs on the device mesh.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import models, rl, train
from fidia_jax.models.proteinmpnn import inference_jit
from fidia_jax.projects.fidia import _advantages as adv_lib
from fidia_jax.projects.fidia._policy import omit_mask, policy_loss, policy_token_log_probs
from fidia_jax.projects.fidia.configs import FidiaConfig

__all__ = [
    "TrainState",
    "make_optimizer",
    "make_reference_log_probs",
    "make_update",
    "rollout",
    "schedule",
    "update_batch",
]


class TrainState(NamedTuple):
    """What a checkpoint restores: the next step to run, the policy and the adamw state.

    Attributes:
      step: number of update steps already taken (python ``int``; the orbax step directory).
      params: the policy's pure-dict parameter tree (``nnx.to_pure_dict`` layout).
      opt_state: the optax state of :func:`make_optimizer` for ``params``.
    """

    step: int
    params: Any
    opt_state: Any


def schedule(step: int, num_tasks: int, batch: int, seed: int) -> np.ndarray:
    """Training-backbone indices of ``step``: epoch-wise permutations, a pure function of step.

    Returns:
      ``(batch,)`` int64 indices into the ``num_tasks`` training backbones; flat position
      ``step * batch + j`` is position ``pos`` of epoch ``epoch``, whose permutation is seeded by
      ``(seed, epoch)``.
    """
    out = []
    for j in range(batch):
        flat = step * batch + j
        epoch, pos = divmod(flat, num_tasks)
        perm = np.random.default_rng([seed, epoch]).permutation(num_tasks)
        out.append(int(perm[pos]))
    return np.asarray(out, np.int64)


@functools.partial(
    inference_jit, static_argnames=("graphdef", "num_samples", "temperature", "omit_aas")
)
def rollout(graphdef, state, keys_B, inputs_B, fixed_BxL, *, num_samples, temperature, omit_aas):
    """``B`` backbones x ``num_samples`` sequences; returns a batched ``SampleResult``.

    One jitted program, compiled with ProteinMPNN's inference options at the top level
    (:func:`fidia_jax.models.proteinmpnn.inference_jit`).

    Args:
      graphdef / state: the split ProteinMPNN (``state`` a pure-dict or ``nnx.State``).
      keys_B: ``(B, 2)`` uint32 PRNG keys, one per backbone.
      inputs_B: batched :class:`fidia_jax.models.MPNNInputs`, leading ``(B, L)``.
      fixed_BxL: ``(B, L)`` bool, positions that keep their native token.
    """
    model = nnx.merge(graphdef, state)

    def one(key, inputs, fixed):
        return models.sample(
            model,
            key,
            inputs,
            num_samples=num_samples,
            temperature=temperature,
            fixed_mask=fixed,
            omit_aas=omit_aas,
        )

    return jax.vmap(one)(keys_B, inputs_B, fixed_BxL)


def _optimizer(learning_rate: float, weight_decay: float, grad_clip: float):
    adamw = optax.adamw(learning_rate, weight_decay=weight_decay)
    if grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(grad_clip), adamw)
    return adamw


def make_optimizer(config: FidiaConfig) -> optax.GradientTransformation:
    """adamw with global-norm clipping (``train.grad_clip <= 0`` disables clipping)."""
    t = config.train
    return _optimizer(t.learning_rate, t.weight_decay, t.grad_clip)


def make_update(graphdef, config: FidiaConfig):
    """The jitted adamw step of ``config.method``: ``update(params, opt_state, ref_params, batch)
    -> (params, opt_state, metrics)``.

    One :func:`fidia_jax.train.make_train_step` step of the method's loss (the frozen reference
    rides in the batch, so one compiled step serves every reference; the step is not donated
    and follows the placement of its inputs, replicated or FSDP as ``train.param_sharding``
    says). FIDIA / RLOO / GRPO read the reference's token log-probabilities from
    ``batch["ref"]`` when the caller put them there (the trainer does, once per training step,
    with :func:`make_reference_log_probs`); without it the step computes them itself from
    ``ref_params``, as part of the same program. ``metrics`` holds ``loss``, ``grad_norm``,
    ``nonfinite`` (``1``: the update was skipped, the library's non-finite policy) and the
    loss's aux terms. FIDIA, RLOO and GRPO differ only in the advantages fed to the step, so
    they share one compiled function (cached on the hyperparameters the step reads).
    """
    t, m = config.train, config.model
    return _build_update(
        graphdef,
        config.method == "dpo",
        m.temperature,
        m.omit_aas,
        t.dpo_beta,
        t.beta_kl,
        t.clip_eps,
        t.learning_rate,
        t.weight_decay,
        t.grad_clip,
    )


@functools.lru_cache(maxsize=16)
def _build_update(
    graphdef,
    is_dpo,
    temperature,
    omit,
    dpo_beta,
    beta_kl,
    clip_eps,
    learning_rate,
    weight_decay,
    grad_clip,
):
    tx = _optimizer(learning_rate, weight_decay, grad_clip)
    batch_logp = _token_log_probs(graphdef, temperature, omit)

    def token_logp(params, batch):
        return batch_logp(params, batch["inputs"], batch["seqs"], batch["orders"])

    def loss_fn(params, batch):
        logp = token_logp(params, batch)
        if not is_dpo and "ref" not in batch:  # DPO's batch["ref"] is the sampler's, exact
            ref = token_logp(batch["ref_params"], batch)
            batch = dict(batch, ref=jax.lax.stop_gradient(ref))
        if is_dpo:
            loss_b, aux = jax.vmap(functools.partial(rl.dpo_sequence_loss, beta=dpo_beta))(
                logp, batch["ref"], batch["designed"], batch["valid"]
            )
        else:
            loss_b, aux = jax.vmap(
                functools.partial(policy_loss, beta_kl=beta_kl, clip_eps=clip_eps)
            )(logp, batch["old"], batch["ref"], batch["adv"], batch["designed"])
        return jnp.mean(loss_b), jax.tree.map(jnp.mean, aux)

    step = train.make_train_step(loss_fn, tx, has_aux=True, donate=False)

    def update(params, opt_state, ref_params, batch):
        state = train.TrainState(jnp.zeros((), jnp.int32), params, opt_state)
        state, metrics = step(state, dict(batch, ref_params=ref_params))
        return state.params, state.opt_state, metrics

    return update


def make_reference_log_probs(graphdef, config: FidiaConfig):
    """The frozen reference's tempered token log-probabilities of a batch, a forward-only
    program: ``reference(ref_params, inputs_B, seqs_BxNxL, orders_BxNxL) -> (B, N, L)`` float32.

    The same :func:`policy_token_log_probs` that :func:`make_update` evaluates for the policy,
    compiled on its own with ProteinMPNN's inference options
    (:func:`fidia_jax.models.proteinmpnn.inference_jit`): the trainer calls it once per training
    step and hands the result to every PPO epoch's update as ``batch["ref"]``, instead of a
    reference forward inside each update under the training program's XLA defaults (slower
    by the ``reference forward`` rows of ``benchmarks/fidia_update_profile.py``). The two
    programs differ by float rounding only
    (``tests/projects/fidia/test_train.py::test_reference_program_feeds_the_update``).
    """
    m = config.model
    return _build_reference(graphdef, m.temperature, m.omit_aas)


@functools.lru_cache(maxsize=16)
def _build_reference(graphdef, temperature, omit):
    return inference_jit(_token_log_probs(graphdef, temperature, omit))


def _token_log_probs(graphdef, temperature, omit):
    """``(params, inputs_B, seqs_BxNxL, orders_BxNxL) -> (B, N, L)``: the tempered token
    log-probabilities the update computes for the policy and the reference program for the
    reference (:func:`policy_token_log_probs`)."""

    def token_log_probs(params, inputs_B, seqs_BxNxL, orders_BxNxL):
        return policy_token_log_probs(
            nnx.merge(graphdef, params), inputs_B, seqs_BxNxL, orders_BxNxL,
            temperature=temperature, omit_21=omit_mask(omit),
        )  # fmt: skip

    return token_log_probs


def update_batch(
    config: FidiaConfig,
    rewards_BxN: np.ndarray,
    seqs_BxNxL: np.ndarray,
    orders_BxNxL: np.ndarray,
    designed_BxNxL: np.ndarray,
    sample_logp_BxNxL: np.ndarray,
) -> dict[str, np.ndarray]:
    """The host arrays one update step reads (``inputs`` excluded).

    FIDIA / RLOO / GRPO: every sample with its advantage (``adv`` ``(B, N)``) and the sampler's
    token log-probabilities (``old``). DPO: the best / worst sample of each group
    (``(B, 2, L)``), their reference log-probabilities (``ref``) and ``valid`` ``(B,)``.
    """
    t = config.train
    if config.method == "dpo":
        chosen, rejected, valid = jax.vmap(rl.dpo_pair)(jnp.asarray(rewards_BxN))
        pick = np.stack([np.asarray(chosen), np.asarray(rejected)], axis=1)[:, :, None]  # (B,2,1)
        return {
            "valid": np.asarray(valid, np.float32),
            "seqs": np.take_along_axis(seqs_BxNxL, pick, axis=1),
            "orders": np.take_along_axis(orders_BxNxL, pick, axis=1),
            "designed": np.take_along_axis(designed_BxNxL, pick, axis=1),
            "ref": np.take_along_axis(sample_logp_BxNxL, pick, axis=1),
        }
    adv = _batched_advantages(config.method, t.k_bon, t.grpo_eps, t.fidia_group_norm)(
        jnp.asarray(rewards_BxN)
    )
    return {
        "adv": np.asarray(adv, np.float32),
        "seqs": seqs_BxNxL,
        "orders": orders_BxNxL,
        "designed": designed_BxNxL,
        "old": sample_logp_BxNxL,
    }


@functools.lru_cache(maxsize=16)
def _batched_advantages(method: str, k: int, grpo_eps: float, fidia_group_norm: bool):
    """The jitted, backbone-vmapped advantages of ``method`` (compiled once per setting)."""
    return jax.jit(
        jax.vmap(
            functools.partial(
                adv_lib.advantages,
                method,
                k=k,
                grpo_eps=grpo_eps,
                fidia_group_norm=fidia_group_norm,
            )
        )
    )
