"""Algorithmic reasoning traces with a true primitive label per token (AlgoTrace, issue 14).

Two small tasks that share five algorithmic primitives, written as token sequences a tiny
language model can be trained on:

* **TSP** (travelling salesperson, nearest-neighbour heuristic): ``n_nodes`` cities with integer
  coordinates; the tour starts at city ``a`` (node 0), repeatedly computes the (Manhattan)
  distance from the current city to every unvisited one, compares the candidates, moves to the
  nearest, and finally writes the closed tour.
* **NAV** (graph navigation, greedy best-first): ``n_nodes`` nodes with coordinates and a list of
  undirected edges; from ``a`` towards a target ``t``, it computes the distance from every
  unvisited neighbour to ``t``, compares, moves to the nearest-to-target neighbour, and writes the
  path. Instances on which the greedy walk gets stuck are redrawn.

The primitives (:data:`ALGOTRACE_PRIMITIVES`) and their token forms (each opens with a keyword token)::

  distance  D b d         Manhattan distance d (one digit) of candidate b (from the current city /
                          to the target)
  compare   C b1 b2 w     the candidate with the smaller distance (ties: the earlier one)
  nearest   N w           move to w
  verify    V w OK|NO     "is the walk done at w?" (TSP: every city visited; NAV: w is the target)
  path      P n0 n1 ...   the solution (TSP: a closed tour a .. a; NAV: a .. t)

Strategies (:data:`ALGOTRACE_STRATEGIES`) change the order in which primitives appear, not the answer:
``batch`` computes every candidate's distance before comparing (running minimum), ``interleaved``
compares as soon as a second distance is known; ``final`` verifies only at the end, ``each``
after every move. A sequence is ``BOS task prompt... SEP trace EOS PAD...``; the label of a trace
token is its primitive index (0..4), of every other token ``-1``.
:func:`algotrace_primitive_labels` re-derives the labels from the tokens alone (the keyword that opened the
current segment), so generated text is labelled by the same rule, and :func:`primitive_rates`
counts how often each primitive occurs in it (the quantity whose change the paper's injection
table reports).

Reference:
  Lippl, McGee, Lopez, Pan, Zhang, Ziadi, Eberle, Momennejad, "Algorithmic primitives and
  compositional geometry of reasoning in language models", ICML 2026 (arXiv:2510.15987). The
  paper studies TSP, 3SAT, AIME and graph navigation traces of pretrained LLMs; these synthetic
  tasks, their token grammar and strategies are ours (a reconstruction at toy scale).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

__all__ = [
    "ALGOTRACE_KEYWORDS",
    "ALGOTRACE_PRIMITIVES",
    "ALGOTRACE_STRATEGIES",
    "ALGOTRACE_TASKS",
    "ALGOTRACE_VOCAB",
    "AlgoTraceData",
    "AlgoTraceInstance",
    "algotrace_primitive_labels",
    "algotrace_trace",
    "decode_algotrace",
    "make_algotrace_data",
    "primitive_rates",
    "random_algotrace_instance",
]

PRIMITIVES = ("distance", "compare", "nearest", "verify", "path")
TASKS = ("tsp", "nav")
STRATEGIES = ("batch_final", "batch_each", "interleaved_final", "interleaved_each")
NO_LABEL = -1
MAX_NODES = 6
GRID = 5  # coordinates in 0..4: Manhattan distances 0..8, one digit

# ----------------------------------------------------------------------------- vocabulary
_SPECIAL = ["PAD", "BOS", "EOS", "TSP", "NAV", "|", "D", "C", "N", "V", "P", "OK", "NO", "T"]
_DIGITS = [str(i) for i in range(10)]
_NODES = [chr(ord("a") + i) for i in range(MAX_NODES)]  # lower case: "D" is a keyword
#: token string -> id (32 ids; PAD = 0).
VOCAB: dict[str, int] = {s: i for i, s in enumerate(_SPECIAL + _DIGITS + _NODES)}
VOCAB["<unused>"] = len(VOCAB)
_ID2STR = {i: s for s, i in VOCAB.items()}
PAD, BOS, EOS, SEP = VOCAB["PAD"], VOCAB["BOS"], VOCAB["EOS"], VOCAB["|"]
#: primitive name -> the keyword token id that opens its segments.
KEYWORDS: dict[str, int] = {
    "distance": VOCAB["D"], "compare": VOCAB["C"], "nearest": VOCAB["N"],
    "verify": VOCAB["V"], "path": VOCAB["P"],
}  # fmt: skip
_KEYWORD_LABEL = {tok: PRIMITIVES.index(p) for p, tok in KEYWORDS.items()}

ALGOTRACE_PRIMITIVES = PRIMITIVES
ALGOTRACE_TASKS = TASKS
ALGOTRACE_STRATEGIES = STRATEGIES
ALGOTRACE_VOCAB = VOCAB
ALGOTRACE_KEYWORDS = KEYWORDS


def _node(i: int) -> int:
    return VOCAB[_NODES[i]]


def _digit(d: int) -> int:
    return VOCAB[str(d)]


class AlgoTraceInstance(NamedTuple):
    """One problem.

    Attributes:
      task: ``"tsp"`` or ``"nav"``.
      coords: ``(n, 2)`` int coordinates in ``0..4`` (distinct points); node ``i`` is letter
        ``"abcdef"[i]``, the start is node 0.
      edges: ``(E, 2)`` int undirected edges ``i < j`` (NAV; empty for TSP).
      target: target node (NAV; ``-1`` for TSP).
    """

    task: str
    coords: np.ndarray
    edges: np.ndarray
    target: int


class AlgoTraceData(NamedTuple):
    """Padded token sequences with per-token primitive labels.

    Attributes:
      tokens: ``(N, T)`` int32 ids (:data:`ALGOTRACE_VOCAB`), right-padded with ``PAD`` (0).
      labels: ``(N, T)`` int32 primitive index (0..4, :data:`ALGOTRACE_PRIMITIVES`) of each trace
        token, ``-1`` on prompt, ``EOS`` and padding.
      prompt_len: ``(N,)`` int32 prompt length (up to and including the ``|`` separator).
      length: ``(N,)`` int32 sequence length including ``EOS``.
      task: ``(N,)`` int32 index into :data:`ALGOTRACE_TASKS`.
      strategy: ``(N,)`` int32 index into :data:`ALGOTRACE_STRATEGIES`.
    """

    tokens: np.ndarray
    labels: np.ndarray
    prompt_len: np.ndarray
    length: np.ndarray
    task: np.ndarray
    strategy: np.ndarray


def _dist(coords: np.ndarray, i: int, j: int) -> int:
    return int(np.abs(coords[i] - coords[j]).sum())


def random_algotrace_instance(
    rng: np.random.Generator, task: str, n_nodes: int = 4, n_edges: int = 5
) -> AlgoTraceInstance:
    """Draws one instance (NAV: redrawn until the greedy walk reaches the target in >= 2 moves).

    Args:
      rng: numpy generator.
      task: ``"tsp"`` or ``"nav"``.
      n_nodes: cities / nodes, ``3..6``.
      n_edges: NAV edges, ``n_nodes - 1 .. n_nodes (n_nodes - 1) / 2`` (a random spanning tree
        plus random extra edges).

    Raises:
      ValueError: unknown task, ``n_nodes`` or ``n_edges`` out of range.
    """
    if task not in TASKS:
        raise ValueError(f"random_algotrace_instance: task must be one of {TASKS}, got {task!r}")
    if not 3 <= int(n_nodes) <= MAX_NODES:
        raise ValueError(
            f"random_algotrace_instance: n_nodes must be in 3..{MAX_NODES}, got {n_nodes}"
        )
    max_edges = n_nodes * (n_nodes - 1) // 2
    if task == "nav" and not n_nodes - 1 <= int(n_edges) <= max_edges:
        raise ValueError(
            f"random_algotrace_instance: n_edges must be in {n_nodes - 1}..{max_edges}, got {n_edges}"
        )
    for _ in range(1000):
        cells = rng.choice(GRID * GRID, size=n_nodes, replace=False)
        coords = np.stack([cells // GRID, cells % GRID], axis=1).astype(np.int64)
        if task == "tsp":
            return AlgoTraceInstance("tsp", coords, np.zeros((0, 2), np.int64), -1)
        order = rng.permutation(n_nodes)
        tree = {
            tuple(sorted((int(order[i]), int(order[rng.integers(0, i)]))))
            for i in range(1, n_nodes)
        }
        rest = [e for e in itertools.combinations(range(n_nodes), 2) if e not in tree]
        extra = [rest[i] for i in rng.choice(len(rest), size=n_edges - len(tree), replace=False)]
        edges = np.array(sorted(tree | set(extra)), np.int64)
        target = int(rng.integers(1, n_nodes))
        inst = AlgoTraceInstance("nav", coords, edges, target)
        walk = _greedy_walk(inst)
        if walk is not None and len(walk) >= 3:
            return inst
    raise RuntimeError("random_algotrace_instance: no solvable NAV instance in 1000 draws")


def _neighbours(inst: AlgoTraceInstance, i: int) -> list[int]:
    out = [int(b) for a, b in inst.edges if a == i] + [int(a) for a, b in inst.edges if b == i]
    return sorted(out)


def _candidates(inst: AlgoTraceInstance, cur: int, visited: list[int]) -> list[int]:
    if inst.task == "tsp":
        return [j for j in range(len(inst.coords)) if j not in visited]
    return [j for j in _neighbours(inst, cur) if j not in visited]


def _score(inst: AlgoTraceInstance, cur: int, j: int) -> int:
    return _dist(inst.coords, cur, j) if inst.task == "tsp" else _dist(inst.coords, j, inst.target)


def _greedy_walk(inst: AlgoTraceInstance) -> list[int] | None:
    """Visited nodes in order (NAV: ``None`` when stuck before the target)."""
    walk = [0]
    while True:
        if inst.task == "tsp" and len(walk) == len(inst.coords):
            return walk
        if inst.task == "nav" and walk[-1] == inst.target:
            return walk
        cand = _candidates(inst, walk[-1], walk)
        if not cand:
            return None
        walk.append(min(cand, key=lambda j: (_score(inst, walk[-1], j), j)))


def _prompt(inst: AlgoTraceInstance) -> list[int]:
    toks = [BOS, VOCAB["TSP" if inst.task == "tsp" else "NAV"]]
    for i, (x, y) in enumerate(inst.coords):
        toks += [_node(i), _digit(int(x)), _digit(int(y))]
    if inst.task == "nav":
        toks.append(SEP)
        for a, b in inst.edges:
            toks += [_node(int(a)), _node(int(b))]
        toks += [VOCAB["T"], _node(inst.target)]
    return toks + [SEP]


def algotrace_trace(inst: AlgoTraceInstance, strategy: str) -> tuple[list[int], list[int]]:
    """The full sequence ``BOS ... | trace EOS`` of ``inst`` under ``strategy`` and its labels.

    Returns:
      ``(tokens, labels)`` lists of equal length (labels ``-1`` on the prompt and ``EOS``).

    Raises:
      ValueError: unknown strategy, or a NAV instance the greedy walk cannot solve.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"algotrace_trace: strategy must be one of {STRATEGIES}, got {strategy!r}")
    order, verify = strategy.split("_")
    walk = _greedy_walk(inst)
    if walk is None:
        raise ValueError("algotrace_trace: the greedy walk does not reach the target")
    prompt = _prompt(inst)
    toks, labs = list(prompt), [NO_LABEL] * len(prompt)

    def emit(prim: str, body: list[int]):
        toks.extend([KEYWORDS[prim], *body])
        labs.extend([PRIMITIVES.index(prim)] * (1 + len(body)))

    for step in range(1, len(walk)):
        cur, visited = walk[step - 1], walk[:step]
        cand = _candidates(inst, cur, visited)
        best = None
        if order == "batch":
            for j in cand:
                emit("distance", [_node(j), _digit(_score(inst, cur, j))])
            for j in cand:
                if best is not None:
                    w = best if _score(inst, cur, best) <= _score(inst, cur, j) else j
                    emit("compare", [_node(best), _node(j), _node(w)])
                    best = w
                else:
                    best = j
        else:
            for j in cand:
                emit("distance", [_node(j), _digit(_score(inst, cur, j))])
                if best is not None:
                    w = best if _score(inst, cur, best) <= _score(inst, cur, j) else j
                    emit("compare", [_node(best), _node(j), _node(w)])
                    best = w
                else:
                    best = j
        assert best == walk[step]
        emit("nearest", [_node(best)])
        last = step == len(walk) - 1
        if verify == "each" or last:
            emit("verify", [_node(best), VOCAB["OK" if last else "NO"]])
    path = walk + [0] if inst.task == "tsp" else walk
    emit("path", [_node(j) for j in path])
    toks.append(EOS)
    labs.append(NO_LABEL)
    return toks, labs


def algotrace_primitive_labels(tokens, prompt_len) -> np.ndarray:
    """Labels any token sequences by the keyword that opened the current segment.

    Positions before ``prompt_len`` (the prompt) and from the first ``EOS`` / ``PAD`` after it
    on are ``-1``; a trace token before any keyword is ``-1`` too. On the sequences of
    :func:`make_algotrace_data` this reproduces their ``labels`` exactly.

    Args:
      tokens: ``(N, T)`` int token ids (or ``(T,)``).
      prompt_len: ``(N,)`` ints (or an int): where the trace starts in each row.

    Returns:
      ``(N, T)`` int32 labels (``(T,)`` for a 1-D input).

    Raises:
      ValueError: ``tokens`` not 1-D/2-D, or ``prompt_len`` of the wrong length / out of range.
    """
    tok = np.asarray(tokens)
    one = tok.ndim == 1
    tok = tok[None] if one else tok
    if tok.ndim != 2:
        raise ValueError(
            f"algotrace_primitive_labels: tokens must be (N, T), got shape {tok.shape}"
        )
    pl = np.broadcast_to(np.asarray(prompt_len, np.int64), (tok.shape[0],))
    if np.any(pl < 0) or np.any(pl > tok.shape[1]):
        raise ValueError(f"algotrace_primitive_labels: prompt_len must be in [0, {tok.shape[1]}]")
    out = np.full(tok.shape, NO_LABEL, np.int32)
    for r in range(tok.shape[0]):
        cur = NO_LABEL
        for t in range(int(pl[r]), tok.shape[1]):
            v = int(tok[r, t])
            if v in (EOS, PAD):
                break
            cur = _KEYWORD_LABEL.get(v, cur)
            out[r, t] = cur
    return out[0] if one else out


def decode_algotrace(tokens) -> str:
    """Token ids -> space-separated symbols (stops at padding). For reading traces."""
    return " ".join(_ID2STR.get(int(t), "?") for t in np.asarray(tokens).ravel() if int(t) != PAD)


def _problems(data: AlgoTraceData) -> set[bytes]:
    """Each row's prompt (its problem) as bytes of int32 tokens."""
    tokens = np.asarray(data.tokens, np.int32)
    return {tokens[i, : int(k)].tobytes() for i, k in enumerate(np.asarray(data.prompt_len))}


def make_algotrace_data(
    n: int,
    *,
    seed: int = 0,
    tasks: tuple[str, ...] = TASKS,
    strategies: tuple[str, ...] = STRATEGIES,
    n_nodes: int = 4,
    n_edges: int = 5,
    max_len: int | None = None,
    exclude: AlgoTraceData | None = None,
) -> AlgoTraceData:
    """Draws ``n`` instances (task and strategy uniform per row) and writes their traces.

    Args:
      n: sequences, ``>= 1``.
      seed: numpy ``default_rng`` seed (same seed, same data).
      tasks: subset of :data:`ALGOTRACE_TASKS`.
      strategies: subset of :data:`ALGOTRACE_STRATEGIES`.
      n_nodes, n_edges: instance size (see :func:`random_algotrace_instance`).
      max_len: padded length ``T``; ``None`` = the longest sequence drawn.
      exclude: rows whose problems must not recur (a training set, for evaluation rows): an
        instance whose prompt (the problem: task, coordinates, edges, target) equals one of
        ``exclude``'s prompts is drawn again from the same generator, so no problem of the
        result is one of ``exclude``'s. ``None``: every draw is kept (the same seed gives the
        same rows either way until the first redraw).

    Returns:
      :class:`AlgoTraceData`.

    Raises:
      ValueError: ``n < 1``, an unknown task or strategy, a sequence longer than ``max_len``
        (the message gives the length needed), or ``exclude`` covering so much of the problem
        space that ``100 n`` draws did not give ``n`` new problems.
    """
    if int(n) < 1:
        raise ValueError(f"make_algotrace_data: n must be >= 1, got {n}")
    for name, given, allowed in (("tasks", tasks, TASKS), ("strategies", strategies, STRATEGIES)):
        bad = [x for x in given if x not in allowed]
        if not given or bad:
            raise ValueError(
                f"make_algotrace_data: {name} must be a non-empty subset of {allowed}, got {given}"
            )
    seen = set() if exclude is None else _problems(exclude)
    rng = np.random.default_rng(seed)
    rows, labs, plen, task_ix, strat_ix = [], [], [], [], []
    draws = 0
    while len(rows) < int(n):
        draws += 1
        if draws > 100 * int(n):
            raise ValueError(
                f"make_algotrace_data: {100 * int(n)} draws gave only {len(rows)} of {n} "
                f"problems outside `exclude` ({len(seen)} excluded problems)"
            )
        ti, si = int(rng.integers(len(tasks))), int(rng.integers(len(strategies)))
        inst = random_algotrace_instance(rng, tasks[ti], n_nodes, n_edges)
        if exclude is not None and np.asarray(_prompt(inst), np.int32).tobytes() in seen:
            continue
        toks, lab = algotrace_trace(inst, strategies[si])
        rows.append(toks)
        labs.append(lab)
        plen.append(len(_prompt(inst)))
        task_ix.append(TASKS.index(tasks[ti]))
        strat_ix.append(STRATEGIES.index(strategies[si]))
    longest = max(len(r) for r in rows)
    t = longest if max_len is None else int(max_len)
    if longest > t:
        raise ValueError(f"make_algotrace_data: a sequence has {longest} tokens > max_len={t}")
    tokens = np.full((len(rows), t), PAD, np.int32)
    labels = np.full((len(rows), t), NO_LABEL, np.int32)
    for i, (r, lab) in enumerate(zip(rows, labs, strict=True)):
        tokens[i, : len(r)] = r
        labels[i, : len(lab)] = lab
    return AlgoTraceData(
        tokens,
        labels,
        np.asarray(plen, np.int32),
        np.asarray([len(r) for r in rows], np.int32),
        np.asarray(task_ix, np.int32),
        np.asarray(strat_ix, np.int32),
    )


def primitive_rates(labels, n_primitives: int) -> np.ndarray:
    """Fraction of labelled tokens that belong to each primitive.

    Entries outside ``[0, n_primitives)`` (e.g. ``-1`` for prompt, EOS, padding) are ignored;
    ``rate[p] = #{label = p} / #{0 <= label < n_primitives}``, all zeros when nothing is labelled.

    Args:
      labels: int array of any shape.
      n_primitives: number of primitives, ``>= 1``.

    Returns:
      ``(n_primitives,)`` float64 summing to 1 (or 0).

    Raises:
      ValueError: non-integer labels or ``n_primitives < 1``.
    """
    lab = np.asarray(labels)
    if not np.issubdtype(lab.dtype, np.integer):
        raise ValueError(f"primitive_rates: labels must be integers, got {lab.dtype}")
    if int(n_primitives) < 1:
        raise ValueError(f"primitive_rates: n_primitives must be >= 1, got {n_primitives}")
    lab = lab[(lab >= 0) & (lab < n_primitives)]
    counts = np.bincount(lab.astype(np.int64), minlength=int(n_primitives)).astype(np.float64)
    return counts / counts.sum() if counts.sum() > 0 else counts
