"""ProteinMPNN inference: teacher-forced log-probabilities, scoring and the autoregressive sampler."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.models._domain import check_permutations, check_temperature, check_token_ids
from fidia_jax.models.proteinmpnn._compile import inference_jit
from fidia_jax.models.proteinmpnn._draws import _check_pssm, _draw, _pssm_rows, _token_noise
from fidia_jax.models.proteinmpnn._inputs import MPNNInputs, canonical, check_inputs, omit_mask
from fidia_jax.models.proteinmpnn._model import ProteinMPNN
from fidia_jax.models.proteinmpnn._tied import (
    check_tied_design,
    group_decoding_order,
    group_sizes_and_members,
    tied_group_ids,
)


def log_probs(model: ProteinMPNN, inputs: MPNNInputs, decoding_order) -> jax.Array:
    """Teacher-forced log-probabilities, the original ``ProteinMPNN.forward``.

    Args:
      model: a :class:`ProteinMPNN`.
      inputs: batched :class:`MPNNInputs` (leading axis ``B``); ``inputs.S`` is the sequence
        teacher-forced into the decoder.
      decoding_order: ``(B, L)`` int32 permutation; ``decoding_order[b, t]`` is the position
        decoded at step ``t``.

    Returns:
      ``(B, L, 21)`` float32 log-softmax. Rows with ``mask == 0`` equal
      ``log_softmax(W_out.bias)``.

    Raises:
      ValueError: inconsistent shapes; a token id of ``inputs.S`` outside ``[0, 21)`` (``21``
        would score NaN, ``-1`` would wrap around to ``X``); a row of ``decoding_order`` that is
        not a permutation of ``0 .. L - 1``. Under tracing (this function called inside ``jit``)
        nothing can raise: an out-of-range id reads a NaN embedding (the log-probs of the
        positions that see it are NaN) and a row that is not a permutation is all NaN.

    The forward is ``jax.jit``-compiled (one compilation per input shape) and differentiable
    with respect to the model's parameters, e.g. inside ``nnx.value_and_grad``::

        loss = lambda m: -log_probs(m, inputs, order)[..., 0].mean()
        value, grads = nnx.jit(nnx.value_and_grad(loss))(model)
    """
    check_inputs(inputs, batched=True)
    if jnp.shape(decoding_order) != inputs.S.shape:
        raise ValueError(
            f"decoding_order must have shape {inputs.S.shape}, got {jnp.shape(decoding_order)}"
        )
    check_token_ids(inputs.S, model.vocab, name="inputs.S", where="log_probs")
    check_permutations(decoding_order, name="decoding_order", where="log_probs")
    graphdef, state = nnx.split(model)
    return _forward_jit(graphdef, state, canonical(inputs), jnp.asarray(decoding_order, jnp.int32))


@functools.partial(inference_jit, static_argnums=0)
def _forward_jit(graphdef, state, inputs, decoding_order):
    return nnx.merge(graphdef, state)(inputs, decoding_order)


@functools.partial(inference_jit, static_argnums=0)
def _score_jit(graphdef, state, inputs, sequences_NxL, order_NxL):
    batched = jax.tree.map(lambda a: a[None], inputs)
    return nnx.merge(graphdef, state).log_probs_many(batched, sequences_NxL[None], order_NxL[None])[
        0
    ]


def random_decoding_order(key: jax.Array, design_mask_xL: jax.Array) -> jax.Array:
    """The original's random order: ``argsort((design_mask + 1e-4) * |randn|)``.

    Positions with ``design_mask == 0`` (visible, fixed or missing) come first in random order,
    then the designed ones in random order.

    Args:
      key: PRNG key.
      design_mask_xL: ``(..., L)`` float, 1.0 = designed.

    Returns:
      ``(..., L)`` int32 permutation.
    """
    randn = jax.random.normal(key, design_mask_xL.shape, jnp.float32)
    return jnp.argsort(
        (design_mask_xL.astype(jnp.float32) + 1e-4) * jnp.abs(randn), axis=-1
    ).astype(jnp.int32)


class ScoreResult(NamedTuple):
    """Output of :func:`score`.

    Attributes:
      token_log_probs: ``(N, L)`` float32, ``log p(s_i | context)`` of each given token.
      nll: ``(N,)`` float32, mean ``-token_log_probs`` over positions with
        ``mask * chain_mask == 1`` (the original ``_scores``).
      decoding_order: ``(N, L)`` int32, the order used.
      log_probs: ``(N, L, 21)`` float32, the full teacher-forced log-softmax.
    """

    token_log_probs: jax.Array
    nll: jax.Array
    decoding_order: jax.Array
    log_probs: jax.Array


def score(
    model: ProteinMPNN, inputs: MPNNInputs, sequences, decoding_order, *, tied=None
) -> ScoreResult:
    """Teacher-forced log-likelihood of ``sequences`` on one structure.

    Args:
      model: a :class:`ProteinMPNN`.
      inputs: unbatched :class:`MPNNInputs` (the structure; ``inputs.S`` is ignored; the encoder
        then runs once for all ``N`` sequences), or batched with leading axis ``N`` (one
        structure per sequence).
      sequences: ``(N, L)`` int32 tokens in ``[0, 21)``.
      decoding_order: ``(N, L)`` int32 permutations, or a PRNG key to draw the original's random
        order (visible / missing positions first) per sequence.
      tied: optional tying, as in :func:`sample`: a ``(L,)`` int group-id array (``-1`` =
        untied) or a list of slot-index groups. The order is regrouped as the sampler does
        (each group at the place of its first member in ``decoding_order``) and every member
        is scored in the sampler's context for it: the slots decoded before its group, none of
        its own group. A member's distribution is then the group's,
        ``log_softmax(mean over members of log_probs)`` (= the softmax of the averaged logits),
        and ``token_log_probs`` / ``log_probs`` report it at every member (so a group of ``k``
        designed slots counts ``k`` times in ``nll``). This costs one teacher-forced pass per
        member rank (the largest group size), member ``m`` of each group going first in pass
        ``m``. With ``tied`` the returned ``decoding_order`` is the regrouped one.

    Returns:
      :class:`ScoreResult`.

    Raises:
      ValueError: inconsistent shapes; a token id outside ``[0, 21)``; a row of
        ``decoding_order`` that is not a permutation. Under tracing nothing can raise: an
        out-of-range id scores NaN (and so does every position that sees it), a row that is not
        a permutation is all NaN.
    """
    sequences = check_token_ids(
        jnp.asarray(sequences, jnp.int32), model.vocab, name="sequences", where="score"
    )
    if sequences.ndim != 2:
        raise ValueError(f"sequences must be (N, L), got {sequences.shape}")
    n, length = sequences.shape
    batched = inputs.X.ndim == 4
    check_inputs(inputs, batched=batched)
    lead = inputs.S.shape[:1] if batched else (n,)
    if lead + inputs.S.shape[-1:] != (n, length):
        raise ValueError(
            f"inputs have length {inputs.S.shape[-1]} (batch {lead}), sequences {sequences.shape}"
        )
    design = jnp.broadcast_to(
        jnp.asarray(inputs.mask, jnp.float32) * jnp.asarray(inputs.chain_mask, jnp.float32),
        (n, length),
    )
    order = jnp.asarray(decoding_order)
    if jnp.issubdtype(order.dtype, jax.dtypes.prng_key) or (
        order.dtype == jnp.uint32 and order.shape == (2,)
    ):
        order = random_decoding_order(order, design)
    if order.shape != (n, length):
        raise ValueError(f"decoding_order must be (N, L) = {(n, length)}, got {order.shape}")
    check_permutations(order, name="decoding_order", where="score")
    gid = tied_group_ids(tied, length)
    if gid is not None:
        return _score_tied(model, inputs, sequences, order, gid, design, batched)
    if batched:
        lp = log_probs(model, inputs._replace(S=sequences), order)
    else:  # one structure: run the encoder once, decode the N sequences
        graphdef, state = nnx.split(model)
        lp = _score_jit(graphdef, state, canonical(inputs), sequences, order.astype(jnp.int32))
    tok = jnp.take_along_axis(lp, sequences[..., None], -1)[..., 0]
    nll = -jnp.sum(tok * design, -1) / jnp.sum(design, -1)
    return ScoreResult(token_log_probs=tok, nll=nll, decoding_order=order, log_probs=lp)


def _score_tied(model, inputs, sequences, order, gid, design, batched) -> ScoreResult:
    """:func:`score` with ties: the sampler's scan with the given tokens forced, then the group mean."""
    gid_j = jnp.asarray(gid)
    order = group_decoding_order(order.astype(jnp.int32), gid_j)
    ties = (gid_j, jnp.asarray(group_sizes_and_members(gid)[0]))
    graphdef, state = nnx.split(model)
    if batched:  # one structure per sequence
        rows = [_score_tied_jit(graphdef, state, canonical(jax.tree.map(lambda a, i=i: a[i], inputs)), sequences[i : i + 1], order[i : i + 1], ties)
                for i in range(sequences.shape[0])]  # fmt: skip
        lp = jnp.concatenate(rows)
    else:
        lp = _score_tied_jit(graphdef, state, canonical(inputs), sequences, order, ties)
    # group distribution: log_softmax of the mean member log-softmax (= of the mean logits)
    lp = _tied_mean(lp, gid_j, ties[1])
    tok = jnp.take_along_axis(lp, sequences[..., None], -1)[..., 0]
    nll = -jnp.sum(tok * design, -1) / jnp.sum(design, -1)
    return ScoreResult(token_log_probs=tok, nll=nll, decoding_order=order, log_probs=lp)


@functools.partial(inference_jit, static_argnums=0)
def _score_tied_jit(graphdef, state, inputs, sequences_NxL, order_NxL, ties):
    model: ProteinMPNN = nnx.merge(graphdef, state)
    h_V_enc, E_idx, caches = _decoder_setup(model, inputs)
    design_L = jnp.ones(sequences_NxL.shape[1], jnp.float32)
    omit = jnp.zeros(model.vocab, bool)
    bias = jnp.zeros((sequences_NxL.shape[1], model.vocab), jnp.float32)
    res = _sample_tied(
        model,
        inputs,
        1.0,
        omit,
        bias,
        sequences_NxL.shape[0],
        None,  # no noise: every token is forced
        order_NxL,
        design_L,
        caches,
        h_V_enc,
        E_idx,
        ties,
        forced_NxL=sequences_NxL,
    )
    return res.log_probs


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------


class SampleResult(NamedTuple):
    """Output of :func:`sample`.

    Attributes:
      sequences: ``(N, L)`` int32 sampled tokens (native tokens at fixed / visible / missing
        positions).
      decoding_order: ``(N, L)`` int32, position decoded at each step.
      log_probs: ``(N, L, 21)`` float32, the model's log-softmax at temperature 1 (no bias, no
        omission) at each position in its decoding context; equals :func:`log_probs` of
        ``sequences`` with ``decoding_order``.
      token_log_probs: ``(N, L)`` float32, ``log_probs`` at the chosen token.
      native_token_log_probs: ``(N, L)`` float32 with ``sample(..., score_native=True)``: the
        native sequence ``inputs.S`` scored teacher-forced under each sample's decoding order
        (the ``token_log_probs`` of :func:`score` with the same order and ``tied``); else
        ``None``.
    """

    sequences: jax.Array
    decoding_order: jax.Array
    log_probs: jax.Array
    token_log_probs: jax.Array
    native_token_log_probs: jax.Array | None = None


def sample(
    model: ProteinMPNN,
    key: jax.Array,
    inputs: MPNNInputs,
    *,
    num_samples: int,
    temperature: float = 0.1,
    fixed_mask=None,
    omit_aas: str = "X",
    bias=None,
    tied=None,
    score_native: bool = False,
    pssm=None,
) -> SampleResult:
    """Draw sequences autoregressively in random decoding orders (the original ``sample``).

    One jitted function: the encoder runs once, then a ``lax.scan`` over the ``L`` decoding
    steps updates, per decoder layer, only the current position's row of a cached node state
    (as the original's ``h_V_stack``), for ``num_samples`` samples at once. Each sample gets its
    own random order in which non-designed positions (visible chains, ``fixed_mask``, missing
    residues) come first. Recompiles only when ``L`` or ``num_samples`` changes.

    Sampling math: ``p = softmax((logits + bias) / T)`` over non-omitted tokens (the original
    subtracts 1e8 from omitted logits; we use -inf). ``SampleResult.log_probs`` is the unbiased
    ``T = 1`` log-softmax.

    Implementation note (exact algebra, different float rounding): the decoder's first linear
    layer acts on ``[h_i, h_E_ij, h_S_j, h_j]``; we split its kernel into the four row blocks,
    precompute the edge and token parts once per structure, cache decoded node states already
    projected through the next layer's neighbour block, and use
    ``sum_j (g_j W3 + b3) = (sum_j g_j) W3 + K b3`` (the decoder has no attention mask); each
    step is :meth:`DecLayer.step` per layer (:meth:`DecLayer.step_cache`, :meth:`DecLayer.project`).
    Agreement with the teacher-forced forward is ~1e-5.

    Args:
      model: a :class:`ProteinMPNN`.
      key: PRNG key.
      inputs: unbatched :class:`MPNNInputs` (``(L, 4, 3)`` ...).
      num_samples: ``N``.
      temperature: ``T > 0`` (scalar; traced, changing it does not recompile). A concrete
        ``T <= 0`` or NaN (``0.0``, ``np.float32(0)``, ``jnp.array(-0.1)``) raises. When ``T``
        itself is traced (``sample`` called inside ``jit`` with ``T`` an argument), ``T <= 0``
        or NaN cannot raise and is taken as the ``T -> 0+`` limit: the greedy choice
        ``argmax(logits + bias)`` over the allowed tokens.
      fixed_mask: ``(L,)`` bool; these positions keep ``inputs.S`` (decoded first).
      omit_aas: letters never sampled (default ``"X"``).
      bias: ``(21,)`` or ``(L, 21)`` additive logit bias (divided by ``T`` like the logits).
      tied: optional tied positions: a ``(L,)`` int group-id array (``-1`` = untied; slots
        sharing an id ``>= 0`` are tied) or a list of slot-index groups, e.g.
        ``[[0, 50], [1, 51]]``. Each group gets ONE draw, the same token at every member.
        See "Tied positions" below.
      score_native: also score the native sequence ``inputs.S`` under each sample's decoding
        order (``SampleResult.native_token_log_probs``) in the same compiled program: the
        decoding loop runs ``N`` more rows whose tokens are forced to the native ones (one
        compilation instead of a sampler and a scorer; the sampled rows, their order and noise
        are those of ``score_native=False``). Equals :func:`score` of ``inputs.S`` with
        ``decoding_order`` and ``tied`` up to float rounding (the loop's per-step arithmetic,
        about 1e-5).
      pssm: optional position-specific mixing, the original's ``--pssm_bias_flag`` /
        ``--pssm_log_odds_flag`` step: a tuple ``(mix_L, probs_Lx21, scale_Lx21)`` of float32
        arrays, ``(L,)``, ``(L, 21)``, ``(L, 21)``. At a drawn position ``i`` the sampling
        distribution ``p = softmax((logits + bias) / T)`` (omitted letters removed) becomes
        ``p' ∝ ((1 - mix_i) p + mix_i probs_i) * scale_i``: ``mix = pssm_multi * pssm_coef``
        and ``probs = pssm_bias`` of the original, ``scale`` its log-odds mask
        ``(log_odds > threshold) + 0.001`` times any per-residue omission ``(1 - omit)``
        (ones when unused). ``omit_aas`` letters get probability 0 after the mix as well.
        ``mix`` must lie in ``[0, 1]``, ``probs`` and ``scale`` must be finite and ``>= 0``,
        and every row must keep some letter allowed. ``None`` (default) leaves the draw, and
        the random stream, exactly as without it. In a tied group the row of its last member
        (as ``bias``) applies.

    Tied positions (the original ``ProteinMPNN.tied_sample``, with ``tied_beta = 1``):

    * Order: each sample's random order is drawn as without ties, then every group is moved to
      the place of its member that comes first, its members decoded consecutively (in ascending
      slot order; the original: in the order its ``tied_pos`` list gives them, the same for the
      lists its helper scripts write). ``SampleResult.decoding_order`` is this grouped order.
    * Draw: the decoder runs at every member, then one token is drawn from
      ``softmax((mean_m logits_m + bias_last) / T)`` (omitted letters removed), where the mean
      is over the group's members with equal weights and ``bias_last`` is the bias row of the
      group's last member in the decoding order (the original also reads ``bias_by_res`` at its
      last member). The original sums ``logits_m / T / k``: the same up to float rounding.
    * Deviation: every member is decoded in the context of the slots decoded *before the group*
      (the group's members do not see each other). The original runs the members one after the
      other and lets a later member see the earlier members' decoder states with a zero token
      embedding (their token is not drawn yet); we hide them, so the group's distribution does
      not depend on the order of its members and equals :func:`score` with the same ``tied``.
    * ``SampleResult.log_probs`` stays each slot's own ``T = 1`` log-softmax in that context
      (the group's distribution is ``log_softmax`` of their mean over the members); it then
      differs from :func:`log_probs` of the result, where later members see earlier ones.
    * A group must be all designed or all kept (fixed / visible / missing); a mixed group
      raises (the original takes the token of its last member's kind). A group of size one is
      an untied slot: the result then equals the untied call bitwise, for the same key.

    Returns:
      :class:`SampleResult`.

    Raises:
      ValueError: bad shapes, ``temperature <= 0`` (or NaN, or not a scalar),
        ``num_samples < 1``, unknown letters in ``omit_aas`` or all tokens omitted, a token id
        of ``inputs.S`` outside ``[0, 21)``; a bad ``tied`` (index out of range, a slot in two
        groups, an empty group, a group mixing designed and kept slots). A traced ``inputs.S`` cannot raise: its
        out-of-range ids come back as ``21`` in ``sequences`` and every log-prob is NaN.
    """
    check_inputs(inputs, batched=False)
    length = inputs.S.shape[0]
    if int(num_samples) < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    temperature = check_temperature(temperature, where="sample")
    native_S = check_token_ids(
        jnp.asarray(inputs.S, jnp.int32), model.vocab, name="inputs.S", where="sample"
    )
    omit = omit_mask(omit_aas) > 0
    if fixed_mask is None:
        fixed = np.zeros(length, bool)
    else:
        fixed = jnp.asarray(fixed_mask).astype(bool)
        if fixed.shape != (length,):
            raise ValueError(f"fixed_mask must have shape ({length},), got {fixed.shape}")
    vocab = model.vocab
    if bias is None:
        bias_Lx21 = jnp.zeros((length, vocab), jnp.float32)
    else:
        bias = jnp.asarray(bias, jnp.float32)
        if bias.shape == (vocab,):
            bias_Lx21 = jnp.broadcast_to(bias, (length, vocab))
        elif bias.shape == (length, vocab):
            bias_Lx21 = bias
        else:
            raise ValueError(
                f"bias must have shape ({vocab},) or ({length}, {vocab}), got {bias.shape}"
            )
    gid = tied_group_ids(tied, length)
    ties = None
    if gid is not None:
        design = (
            np.asarray(inputs.mask, np.float32)
            * np.asarray(inputs.chain_mask, np.float32)
            * (1.0 - np.asarray(fixed, np.float32))
        )
        check_tied_design(design, gid)
        ties = (jnp.asarray(gid), jnp.asarray(group_sizes_and_members(gid)[0]))
    if pssm is not None:
        pssm = _check_pssm(pssm, length, vocab, omit)
    graphdef, state = nnx.split(model)
    inputs = canonical(inputs._replace(S=native_S))
    return _sample_jit(
        graphdef, state, key, inputs, temperature, fixed, omit, bias_Lx21, int(num_samples), ties,
        bool(score_native), pssm,
    )  # fmt: skip


@functools.partial(inference_jit, static_argnums=(0, 8, 10))
def _sample_jit(
    graphdef,
    state,
    key,
    inputs,
    temperature,
    fixed_L,
    omit_21,
    bias_Lx21,
    num_samples,
    ties=None,
    native=False,
    pssm=None,
):
    model: ProteinMPNN = nnx.merge(graphdef, state)
    dt = model.dtype
    length = inputs.S.shape[0]
    N = num_samples

    h_V_enc, E_idx, caches = _decoder_setup(model, inputs)
    C = model.hidden_dim
    mask_L = inputs.mask.astype(jnp.float32)
    n_layers = len(caches)

    # ---- per-sample decoding orders ----------------------------------------------------------
    k_order, k_tok = jax.random.split(key)
    design_L = inputs.chain_mask.astype(jnp.float32) * (1.0 - fixed_L.astype(jnp.float32)) * mask_L
    order_NxL = random_decoding_order(k_order, jnp.broadcast_to(design_L, (N, length)))
    noise_LxNx21 = _token_noise(k_tok, length, (N, model.vocab))
    draw_N = None
    if native:  # N more rows, same orders, tokens forced to the native ones
        order_NxL = jnp.concatenate([order_NxL, order_NxL])
        noise_LxNx21 = jnp.concatenate([noise_LxNx21, jnp.zeros_like(noise_LxNx21)], axis=1)
        draw_N = jnp.arange(2 * N) < N
        N = 2 * N
    if ties is not None:
        res = _sample_tied(
            model,
            inputs,
            temperature,
            omit_21,
            bias_Lx21,
            N,
            noise_LxNx21,
            order_NxL,
            design_L,
            caches,
            h_V_enc,
            E_idx,
            ties,
            draw_N=draw_N,
            pssm=pssm,
        )
        return _split_native(res, native, ties)
    rank_NxL = jnp.argsort(order_NxL, axis=-1)

    def step(carry, xs):
        # hP_cache[l-1]: (N, L, C) = W1d^l applied to layer l's input states (rows decoded so far)
        S_NxL, hP_cache, pending = carry
        t, noise_Nx21 = xs
        hP_cache = _write_pending(hP_cache, pending)
        p_N = order_NxL[:, t]
        logits_Nx21, new_hP = _decode_position(
            model,
            caches,
            h_V_enc,
            E_idx,
            mask_L,
            rank_NxL,
            S_NxL,
            hP_cache,
            p_N,
            jnp.broadcast_to(t, (N,)),
        )
        lp_Nx21 = jax.nn.log_softmax(logits_Nx21, -1)
        drawn = _draw(
            noise_Nx21, logits_Nx21 + bias_Lx21[p_N], omit_21, temperature, _pssm_rows(pssm, p_N)
        )
        designed = design_L[p_N] > 0
        if draw_N is not None:
            designed = designed & draw_N
        tok = jnp.where(designed, drawn, inputs.S[p_N].astype(jnp.int32))
        S_NxL = S_NxL.at[jnp.arange(N), p_N].set(tok)
        return (S_NxL, hP_cache, (p_N, tuple(new_hP))), lp_Nx21

    init = (jnp.zeros((N, length), jnp.int32),) + _empty_caches(order_NxL, C, dt, n_layers - 1)
    (S_NxL, _, _), lp_TxNx21 = jax.lax.scan(step, init, (jnp.arange(length), noise_LxNx21))
    return _split_native(_sample_result(inputs, S_NxL, order_NxL, lp_TxNx21), native)


def _split_native(res: SampleResult, native: bool, ties=None) -> SampleResult:
    """The sampled rows of ``res``, with the native rows' token log-probs (``score_native``)."""
    if not native:
        return res
    n = res.sequences.shape[0] // 2
    lp = res.log_probs[n:]
    if ties is not None:  # the group's distribution at every member, as ``score(tied=...)``
        lp = _tied_mean(lp, *ties)
    tok = jnp.take_along_axis(lp, res.sequences[n:, :, None], -1)[..., 0]
    return SampleResult(*(a[:n] for a in res[:4]), native_token_log_probs=tok)


def _tied_mean(lp_NxLx21, gid_L, size_L):
    """Each tied group's distribution at its members: ``log_softmax`` of the members' mean."""
    length = lp_NxLx21.shape[1]
    sums = jax.vmap(lambda a: jax.ops.segment_sum(a, gid_L, num_segments=2 * length))(lp_NxLx21)
    return jax.nn.log_softmax(sums[:, gid_L] / size_L.astype(jnp.float32)[None, :, None], -1)


def _empty_caches(order_NxL, c, dtype, count):
    """The zero decoder caches (``count`` of ``(N, L, c)``) and a pending write of zero rows."""
    n, length = order_NxL.shape
    caches = tuple(jnp.zeros((n, length, c), dtype) for _ in range(count))
    pending = (order_NxL[:, 0], tuple(jnp.zeros((n, c), dtype) for _ in range(count)))
    return caches, pending


def _write_pending(hP_cache, pending):
    """Write the previous step's projected states at their rows: the deferred half of a step.

    Step ``t`` computes the rows of position ``p_N`` for every cache, but the next layer reads
    the same cache later in step ``t``; written there, the write and the read are unordered by
    data, and XLA copies each ``(N, L, C)`` cache at every step to keep the old value readable
    (quadratic in ``L``). Written at the start of step ``t + 1`` instead, every read of the
    cache follows the write, so XLA updates it in place (the compiled HLO is checked by
    ``tests/models/test_proteinmpnn_sampler_hlo.py``). The last step's rows are never read, so
    they are never written.
    """
    p_N, rows_NxC = pending
    n = jnp.arange(p_N.shape[0])
    return tuple(c.at[n, p_N].set(v) for c, v in zip(hP_cache, rows_NxC, strict=True))


def _decoder_setup(model, inputs):
    """Encoder (once) and the per-layer :class:`DecStepCache` shared by all samples and steps."""
    h_V_enc, h_E, E_idx = model.encode(
        inputs.X[None], inputs.mask[None], inputs.residue_idx[None], inputs.chain_encoding[None]
    )
    h_V_enc, h_E, E_idx = h_V_enc[0], h_E[0], E_idx[0]  # (L,C), (L,K,C), (L,K)
    W_s = model.W_s.embedding.get_value().astype(model.dtype)  # (21, C)
    mask_L = inputs.mask.astype(jnp.float32)
    caches = [layer.step_cache(h_E, h_V_enc, W_s, mask_L) for layer in model.decoder_layers]
    return h_V_enc, E_idx, caches


def _decode_position(
    model, caches, h_V_enc, E_idx, mask_L, rank_NxL, S_NxL, hP_cache, p_N, before_N
):
    """Decoder layers at position ``p_N[n]`` of each sample; neighbours of rank ``< before_N[n]`` are decoded.

    Returns the ``(N, 21)`` float32 logits and the next layers' projected states at ``p_N``.
    """
    dt = model.dtype
    layers = list(model.decoder_layers)
    N = p_N.shape[0]
    nb_NxK = E_idx[p_N]
    mask_p = mask_L[p_N]  # (N,)
    bw_NxK = (rank_NxL[jnp.arange(N)[:, None], nb_NxK] < before_N[:, None]).astype(dt) * mask_p[
        :, None
    ].astype(dt)
    fw_NxK = mask_p[:, None].astype(dt) - bw_NxK
    tok_nb_NxK = jnp.take_along_axis(S_NxL, nb_NxK, -1)
    h_p = h_V_enc[p_N]  # (N, C) layer input at the current position
    new_hP = []
    for l, (layer, cache) in enumerate(zip(layers, caches, strict=True)):
        proj = None if l == 0 else hP_cache[l - 1]
        h_p = layer.step(h_p, cache, p_N, nb_NxK, bw_NxK, fw_NxK, tok_nb_NxK, mask_p, proj)
        if l + 1 < len(layers):
            new_hP.append(layers[l + 1].project(h_p))
    return model.W_out(h_p).astype(jnp.float32), new_hP


def _sample_result(inputs, S_NxL, order_NxL, lp_TxNx21) -> SampleResult:
    N, length = S_NxL.shape
    # scan outputs are in decoding-step order; scatter back to positions
    lp_NxLx21 = jnp.zeros((N, length, lp_TxNx21.shape[-1]), jnp.float32)
    lp_NxLx21 = lp_NxLx21.at[jnp.arange(N)[:, None], order_NxL].set(jnp.swapaxes(lp_TxNx21, 0, 1))
    # a traced native token out of [0, 21) (marked 21 by `sample`): every log-prob is NaN
    native_ok = jnp.all(inputs.S < lp_NxLx21.shape[-1])
    lp_NxLx21 = jnp.where(native_ok, lp_NxLx21, jnp.nan)
    tok_lp = jnp.take_along_axis(lp_NxLx21, S_NxL[..., None], -1)[..., 0]
    return SampleResult(
        sequences=S_NxL, decoding_order=order_NxL, log_probs=lp_NxLx21, token_log_probs=tok_lp
    )


def _sample_tied(
    model,
    inputs,
    temperature,
    omit_21,
    bias_Lx21,
    N,
    noise_LxNx21,
    order_NxL,
    design_L,
    caches,
    h_V_enc,
    E_idx,
    ties,
    forced_NxL=None,
    draw_N=None,
    pssm=None,
):
    """The scan of :func:`_sample_jit` with tied groups (see :func:`sample`, "Tied positions").

    ``draw_N`` (optional ``(N,)`` bool): rows that draw; the others keep the native tokens.

    ``noise_LxNx21`` is :func:`_token_noise` by step. With ``forced_NxL`` (and ``noise_LxNx21``
    ``None``) the tokens are not drawn but taken from it (teacher forcing through the sampler's
    contexts, for :func:`score`).
    """
    gid_L, size_L = ties
    length = order_NxL.shape[1]
    mask_L = inputs.mask.astype(jnp.float32)
    order_NxL = group_decoding_order(order_NxL, gid_L)
    rank_NxL = jnp.argsort(order_NxL, axis=-1)
    g_NxL = gid_L[order_NxL]
    first_NxL = jnp.concatenate([jnp.ones((N, 1), bool), g_NxL[:, 1:] != g_NxL[:, :-1]], axis=1)
    last_NxL = jnp.concatenate([first_NxL[:, 1:], jnp.ones((N, 1), bool)], axis=1)
    start_NxL = jax.lax.cummax(jnp.where(first_NxL, jnp.arange(length)[None, :], 0), axis=1)
    group_design_L = jax.ops.segment_min(design_L, gid_L, num_segments=2 * length)[gid_L] > 0

    def step(carry, xs):
        S_NxL, hP_cache, pending, acc_Nx21 = carry
        t, noise_Nx21 = xs
        hP_cache = _write_pending(hP_cache, pending)
        p_N = order_NxL[:, t]
        # every member sees the slots decoded before its group, none of its own group
        logits_Nx21, new_hP = _decode_position(
            model, caches, h_V_enc, E_idx, mask_L, rank_NxL, S_NxL, hP_cache, p_N, start_NxL[:, t]
        )
        acc_Nx21 = jnp.where(first_NxL[:, t, None], 0.0, acc_Nx21) + logits_Nx21
        if forced_NxL is None:
            mean_Nx21 = acc_Nx21 / size_L[p_N][:, None].astype(jnp.float32)
            drawn = _draw(
                noise_Nx21, mean_Nx21 + bias_Lx21[p_N], omit_21, temperature, _pssm_rows(pssm, p_N)
            )
            drawing_NxL = group_design_L[None, :]
            if draw_N is not None:
                drawing_NxL = drawing_NxL & draw_N[:, None]
            tok_NxL = jnp.where(drawing_NxL, drawn[:, None], inputs.S[None, :].astype(jnp.int32))
        else:
            tok_NxL = forced_NxL
        # at the group's last member, write the token to every member (kept slots keep their own)
        write_NxL = last_NxL[:, t, None] & (gid_L[None, :] == g_NxL[:, t, None])
        S_NxL = jnp.where(write_NxL, tok_NxL, S_NxL)
        carry = (S_NxL, hP_cache, (p_N, tuple(new_hP)), acc_Nx21)
        return carry, jax.nn.log_softmax(logits_Nx21, -1)

    n_hp = len(list(model.decoder_layers)) - 1
    caches_init = _empty_caches(order_NxL, model.hidden_dim, model.dtype, n_hp)
    init = (jnp.zeros((N, length), jnp.int32),) + caches_init
    init += (jnp.zeros((N, model.vocab), jnp.float32),)
    steps = jnp.arange(length)
    if noise_LxNx21 is None:
        noise_LxNx21 = jnp.zeros((length, 0), jnp.float32)  # unused: every token is forced
    (S_NxL, _, _, _), lp_TxNx21 = jax.lax.scan(step, init, (steps, noise_LxNx21))
    return _sample_result(inputs, S_NxL, order_NxL, lp_TxNx21)
