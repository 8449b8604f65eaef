"""Step-wise arithmetic solutions with labelled reflections: the synthetic task of DyCon.

A problem is ``k`` operands ``a_1 .. a_k`` in ``{0 .. base-1}``; its solution is the running sum
modulo ``base``, one *step* per operand (difficulty = number of steps = ``k``). Every sequence is::

    BOS (1,a_1) (2,a_2) .. (k,a_k) =                        prompt (operand tokens carry their index)
    s_0 (1,a_1) s_1 ;   s_1 (2,a_2) s_2 ;   ..              steps: [previous] [operand] [value] ;
    s_{j-1} (j,a_j) x ; wait s_{j-1} (j,a_j) s_j ;          an injected error x != s_j, then a
                                                            corrective reflection (needed)
    .. s_k ; wait s_{k-1} (k,a_k) s_k ; ..                  redundant reflections: the final step
                                                            re-checked after the answer is known
    </think> s_k EOS                                        end of thinking, answer

with ``s_0 = 0`` and ``s_j = (s_{j-1} + a_j) mod base``. The *step boundaries* are the ``=`` that
ends the prompt and every ``;``. Every token carries a role (prompt, step, error, corrective
reflection, redundant reflection, end of thinking, answer, padding).

The remaining-length target at a boundary ``t`` (reconstruction: the paper regresses a
"log-normalised remaining length"; the normaliser is ours) is
``log(1 + r_t) / log(1 + R)`` with ``r_t = e - t`` the thinking tokens after ``t`` up to and
including ``</think>`` (at position ``e``) and ``R`` the longest thinking the generator can emit
(:meth:`DyconVocab.max_think`), so the target lies in ``(0, 1]``.

References:
  Tu, Li, Zhen, Qin, Wei, Piao, Tian, Li, Zhang, "DyCon: dynamic reasoning control via evolving
  difficulty modeling", ICML 2026, arXiv:2606.07108. The task itself is ours (the paper uses
  pretrained reasoning models on math benchmarks).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

__all__ = [
    "DYCON_ROLES",
    "DyconBatch",
    "DyconGeneration",
    "DyconVocab",
    "make_dycon_task",
    "parse_dycon_generation",
    "remaining_length_target",
]

#: Per-token role labels of :class:`DyconBatch` (``roles``), name -> int.
DYCON_ROLES: dict[str, int] = {
    "pad": 0,
    "prompt": 1,
    "step": 2,
    "error": 3,
    "corrective": 4,
    "redundant": 5,
    "end": 6,
    "answer": 7,
}


@dataclasses.dataclass(frozen=True)
class DyconVocab:
    """Token ids of the task: 7 specials, ``base`` digits, ``max_operands * base`` operand tokens.

    Attributes:
      base: modulus ``>= 2`` (digits ``0 .. base-1``).
      max_operands: largest ``k`` (operand tokens ``(i, a)`` for ``i = 1 .. max_operands``).
      max_redundant: most redundant reflections one solution may hold.
    """

    base: int = 5
    max_operands: int = 8
    max_redundant: int = 3

    PAD = 0
    BOS = 1
    EQ = 2
    SEP = 3
    WAIT = 4
    END_THINK = 5
    EOS = 6

    def __post_init__(self):
        for name, low in (("base", 2), ("max_operands", 1), ("max_redundant", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"DyconVocab.{name} must be an int >= {low}, got {value!r}")

    @property
    def size(self) -> int:
        """Vocabulary size ``V``."""
        return 7 + self.base + self.max_operands * self.base

    @property
    def boundary_tokens(self) -> tuple[int, ...]:
        """Tokens that end a step (``=``, ``;``)."""
        return (self.EQ, self.SEP)

    def digit(self, value):
        """Token of digit ``value`` (array-friendly)."""
        return 7 + np.asarray(value)

    def operand(self, index, value):
        """Token of operand ``index`` (1-based) with value ``value`` (array-friendly)."""
        return 7 + self.base + (np.asarray(index) - 1) * self.base + np.asarray(value)

    def is_digit(self, tok: int) -> bool:
        return 7 <= tok < 7 + self.base

    def is_operand(self, tok: int) -> bool:
        return 7 + self.base <= tok < self.size

    def operand_parts(self, tok: int) -> tuple[int, int]:
        """``(index, value)`` of an operand token."""
        off = tok - 7 - self.base
        return off // self.base + 1, off % self.base

    def max_think(self) -> int:
        """Longest thinking (tokens after ``=`` up to and including ``</think>``): every step
        erroneous and corrected, then ``max_redundant`` redundant reflections."""
        return 9 * self.max_operands + 5 * self.max_redundant + 1

    def max_len(self) -> int:
        """Longest sequence: prompt ``k + 2``, thinking, answer and EOS."""
        return self.max_operands + 2 + self.max_think() + 2


class DyconBatch(NamedTuple):
    """Generated solutions, right-padded with ``PAD`` to a common length ``T``.

    Attributes:
      tokens: ``(N, T)`` int32.
      roles: ``(N, T)`` int32 role of each token (:data:`DYCON_ROLES`).
      boundary: ``(N, T)`` bool, True at the ``=`` ending the prompt and at every ``;``.
      target: ``(N, T)`` float32 remaining-length target at boundaries
        (:func:`remaining_length_target`), 0 elsewhere.
      loss_weights: ``(N, T)`` float32, 1 on every token after the prompt (the model learns the
        whole solution, errors included), 0 on the prompt and padding.
      prompt_len: ``(N,)`` int32 prompt length ``k + 2`` (the ``=`` is at ``prompt_len - 1``).
      think_end: ``(N,)`` int32 position of ``</think>``.
      length: ``(N,)`` int32 valid tokens (through EOS).
      num_operands: ``(N,)`` int32 ``k`` (the difficulty, in steps).
      operands: ``(N, max_operands)`` int32 values, ``-1`` past ``k``.
      answer: ``(N,)`` int32 ``sum(operands) mod base``.
    """

    tokens: np.ndarray
    roles: np.ndarray
    boundary: np.ndarray
    target: np.ndarray
    loss_weights: np.ndarray
    prompt_len: np.ndarray
    think_end: np.ndarray
    length: np.ndarray
    num_operands: np.ndarray
    operands: np.ndarray
    answer: np.ndarray

    def prompts(self, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(prompts (N, width) int32 right-padded with PAD, lengths (N,))`` for sampling.

        ``width`` defaults to the longest prompt; pass ``max_operands + 2`` for a fixed shape.
        """
        width = int(self.prompt_len.max()) if width is None else int(width)
        if width < int(self.prompt_len.max()):
            raise ValueError(
                f"prompts: width {width} < longest prompt {int(self.prompt_len.max())}"
            )
        out = np.where(np.arange(width)[None] < self.prompt_len[:, None], self.tokens[:, :width], 0)
        return out.astype(np.int32), self.prompt_len.copy()


def remaining_length_target(remaining, max_think: int):
    """``log(1 + r) / log(1 + max_think)``: the log-normalised remaining length (reconstruction).

    Args:
      remaining: array of thinking tokens still to come (``>= 0``, ``<= max_think``).
      max_think: normaliser ``R >= 1``.

    Returns:
      float32 array of ``remaining``'s shape in ``[0, 1]``.

    Raises:
      ValueError: ``max_think < 1`` or a ``remaining`` outside ``[0, max_think]``.
    """
    r = np.asarray(remaining, np.float64)
    if int(max_think) < 1:
        raise ValueError(f"remaining_length_target: max_think must be >= 1, got {max_think}")
    if r.size and (np.min(r) < 0 or np.max(r) > max_think):
        raise ValueError(
            f"remaining_length_target: remaining must lie in [0, {max_think}], got "
            f"[{np.min(r)}, {np.max(r)}]"
        )
    return (np.log1p(r) / np.log1p(float(max_think))).astype(np.float32)


def _solution(rng, vocab: DyconVocab, ops, error_rate, redundant_rate):
    """One sequence's tokens and roles (lists)."""
    base = vocab.base
    toks = [vocab.BOS] + [int(vocab.operand(i + 1, a)) for i, a in enumerate(ops)] + [vocab.EQ]
    roles = [DYCON_ROLES["prompt"]] * len(toks)

    def put(ts, role):
        toks.extend(int(t) for t in ts)
        roles.extend([DYCON_ROLES[role]] * len(ts))

    s = 0
    for j, a in enumerate(ops, start=1):
        new = (s + a) % base
        op = vocab.operand(j, a)
        if rng.random() < error_rate:
            wrong = (new + 1 + rng.integers(base - 1)) % base
            put([vocab.digit(s), op, vocab.digit(wrong), vocab.SEP], "error")
            put([vocab.WAIT, vocab.digit(s), op, vocab.digit(new), vocab.SEP], "corrective")
        else:
            put([vocab.digit(s), op, vocab.digit(new), vocab.SEP], "step")
        prev, s = s, new
    for _ in range(vocab.max_redundant):
        if rng.random() >= redundant_rate:
            break
        put(
            [
                vocab.WAIT,
                vocab.digit(prev),
                vocab.operand(len(ops), ops[-1]),
                vocab.digit(s),
                vocab.SEP,
            ],
            "redundant",
        )
    put([vocab.END_THINK], "end")
    put([vocab.digit(s), vocab.EOS], "answer")
    return toks, roles, s


def make_dycon_task(
    num_examples: int,
    *,
    vocab: DyconVocab = DyconVocab(),
    min_operands: int = 2,
    error_rate: float = 0.1,
    redundant_rate: float = 0.5,
    seed: int = 0,
    num_operands=None,
) -> DyconBatch:
    """Draws ``num_examples`` step-wise solutions (see the module docstring for the format).

    ``k`` is uniform on ``[min_operands, vocab.max_operands]`` (or given), operands uniform on
    ``{0 .. base-1}``; each step is wrong with probability ``error_rate`` (a uniform wrong value,
    then a corrective reflection), and after the last step each further redundant reflection
    follows with probability ``redundant_rate`` (at most ``vocab.max_redundant``).

    Args:
      num_examples: ``N >= 1``.
      vocab: sizes and token ids.
      min_operands: smallest ``k`` (``1 <= min_operands <= vocab.max_operands``).
      error_rate: in ``[0, 1)``.
      redundant_rate: in ``[0, 1]``.
      seed: numpy ``default_rng`` seed (same seed, same batch).
      num_operands: optional ``(N,)`` ints fixing each ``k``.

    Returns:
      :class:`DyconBatch`.

    Raises:
      ValueError: a value out of the ranges above.
    """
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 1:
        raise ValueError(f"make_dycon_task: num_examples must be an int >= 1, got {num_examples!r}")
    if not 1 <= min_operands <= vocab.max_operands:
        raise ValueError(
            f"make_dycon_task: min_operands must be in [1, {vocab.max_operands}], got {min_operands}"
        )
    if not 0.0 <= error_rate < 1.0:
        raise ValueError(f"make_dycon_task: error_rate must be in [0, 1), got {error_rate}")
    if not 0.0 <= redundant_rate <= 1.0:
        raise ValueError(f"make_dycon_task: redundant_rate must be in [0, 1], got {redundant_rate}")
    rng = np.random.default_rng(seed)
    if num_operands is None:
        ks = rng.integers(min_operands, vocab.max_operands + 1, size=num_examples)
    else:
        ks = np.asarray(num_operands, np.int64)
        if ks.shape != (num_examples,) or ks.min() < 1 or ks.max() > vocab.max_operands:
            raise ValueError(
                f"make_dycon_task: num_operands must be ({num_examples},) ints in "
                f"[1, {vocab.max_operands}], got shape {ks.shape}"
            )
    seqs, answers = [], []
    operands = np.full((num_examples, vocab.max_operands), -1, np.int32)
    for n, k in enumerate(ks):
        ops = rng.integers(0, vocab.base, size=int(k))
        operands[n, :k] = ops
        toks, roles, ans = _solution(rng, vocab, [int(a) for a in ops], error_rate, redundant_rate)
        seqs.append((toks, roles))
        answers.append(ans)
    width = max(len(t) for t, _ in seqs)
    tokens = np.zeros((num_examples, width), np.int32)
    roles = np.zeros((num_examples, width), np.int32)
    for n, (t, r) in enumerate(seqs):
        tokens[n, : len(t)] = t
        roles[n, : len(r)] = r
    length = np.array([len(t) for t, _ in seqs], np.int32)
    prompt_len = (ks + 2).astype(np.int32)
    think_end = np.argmax(tokens == vocab.END_THINK, axis=1).astype(np.int32)
    pos = np.arange(width)[None]
    boundary = ((tokens == vocab.SEP) | (tokens == vocab.EQ)) & (pos < think_end[:, None])
    remaining = np.where(boundary, think_end[:, None] - pos, 0)
    target = np.where(boundary, remaining_length_target(remaining, vocab.max_think()), 0.0)
    weights = ((pos >= prompt_len[:, None]) & (pos < length[:, None])).astype(np.float32)
    return DyconBatch(
        tokens=tokens,
        roles=roles,
        boundary=boundary,
        target=target.astype(np.float32),
        loss_weights=weights,
        prompt_len=prompt_len,
        think_end=think_end,
        length=length,
        num_operands=ks.astype(np.int32),
        operands=operands,
        answer=np.asarray(answers, np.int32),
    )


class DyconGeneration(NamedTuple):
    """What :func:`parse_dycon_generation` reads from one generated continuation.

    Attributes:
      correct: the continuation has ``</think>`` followed by the right answer digit.
      finished: ``</think>`` was emitted.
      num_tokens: tokens generated through ``EOS`` (all of them if no ``EOS``).
      think_tokens: tokens before ``</think>`` (all tokens if it never came).
      corrective: reflections (``wait`` units) re-checking a step whose value was wrong.
      redundant: reflections re-checking a step whose value was right.
      errors: step units (not reflections) with a wrong value.
      uncorrected: erroneous step units not followed by a reflection.
      malformed: units that do not read as ``[prev] [operand] [value]`` (with a leading ``wait``
        for reflections).
    """

    correct: bool
    finished: bool
    num_tokens: int
    think_tokens: int
    corrective: int
    redundant: int
    errors: int
    uncorrected: int
    malformed: int


def parse_dycon_generation(
    tokens, answer: int, vocab: DyconVocab = DyconVocab()
) -> DyconGeneration:
    """Reads a generated continuation (the tokens after the prompt) of the DyCon task.

    The thinking (before ``</think>``) is split at ``;`` into units; a unit ``[p, (j, a), v]`` is
    a step (wrong when ``v != p + a mod base``), ``[wait, p, (j, a), v]`` a reflection, classed
    corrective when the unit it follows was wrong and redundant otherwise (it re-checks a right
    value). Only local arithmetic is judged: a step copying a wrong previous value still counts
    as right, and the final answer decides ``correct``.

    Args:
      tokens: 1-D int token ids generated after the prompt.
      answer: the true answer digit value.
      vocab: token ids.

    Returns:
      :class:`DyconGeneration`.
    """
    toks = [int(t) for t in np.asarray(tokens).reshape(-1)]
    n_tok = toks.index(vocab.EOS) + 1 if vocab.EOS in toks else len(toks)
    toks = toks[:n_tok]
    finished = vocab.END_THINK in toks
    think = toks[: toks.index(vocab.END_THINK)] if finished else toks
    correct = False
    if finished:
        e = toks.index(vocab.END_THINK)
        correct = e + 1 < len(toks) and toks[e + 1] == int(vocab.digit(answer))
    units, cur = [], []
    for t in think:
        if t == vocab.SEP:
            units.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        units.append(cur)
    corrective = redundant = errors = uncorrected = malformed = 0
    prev_wrong = None  # None: no judged unit before
    for i, u in enumerate(units):
        reflect = bool(u) and u[0] == vocab.WAIT
        body = u[1:] if reflect else u
        ok_shape = (
            len(body) == 3
            and vocab.is_digit(body[0])
            and vocab.is_operand(body[1])
            and vocab.is_digit(body[2])
        )
        if not ok_shape:
            malformed += 1
            prev_wrong = None
            continue
        _, a = vocab.operand_parts(body[1])
        wrong = (body[2] - 7) != ((body[0] - 7) + a) % vocab.base
        if reflect:
            if prev_wrong is True:
                corrective += 1
            elif prev_wrong is False:
                redundant += 1
        else:
            errors += int(wrong)
            nxt = units[i + 1] if i + 1 < len(units) else []
            if wrong and not (nxt and nxt[0] == vocab.WAIT):
                uncorrected += 1
        prev_wrong = wrong
    return DyconGeneration(
        correct=bool(correct),
        finished=bool(finished),
        num_tokens=n_tok,
        think_tokens=len(think),
        corrective=corrective,
        redundant=redundant,
        errors=errors,
        uncorrected=uncorrected,
        malformed=malformed,
    )
