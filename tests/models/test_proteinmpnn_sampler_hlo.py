"""The ProteinMPNN sampler's decoding loop: caches updated in place, random stream unchanged.

The decoder caches one ``(N, L, C)`` buffer per layer after the first. If a step writes a
cache row while a later layer of the same step still reads that cache, XLA keeps the old value
by copying the whole buffer at every step (a cost quadratic in ``L``; issue 27 measured four
``f32[16, 148, 128]`` copies per step). These tests read the optimised HLO of small samplers and
assert that no while-loop body copies a buffer as large as a cache; a control loop written the
copying way checks that the detector finds such copies.

The sequences pinned below were drawn, for the same keys, by the sampler before the change
(which drew its Gumbel noise inside the loop with ``jax.random.categorical(fold_in(k, t), z)``
and wrote the caches in the step that computed them); the loop now draws the same noise before
the loop and defers the writes, and must give the same tokens.
"""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax.models import MPNN_ALPHABET, MPNNInputs, ProteinMPNN, sample, score

N, L, C = 3, 37, 16  # samples, residues, hidden width of the small model below

_SHAPE = re.compile(r"= (\w+)\[([\d,]*)\]\{[^}]*\} copy\(")


def _computations(hlo: str) -> dict[str, list[str]]:
    """HLO module text -> {computation name: its instruction lines}."""
    comps, name = {}, None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%([\w.\-]+) \(.*\{\s*$", line)
        if head:
            name = head.group(1)
            comps[name] = []
        elif line.strip() == "}":
            name = None
        elif name is not None:
            comps[name].append(line)
    return comps


def _loop_bodies(hlo: str) -> dict[str, list[str]]:
    """The bodies of every while loop, with the computations they ``call`` (not fusions)."""
    comps = _computations(hlo)
    todo = [
        m for lines in comps.values() for ln in lines for m in re.findall(r"body=%([\w.\-]+)", ln)
    ]
    bodies = {}
    while todo:
        name = todo.pop()
        if name in bodies or name not in comps:
            continue
        bodies[name] = comps[name]
        todo += [
            m
            for ln in comps[name]
            if " call(" in ln
            for m in re.findall(r"to_apply=%([\w.\-]+)", ln)
        ]
    return bodies


_CACHE = re.compile(rf"= f32\[{N},{L},{C}\]\{{")


def _decoding_loops(hlo: str) -> dict[str, list[str]]:
    """The loop bodies that produce an ``f32[N, L, C]`` value (a cache update)."""
    return {
        name: lines
        for name, lines in _loop_bodies(hlo).items()
        if any(_CACHE.search(ln) for ln in lines)
    }


def _big_copies(lines: list[str], min_elements: int) -> list[str]:
    """Copy instructions whose result has at least ``min_elements`` elements."""
    out = []
    for ln in lines:
        m = _SHAPE.search(ln)
        if m and math.prod(int(d) for d in m.group(2).split(",") if d) >= min_elements:
            out.append(ln.strip()[:160])
    return out


def _cache_copies(hlo: str) -> list[str]:
    """Copies of cache-sized (or larger) buffers in the decoding loops; raises if there is none."""
    loops = _decoding_loops(hlo)
    assert loops, "no loop body writes an (N, L, C) cache: the check looks at the wrong loop"
    return [c for lines in loops.values() for c in _big_copies(lines, N * L * C)]


@pytest.fixture(scope="module")
def small():
    model = ProteinMPNN(16, 16, 16, 3, 3, k_neighbors=8, rngs=nnx.Rngs(0))
    rng = np.random.default_rng(0)
    inputs = MPNNInputs(
        X=np.cumsum(rng.normal(size=(L, 4, 3)), 0).astype(np.float32),
        S=rng.integers(0, 20, L).astype(np.int32),
        mask=np.ones(L, np.float32),
        chain_mask=np.ones(L, np.float32),
        residue_idx=np.arange(L, dtype=np.int32),
        chain_encoding=np.ones(L, np.int32),
    )
    return model, inputs


def _hlo(fn, *args) -> str:
    return jax.jit(fn).lower(*args).compile().as_text()


TIES = [[0, 20], [1, 21, 30], [5, 6]]


@pytest.mark.parametrize(
    "kind",
    [
        "untied",
        pytest.param("tied", marks=pytest.mark.slow),
        pytest.param("tied score", marks=pytest.mark.slow),
    ],
)
def test_decoding_loop_copies_no_cache(small, kind):
    model, inputs = small
    if kind == "tied score":
        order = np.tile(np.arange(L, dtype=np.int32), (N, 1))
        hlo = _hlo(
            lambda s: score(model, inputs, s, order, tied=TIES).log_probs,
            jnp.zeros((N, L), jnp.int32),
        )
    else:
        tied = TIES if kind == "tied" else None
        hlo = _hlo(
            lambda k: sample(model, k, inputs, num_samples=N, temperature=0.5, tied=tied).sequences,
            jax.random.key(0),
        )
    copies = _cache_copies(hlo)
    assert not copies, f"the decoding loop copies cache-sized buffers at every step: {copies}"


def test_detector_finds_the_copy_of_a_cache_written_before_it_is_read():
    """Control: a loop whose first layer writes a cache that its second layer reads later."""
    nb = jax.random.randint(jax.random.key(0), (L, N, 8), 0, L)
    pos = jax.random.randint(jax.random.key(1), (L, N), 0, L)

    def loop(nb, pos, w):
        def step(caches, xs):
            c1, c2 = caches
            nb_NxK, p_N = xs
            h = jnp.tanh(jnp.take_along_axis(c2, nb_NxK[..., None], 1).sum(1) @ w)
            c1 = c1.at[jnp.arange(N), p_N].set(h @ w)  # written here ...
            h2 = jnp.tanh(jnp.take_along_axis(c1, nb_NxK[..., None], 1).sum(1) @ w + h)  # read here
            c2 = c2.at[jnp.arange(N), p_N].set(h2 @ w)
            return (c1, c2), h2.sum()

        return jax.lax.scan(step, (jnp.zeros((N, L, C)), jnp.ones((N, L, C))), (nb, pos))

    def loop_unordered(nb, pos, w):  # the old sampler's pattern: write and read not ordered
        def step(caches, xs):
            c1, c2 = caches
            nb_NxK, p_N = xs
            h = jnp.tanh(jnp.take_along_axis(c2, nb_NxK[..., None], 1).sum(1) @ w)
            h2 = jnp.tanh(jnp.take_along_axis(c1, nb_NxK[..., None], 1).sum(1) @ w + h)
            c1 = c1.at[jnp.arange(N), p_N].set(h @ w)
            c2 = c2.at[jnp.arange(N), p_N].set(h2 @ w)
            return (c1, c2), h2.sum()

        return jax.lax.scan(step, (jnp.zeros((N, L, C)), jnp.ones((N, L, C))), (nb, pos))

    w = jnp.ones((C, C))
    assert not _cache_copies(_hlo(loop, nb, pos, w))  # the read follows the write: in place
    assert _cache_copies(_hlo(loop_unordered, nb, pos, w))


def test_noise_before_the_loop_draws_as_categorical():
    """``argmax(_token_noise[t] + z)`` is ``jax.random.categorical(fold_in(key, t), z)`` bitwise."""
    from fidia_jax.models.proteinmpnn._sampling import _draw, _token_noise

    key = jax.random.key(7)
    steps = 6
    z = jax.random.normal(jax.random.key(1), (steps, 5, 21)) * 3.0
    omit = jnp.zeros(21, bool).at[jnp.array([4, 20])].set(True)
    noise = _token_noise(key, steps, (5, 21))
    for temperature in (0.1, 1.0):
        for t in range(steps):
            zt = jnp.where(omit, -jnp.inf, z[t] / temperature)
            want = jax.random.categorical(jax.random.fold_in(key, t), zt, axis=-1)
            np.testing.assert_array_equal(_draw(noise[t], z[t], omit, temperature), want)


@pytest.fixture(scope="module")
def weights():
    return ProteinMPNN.from_checkpoint("v_48_020")


# Drawn by the sampler before the in-place change (commit 3b420c6) on 5PTI (the default
# backbone), v_48_020 weights.
PINNED = {
    ("untied", 0, 0.1): (
        "VPESCYDPPYKGPCNEKITKWYYDHEKGKCVKFTYGGCDEIENNFDSEEECLATCGGE",
        "IPSWCLDPPYKGPCSDSITKWYYNYKKGKCEKFIYGGCNAIKNNFDSEEECLAACGGS",
        "IPAACYEPPYKGPCNESITKWYYDYEKGKCETFTYGGCNPIANTFDTKEECEATCGGS",
        "VPAWCYDPPWKGPGSASITKWYYDAAAGKCVTFTYGGSGAIQNSWDSEAACNAACGGS",
    ),
    ("untied", 1, 1.0): (
        "IPTYCTMPPTKGDCSRRIKMWYYDYVKGDCCKFYNGGCGTTKNAWASELRCRKDCGGR",
        "VPNYCYYAPNRGPGCGEIKKYYFDYENSYCLEFTWGFTYEHPNCFDRRDLCSSKCGGG",
        "RPAWYDLPFWQGGCGYDLVQYYYNSEANTCERAVYGGCQQVRNLKSSQAMRHSSCGGA",
        "VNPWCLVPKWRGPCHRNLTRWHYDASLATCVKFLYGGCSRLENNYRTINACRSACGDE",
    ),
    ("tied", 0, 1.0): (
        "RDPACLLPPSHGPGAQAIVMFYYDITSGRTRDYTWGGVFTDQNNYDSEDACNMSCIEL",
        "QTPSCVVPPNTGSCSQSEQKYYFDHARGRCQTFVWGLCGETANAFSSESECPLACGAK",
        "QHAYCDDPHWTCETNPRFQKYYFSREETKCQHFTYGGCCPHWNTYDTEDNCMGACGTN",
    ),
}


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=[pytest.mark.slow] if c[0] == "tied" else []) for c in PINNED],
    ids=lambda c: f"{c[0]}-key{c[1]}-T{c[2]}",
)
def test_same_sequences_as_before_for_the_same_key(case, weights):
    """Pinned tokens; ``score_native`` (keys 1 and tied) adds rows without changing them."""
    from fidia_jax.protein import default_backbone_path, load_structure

    kind, seed, temperature = case
    inputs = MPNNInputs.from_protein(load_structure(default_backbone_path()))
    want = PINNED[case]
    tied = [[0, 30], [1, 31, 40], [5, 6]] if kind == "tied" else None
    native = seed == 1 or tied is not None
    res = sample(
        weights,
        jax.random.key(seed),
        inputs,
        num_samples=len(want),
        temperature=temperature,
        tied=tied,
        score_native=native,
    )
    got = tuple("".join(MPNN_ALPHABET[i] for i in row) for row in np.asarray(res.sequences))
    assert got == want
    if not native:
        assert res.native_token_log_probs is None
        return
    nat = score(
        weights,
        inputs,
        np.broadcast_to(inputs.S, res.sequences.shape),
        res.decoding_order,
        tied=tied,
    )
    np.testing.assert_allclose(res.native_token_log_probs, nat.token_log_probs, atol=2e-5)


def _ynn_fusions(hlo: str) -> dict[str, list[str]]:
    """The fused computations XLA:CPU hands to YNNPACK -> their instruction lines."""
    comps = _computations(hlo)
    names = [
        m
        for lines in comps.values()
        for ln in lines
        if '"__ynn_fusion"' in ln
        for m in re.findall(r"calls=%([\w.\-]+)", ln)
    ]
    return {n: comps[n] for n in names}


def test_top_level_sampler_keeps_each_dot_alone(weights):
    """With the loop's compiler options, no YNNPACK fusion holds more than one dot and nothing
    element-wise (the message MLP fused as one YNNPACK graph ran about twice as slow)."""
    from fidia_jax.models.proteinmpnn import inference_compiler_options
    from fidia_jax.models.proteinmpnn._inputs import canonical, omit_mask
    from fidia_jax.models.proteinmpnn._sampling import _sample_jit
    from fidia_jax.protein import default_backbone_path, load_structure

    if not inference_compiler_options():
        pytest.skip("this jaxlib / backend has no YNNPACK fusion option: nothing to check")
    inputs = canonical(MPNNInputs.from_protein(load_structure(default_backbone_path())))
    length = inputs.S.shape[0]
    g, st = nnx.split(weights)
    args = (g, st, jax.random.key(0), inputs, jnp.float32(0.1), np.zeros(length, bool),
            omit_mask("X") > 0, jnp.zeros((length, 21), jnp.float32), 4, None, True, None)  # fmt: skip
    fusions = _ynn_fusions(_sample_jit.program(True).lower(*args).compile().as_text())
    for name, lines in fusions.items():
        ops = [re.search(r" = \S+ ([a-z\-]+)\(", ln) for ln in lines]
        ops = [m.group(1) for m in ops if m]
        assert ops.count("dot") == 1, (name, ops)
        assert set(ops) <= {"dot", "parameter", "bitcast", "transpose", "copy"}, (name, ops)


def test_sampler_inside_a_users_jit_draws_the_same_tokens(small):
    """The options apply to top-level calls only; traced (or staged with concrete arguments
    only) inside a user's ``jit`` the sampler compiles without them and draws the same."""
    model, inputs = small
    key = jax.random.key(3)

    def draw(k):
        return sample(model, k, inputs, num_samples=N, temperature=0.5).sequences

    want = np.asarray(draw(key))
    np.testing.assert_array_equal(np.asarray(jax.jit(draw)(key)), want)  # traced key
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda: draw(key))()), want)  # constants
    nll = score(model, inputs, want, key, tied=TIES).nll  # the tied scorer's loop, top level
    staged = jax.jit(lambda: score(model, inputs, want, key, tied=TIES).nll)()
    np.testing.assert_allclose(np.asarray(staged), np.asarray(nll), atol=1e-6)
