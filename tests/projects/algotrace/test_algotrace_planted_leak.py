"""Planted leak (issue 41): AlgoTrace's fitted steps see only their own rows.

What is fitted, on what (:mod:`fidia_jax.projects.algotrace.train`): the model's parameters
on the ``n_train`` training traces (``_data(n_train, seed)``; the vocabulary is a fixed
constant); the primitive vectors -- mean head outputs, every head's indirect effect, the
``top_k_heads`` selection -- on the first half of the evaluation rows (``_data(n_eval,
seed + 1)[:n_eval // 2]``), per source (both tasks, or one task's rows for transfer); the
injection experiment scores them on the prompts of the second half. (The k-means of the
cluster analysis is label-free and describes the evaluation rows it is fitted on: no held-out
part.)

Planted: every trace token of a row replaced by the ``distance`` keyword and labelled
``distance`` (a signal no real row carries). (1) In :func:`build_vectors` with a one-task
source, planting the other task's rows leaves every vector, indirect effect and chosen head
bit for bit equal; planting one selected row moves them. (2) Through the driver
(:func:`train_and_evaluate`, with the training fit, clustering and sampling replaced by
recorders), planting the held-out prompt rows leaves the training fit's inputs (traces,
weights, key, steps: a deterministic fit, so the same parameters) and every injected vector
unchanged, while the planted rows are the ones sampled; planting the vector rows instead
moves the vectors, so the tests can fail.
"""

import dataclasses

import jax
import numpy as np
import pytest
from flax import nnx

from fidia_jax.projects import algotrace
from fidia_jax.projects.algotrace import traces
from fidia_jax.projects.algotrace import train as at_train
from fidia_jax.projects.algotrace.plots import PARTITIONS

_D = traces.ALGOTRACE_KEYWORDS["distance"]
_REAL_DATA = at_train._data


def _plant(data: traces.AlgoTraceData, rows) -> traces.AlgoTraceData:
    tokens, labels = data.tokens.copy(), data.labels.copy()
    for r in rows:
        trace = slice(int(data.prompt_len[r]), int(data.length[r]) - 1)  # up to EOS
        tokens[r, trace], labels[r, trace] = _D, 0
    return data._replace(tokens=tokens, labels=labels)


def _second_trace_token(data: traces.AlgoTraceData) -> np.ndarray:
    return data.tokens[np.arange(len(data.tokens)), data.prompt_len + 1]  # a real trace: a node


def _equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for p in a:
        for k in ("vector", "heads", "ie"):
            np.testing.assert_array_equal(np.asarray(a[p][k]), np.asarray(b[p][k]), err_msg=p)


def test_a_one_task_vector_sees_none_of_the_other_tasks_rows():
    config = algotrace.get_config("tiny")
    model = algotrace.make_model(config)  # the recipe, not training, is tested: untrained
    ev = at_train._data(config, config.n_eval, config.seed + 1)
    half = config.n_eval // 2
    ev = traces.AlgoTraceData(*(np.asarray(f)[:half] for f in ev))
    tsp = ev.task == 0
    assert 2 <= tsp.sum() < half

    def vectors(data):
        return at_train.build_vectors(model, data.tokens, data.labels, config, rows=tsp)

    clean = vectors(ev)
    _equal(vectors(_plant(ev, np.nonzero(~tsp)[0])), clean)  # planted in the nav rows
    moved = vectors(_plant(ev, np.nonzero(tsp)[0][:1]))  # control: in one tsp row
    assert np.abs(moved["distance"]["vector"] - clean["distance"]["vector"]).max() > 1e-3
    assert np.abs(moved["distance"]["ie"] - clean["distance"]["ie"]).max() > 1e-4


def _driver(monkeypatch, tmp_path, planted_rows):
    """train_and_evaluate with the eval rows ``planted_rows`` planted; fit, clustering and
    sampling recorded, not run."""
    config = dataclasses.replace(algotrace.get_config("tiny"), fv_positions=("tokens",))
    seen = {"data": []}

    def data(cfg, n, seed, exclude=None):
        seen["data"].append((n, seed, exclude is not None))
        d = _REAL_DATA(cfg, n, seed, exclude)
        return _plant(d, planted_rows) if seed == cfg.seed + 1 else d

    def fit_llama(model, tokens, *, weights, key, **kw):
        init = [np.asarray(p) for p in jax.tree.leaves(nnx.state(model, nnx.Param))]
        kw = {k: v for k, v in kw.items() if k not in ("tx", "workdir")}  # tx: adam(config lr)
        seen["fit"] = (tokens, weights, jax.random.key_data(key), *init, kw)
        return model, np.zeros(config.steps)

    def injection(model, prompts, conditions, cfg, key):
        seen["prompts"], seen["conditions"] = prompts, conditions
        rates = {part: [0.2] * 5 for part in ("all", "tsp", "nav")}
        one = {"rates": rates, "solved": {"tsp": 0.0, "nav": 0.0}, "mean_tokens": 0.0}
        return dict.fromkeys(conditions, one)

    scores = {"purity": 0.0, "nmi": 0.0, "ari": 0.0}
    clustering = {"n_points": 0, "layer": 1, **dict.fromkeys(PARTITIONS, scores)}
    monkeypatch.setattr(at_train, "_data", data)
    monkeypatch.setattr(at_train.train_lib, "fit_llama", fit_llama)
    monkeypatch.setattr(at_train, "cluster_analysis", lambda *a: clustering)
    monkeypatch.setattr(at_train, "injection_experiment", injection)
    for name in ("plot_clustering", "plot_injection", "print_tables"):
        monkeypatch.setattr(at_train, name, lambda *a, **k: None)
    results = at_train.train_and_evaluate(config, tmp_path)
    return config, seen, results


def test_planted_prompt_rows_move_no_fitted_number_but_the_vector_rows_do(monkeypatch, tmp_path):
    config, clean, r_clean = _driver(monkeypatch, tmp_path / "a", [])
    half = config.n_eval // 2
    _, held, r_held = _driver(monkeypatch, tmp_path / "b", range(half, config.n_eval))
    # the training rows, built once (the fit's data and the evaluation draw's exclusions), then
    # the evaluation rows, drawn outside the training rows
    assert clean["data"] == held["data"] == [(config.n_train, 0, False), (config.n_eval, 1, True)]
    for a, b in zip(clean["fit"][:-1], held["fit"][:-1], strict=True):  # the training fit
        np.testing.assert_array_equal(a, b)
    assert clean["fit"][-1] == held["fit"][-1]  # steps, batch size, run name, mesh
    assert clean["conditions"].keys() == held["conditions"].keys()
    for name, vec in clean["conditions"].items():  # every injected vector
        np.testing.assert_array_equal(held["conditions"][name], vec, err_msg=name)
    assert r_held["vectors"] == r_clean["vectors"]  # norms, chosen heads, indirect effects
    assert np.all(_second_trace_token(held["prompts"]) == _D)  # the planted rows are sampled
    assert not np.any(_second_trace_token(clean["prompts"]) == _D)

    _, leaky, _ = _driver(monkeypatch, tmp_path / "c", range(2))  # control: vector rows
    moved = max(
        float(np.abs(leaky["conditions"][n] - v).max()) for n, v in clean["conditions"].items()
    )
    assert moved > 1e-3
    np.testing.assert_array_equal(leaky["prompts"].tokens, clean["prompts"].tokens)
    np.testing.assert_array_equal(leaky["fit"][0], clean["fit"][0])


def _repeats(config) -> int:
    tr = at_train._data(config, config.n_train, config.seed)
    ev = at_train._eval_data(config)
    seen = {tr.tokens[i, : tr.prompt_len[i]].tobytes() for i in range(config.n_train)}
    return sum(ev.tokens[i, : ev.prompt_len[i]].tobytes() in seen for i in range(config.n_eval))


@pytest.mark.parametrize("name", ["tiny", "demo", "reduced", "default"])
def test_no_evaluation_problem_is_a_training_problem(name):
    """Brute force over the presets' rows: with ``distinct_eval`` (the default) no evaluation
    prompt is a training prompt; drawn independently, ``reduced`` and ``default`` repeat 1 and
    6 (so the check can fail), and the rows before the first repeat are the same draws."""
    config = algotrace.get_config(name)
    assert config.distinct_eval and _repeats(config) == 0
    independent = dataclasses.replace(config, distinct_eval=False)
    assert _repeats(independent) == {"tiny": 0, "demo": 0, "reduced": 1, "default": 6}[name]
    if name == "tiny":  # no repeat, so the same rows either way
        a, b = at_train._eval_data(config), at_train._eval_data(independent)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_exclude_that_leaves_no_new_problem_is_an_error(monkeypatch):
    """A generator that can only repeat an excluded problem: an error after 100 n draws, not a
    loop without end and not a silently repeated problem."""
    one = traces.make_algotrace_data(1, seed=0, tasks=("tsp",))
    inst = traces.random_algotrace_instance(np.random.default_rng(0), "tsp")
    monkeypatch.setattr(traces, "random_algotrace_instance", lambda *a, **k: inst)
    fixed = traces.make_algotrace_data(1, seed=0, tasks=("tsp",))  # only `inst` can be drawn
    with pytest.raises(ValueError, match="100 draws gave only 0 of 1 problems outside"):
        traces.make_algotrace_data(1, seed=3, tasks=("tsp",), exclude=fixed)
    assert traces.make_algotrace_data(1, seed=3, tasks=("tsp",), exclude=one).tokens.shape[0] == 1
