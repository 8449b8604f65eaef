"""Synthetic visual questions about the scikit-learn digits, plus text-only arithmetic.

The task of the residual-geometry experiment (Xi et al., ICML 2026, reproduced small): a tiny
vision-language model sees an 8×8 digit as 16 visual tokens (2×2 patches,
:func:`fidia_jax.models.image_patches`) followed by a 6-token question whose last token is the
answer. Three visual question kinds need the image; one text-only kind (``a + b``) comes with a
blank image and needs only the text (its answer does not depend on the visual tokens, though
the model still attends to them). The images come from :func:`fidia_jax.data.load_digit_images` (8×8, in ``[0, 1]``).

Every sequence is ``[BOS, kind, arg1, arg2, ASK, answer]`` (``PAD`` for unused arguments):

=========  ==========================================  ====================
kind       question                                    answer
=========  ==========================================  ====================
``which``  which digit is shown?                       ``N<d>``
``even``   is the digit even?                          ``YES`` / ``NO``
``plus``   shown digit + k (``arg1 = N<k>``, k 0..9)   ``N<d + k>``
``add``    text only: a + b (``arg1, arg2``, 0..9)     ``N<a + b>``
=========  ==========================================  ====================

The loss weights are 1 on the answer token only (answer-only loss).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from fidia_jax.errors import DataError

__all__ = [
    "DIGIT_QA_KINDS",
    "DIGIT_QA_VOCAB",
    "DigitQuestions",
    "digit_qa_token",
    "make_digit_questions",
]

#: Question kinds (index = kind id); ``add`` is the text-only one.
DIGIT_QA_KINDS: tuple[str, ...] = ("which", "even", "plus", "add")
_SPECIAL = ("PAD", "BOS", "Q_WHICH", "Q_EVEN", "Q_PLUS", "Q_ADD", "ASK", "YES", "NO")
#: Token name -> id: the specials above, then ``N0`` .. ``N18`` (numbers), 28 ids in all.
DIGIT_QA_VOCAB: dict[str, int] = {
    **{name: i for i, name in enumerate(_SPECIAL)},
    **{f"N{n}": len(_SPECIAL) + n for n in range(19)},
}
SEQ_LEN = 6
ANSWER_INDEX = 5
_KIND_TOKEN = {"which": "Q_WHICH", "even": "Q_EVEN", "plus": "Q_PLUS", "add": "Q_ADD"}


def digit_qa_token(name: str) -> int:
    """The id of a token name (``"YES"``, ``"N7"`` ...).

    Raises:
      KeyError: an unknown name (the message lists the vocabulary's size and a few names).
    """
    if name not in DIGIT_QA_VOCAB:
        raise KeyError(f"digit_qa_token: unknown token {name!r}; known: PAD, BOS, ..., N0..N18")
    return DIGIT_QA_VOCAB[name]


class DigitQuestions(NamedTuple):
    """A batch of questions (row ``i`` of every array is one example).

    Attributes:
      patches: ``(N, 16, 4)`` float32 visual tokens (pixels / 16, so in ``[0, 1]``); zeros for
        the text-only ``add`` kind.
      tokens: ``(N, 6)`` int32 ``[BOS, kind, arg1, arg2, ASK, answer]``.
      weights: ``(N, 6)`` float32, 1 on the answer token only.
      kind: ``(N,)`` int32 index into :data:`DIGIT_QA_KINDS`.
      answer: ``(N,)`` int32 the answer's token id (``tokens[:, 5]``).
      visual: ``(N,)`` bool, the question needs the image.
      image_index: ``(N,)`` int32 index of the image used (``-1`` for text-only).
    """

    patches: np.ndarray
    tokens: np.ndarray
    weights: np.ndarray
    kind: np.ndarray
    answer: np.ndarray
    visual: np.ndarray
    image_index: np.ndarray


def _patches(images: np.ndarray, patch: int = 2) -> np.ndarray:
    """``(B, 8, 8)`` -> ``(B, 16, 4)`` row-major 2×2 patches (as ``models.image_patches``)."""
    b, hh, ww = images.shape
    x = images.reshape(b, hh // patch, patch, ww // patch, patch)
    return x.transpose(0, 1, 3, 2, 4).reshape(b, (hh // patch) * (ww // patch), patch * patch)


def make_digit_questions(
    images: np.ndarray,
    labels: np.ndarray,
    n: int,
    *,
    seed: int,
    kinds: tuple[str, ...] = DIGIT_QA_KINDS,
) -> DigitQuestions:
    """Draws ``n`` questions, each of a kind chosen uniformly from ``kinds``.

    Args:
      images: ``(M, 8, 8)`` images in ``[0, 1]`` (e.g. one split of
        :func:`fidia_jax.data.load_digit_images`).
      labels: ``(M,)`` int digit labels in ``0..9``.
      n: number of questions (``>= 1``).
      seed: numpy generator seed (image, kind, ``k``, ``a``, ``b`` are all drawn from it).
      kinds: subset of :data:`DIGIT_QA_KINDS`.

    Returns:
      :class:`DigitQuestions`.

    Raises:
      DataError: images not ``(M, 8, 8)`` with ``M >= 1`` or values outside ``[0, 1]``, labels
        not ``(M,)`` in ``0..9``, ``n < 1``, or an unknown / empty ``kinds``.
    """
    where = "make_digit_questions"
    images = np.asarray(images, np.float32)
    labels = np.asarray(labels)
    if images.ndim != 3 or images.shape[1:] != (8, 8) or images.shape[0] < 1:
        raise DataError(f"{where}: images must be (M, 8, 8) with M >= 1, got {images.shape}")
    if not np.all(np.isfinite(images)) or images.min() < 0 or images.max() > 1:
        raise DataError(f"{where}: image values must be in [0, 1] (divide raw digits by 16)")
    if labels.shape != (images.shape[0],) or labels.min() < 0 or labels.max() > 9:
        raise DataError(f"{where}: labels must be ({images.shape[0]},) digits in 0..9")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise DataError(f"{where}: n must be an int >= 1, got {n!r}")
    unknown = [k for k in kinds if k not in DIGIT_QA_KINDS]
    if not kinds or unknown:
        raise DataError(
            f"{where}: kinds must be a non-empty subset of {DIGIT_QA_KINDS}, got {kinds}"
        )
    rng = np.random.default_rng(seed)
    kind_ids = np.array([DIGIT_QA_KINDS.index(k) for k in kinds])[rng.integers(0, len(kinds), n)]
    img = rng.integers(0, images.shape[0], n)
    arg_a = rng.integers(0, 10, n)
    arg_b = rng.integers(0, 10, n)
    v = DIGIT_QA_VOCAB
    tokens = np.full((n, SEQ_LEN), v["PAD"], np.int32)
    tokens[:, 0] = v["BOS"]
    tokens[:, 4] = v["ASK"]
    visual = kind_ids != DIGIT_QA_KINDS.index("add")
    d = labels[img].astype(np.int64)
    for i in range(n):
        kind = DIGIT_QA_KINDS[kind_ids[i]]
        tokens[i, 1] = v[_KIND_TOKEN[kind]]
        if kind == "which":
            ans = f"N{d[i]}"
        elif kind == "even":
            ans = "YES" if d[i] % 2 == 0 else "NO"
        elif kind == "plus":
            tokens[i, 2] = v[f"N{arg_a[i]}"]
            ans = f"N{d[i] + arg_a[i]}"
        else:
            tokens[i, 2], tokens[i, 3] = v[f"N{arg_a[i]}"], v[f"N{arg_b[i]}"]
            ans = f"N{arg_a[i] + arg_b[i]}"
        tokens[i, ANSWER_INDEX] = v[ans]
    patches = _patches(images[img]) * visual[:, None, None]
    weights = np.zeros((n, SEQ_LEN), np.float32)
    weights[:, ANSWER_INDEX] = 1.0
    return DigitQuestions(
        patches=patches.astype(np.float32),
        tokens=tokens,
        weights=weights,
        kind=kind_ids.astype(np.int32),
        answer=tokens[:, ANSWER_INDEX].copy(),
        visual=visual,
        image_index=np.where(visual, img, -1).astype(np.int32),
    )
