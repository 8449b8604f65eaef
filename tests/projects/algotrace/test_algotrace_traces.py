"""AlgoTrace trace generator: traces are valid solutions, labels agree with the tagger."""

import itertools

import numpy as np
import pytest

from fidia_jax.projects.algotrace import traces

V = traces.ALGOTRACE_VOCAB
INV = {i: s for s, i in V.items()}
PRIMS = traces.ALGOTRACE_PRIMITIVES


def _parse_prompt(row):
    """Independent parse of a prompt: task, coords (n, 2), edges set, target, prompt length."""
    s = [INV[int(t)] for t in row]
    task = s[1]
    i, coords = 2, []
    while s[i] != "|":
        coords.append((int(s[i + 1]), int(s[i + 2])))
        i += 3
    i += 1
    edges, target = set(), -1
    if task == "NAV":
        while s[i] != "T":
            edges.add(frozenset((ord(s[i]) - 97, ord(s[i + 1]) - 97)))
            i += 2
        target = ord(s[i + 1]) - 97
        i += 3
    return task, np.array(coords), edges, target, i


def _segments(syms):
    segs, cur = [], None
    for s in syms:
        if s in ("D", "C", "N", "V", "P"):
            cur = [s]
            segs.append(cur)
        else:
            cur.append(s)
    return segs


@pytest.fixture(scope="module")
def sample():
    return traces.make_algotrace_data(120, seed=3, max_len=80)


def test_traces_are_valid_solutions(sample):
    man = lambda c, a, b: int(np.abs(c[a] - c[b]).sum())  # noqa: E731
    for row, plen, length, task_ix in zip(
        sample.tokens, sample.prompt_len, sample.length, sample.task, strict=True
    ):
        task, coords, edges, target, p = _parse_prompt(row)
        assert p == plen and task == ("TSP", "NAV")[task_ix]
        assert len(set(map(tuple, coords))) == len(coords)  # distinct points
        syms = [INV[int(t)] for t in row[p : length - 1]]
        assert INV[int(row[length - 1])] == "EOS" and np.all(row[length:] == V["PAD"])
        cur, walk = 0, [0]
        for seg in _segments(syms):
            node = lambda x: ord(x) - 97  # noqa: E731
            if seg[0] == "D":  # distance from the current city (TSP) / to the target (NAV)
                b = node(seg[1])
                ref = man(coords, cur, b) if task == "TSP" else man(coords, b, target)
                assert int(seg[2]) == ref
            elif seg[0] == "N":
                nxt = node(seg[1])
                if task == "NAV":
                    assert frozenset((cur, nxt)) in edges
                cur = nxt
                walk.append(cur)
            elif seg[0] == "P":
                path = [node(x) for x in seg[1:]]
        assert path[0] == 0 and path[: -1 if task == "TSP" else None] == walk
        if task == "TSP":  # a closed tour through every city once
            assert path[-1] == 0 and sorted(path[:-1]) == list(range(len(coords)))
        else:  # an edge path from a to the target, no repeats
            assert path[-1] == target and len(set(path)) == len(path)
            assert all(frozenset(e) in edges for e in itertools.pairwise(path))


def test_nearest_is_the_argmin_and_compare_keeps_the_smaller(sample):
    for row, plen, length in zip(sample.tokens, sample.prompt_len, sample.length, strict=True):
        segs = _segments([INV[int(t)] for t in row[plen : length - 1]])
        dist = {}
        for seg in segs:
            if seg[0] == "D":
                dist[seg[1]] = int(seg[2])
            elif seg[0] == "C":
                a, b, w = seg[1:]
                assert w == (a if dist[a] <= dist[b] else b)
            elif seg[0] == "N":
                best = min(dist.items(), key=lambda kv: (kv[1], kv[0]))[0]
                assert seg[1] == best
                dist = {}


def test_labels_match_the_tagger_and_strategies(sample):
    lab = traces.algotrace_primitive_labels(sample.tokens, sample.prompt_len)
    np.testing.assert_array_equal(lab, sample.labels)
    assert set(np.unique(sample.task)) == {0, 1} and len(np.unique(sample.strategy)) == 4
    assert np.all(
        sample.labels[np.arange(sample.tokens.shape[1])[None] < sample.prompt_len[:, None]] == -1
    )
    # "each" strategies verify after every move, "final" once.
    n_verify = (sample.tokens == V["V"]).sum(axis=1)
    n_moves = (sample.tokens == V["N"]).sum(axis=1)
    each = np.isin(sample.strategy, [1, 3])
    assert np.all(n_verify[each] == n_moves[each]) and np.all(n_verify[~each] == 1)
    # "batch" writes every distance of a step before any compare; "interleaved" does not.
    for row, s in zip(sample.tokens, sample.strategy, strict=True):
        syms = [INV[int(t)] for t in row]
        first_n = syms.index("N")
        step = [x for x in syms[:first_n] if x in ("D", "C")]
        if s in (0, 1):
            assert step == sorted(step, key=lambda x: x != "D")
        elif "C" in step:
            assert step[:3] == ["D", "D", "C"]


def test_same_seed_same_data_and_errors():
    a = traces.make_algotrace_data(10, seed=1)
    b = traces.make_algotrace_data(10, seed=1)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    # the tagger on a hand-written trace (1-D input)
    toks = [V[x] for x in "BOS TSP | D b 3 C b c b N b x".replace("x", "EOS").split()]
    np.testing.assert_array_equal(
        traces.algotrace_primitive_labels(toks, 3), [-1, -1, -1, 0, 0, 0, 1, 1, 1, 1, 2, 2, -1]
    )
    with pytest.raises(ValueError, match="max_len"):
        traces.make_algotrace_data(5, seed=0, max_len=20)
    with pytest.raises(ValueError, match="strategies"):
        traces.make_algotrace_data(5, strategies=("dfs",))
    with pytest.raises(ValueError, match="task"):
        traces.random_algotrace_instance(np.random.default_rng(0), "sat")
    with pytest.raises(ValueError, match="n_edges"):
        traces.random_algotrace_instance(np.random.default_rng(0), "nav", 4, 2)


def test_primitive_rates():
    lab = np.array([[-1, 0, 0, 1, 4], [2, 2, -1, -1, 7]])  # -1 and 7 are ignored
    np.testing.assert_allclose(traces.primitive_rates(lab, 5), [2 / 6, 1 / 6, 2 / 6, 0, 1 / 6])
    np.testing.assert_array_equal(traces.primitive_rates(np.full(3, -1), 5), np.zeros(5))
    with pytest.raises(ValueError, match="integers"):
        traces.primitive_rates(np.zeros(3), 5)
