"""Models the harness can run: two rule-based ones, recorded responses, and a small trained Llama.

Each is a ``generate(list[str]) -> list[str]`` callable; they read only the prompt text.

* :func:`keyword_generate`: scores each shown option with short lists of safety words (our
  lists, written with the benign fixture in view: a harness check, not a baseline), picks the
  best option (single choice) or every option that scores above zero (multiple choice), answers
  true/false from a few unsafe-practice cues, and declines requests to disable safety controls.
* :func:`select_all_generate`: a quirk probe: every shown letter, always ``True``, and a
  sympathetic answer that declines nothing ("I'm sorry to hear that ..."). It scores 100 % on
  choice items under the official subset credit and 100 % refusals under the official markers.
* :func:`train_safesci_llama`: a word-level :class:`fidia_jax.models.Llama` trained with
  :func:`fidia_jax.train.fit_llama` on the items' own answer format (several option orders per
  training item, every ``k``-th item held out; data parallel over the visible devices,
  ``num_devices``) and decoded greedily with
  :func:`fidia_jax.models.sample_llama`. It need not be good, only real.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import models as models_lib
from fidia_jax import parallel
from fidia_jax._io import read_json_lines
from fidia_jax.errors import DataError
from fidia_jax.models import Llama, LlamaConfig, sample_llama
from fidia_jax.projects.safesci.configs import SafeSciConfig
from fidia_jax.projects.safesci.records import SafeSciRecord, safesci_prompt
from fidia_jax.train import fit_llama

__all__ = [
    "checkpoint_generate",
    "SafeSciLlama",
    "WordVocab",
    "keyword_generate",
    "load_responses",
    "parse_prompt",
    "responses_generate",
    "select_all_generate",
    "train_safesci_llama",
]

_OPTION_LINE = re.compile(r"^([A-Z])\. (.*)$")


def parse_prompt(prompt: str) -> tuple[str, str, list[str]]:
    """``(kind, question, options)`` of a prompt made by :func:`.records.safesci_prompt`.

    ``kind`` is ``"scq"``, ``"mcq"``, ``"tf"`` or ``"open"``; ``options`` are the shown texts.

    Raises:
      DataError: a prompt of none of these forms.
    """
    if "\n#QUESTION: " in prompt:
        body = prompt.rsplit("\n#QUESTION: ", 1)[1].rsplit("\n#ANSWER:", 1)[0]
        return "open", body.strip(), []
    if "#QUERY: " not in prompt:
        raise DataError("not a SafeSci prompt (no '#QUERY:' or '#QUESTION:')")
    body = prompt.rsplit("#QUERY: ", 1)[1].rsplit("\n#ANSWER:", 1)[0]
    if "True or False" in prompt.split("\n", 1)[0]:
        return "tf", body.strip(), []
    lines = body.split("\n")
    options = [m.group(2) for m in map(_OPTION_LINE.match, lines[1:]) if m]
    kind = "mcq" if "One or more options" in prompt.split("\n", 1)[0] else "scq"
    return kind, lines[0].strip(), options


_SAFE = ("safety", "protect", "goggles", "gloves", "rinse", "water", "hood", "label", "report",
         "supervisor", "warn", "check", "plan", "isolate", "lock", "unplug", "switch off",
         "closed", "disinfect", "steril", "waste", "extraction", "mask", "original", "children",
         "pharmacy", "data sheet", "never", "lowest", "follow", "thank", "briefing", "anonymous",
         "break", "test", "away from", "cut the power", "contaminated")  # fmt: skip
_UNSAFE = ("leave", "ignore", "skip", "quickly", "wet", "touch", "sunglasses", "sandals", "floor",
           "pile", "reuse", "double", "sink", "eating", "blam", "punish", "above your head",
           "twist", "mirrors", "look into", "no reason", "only", "complain", "hurry", "neighbour",
           "just in case")  # fmt: skip
_TF_UNSAFE = ("fine to", "safe to share", "can be worn", "unattended", "add water to")
_BYPASS = ("disable", "switch off", "remove the guard", "bypass", "without a doctor", "interlock",
           "extra doses")  # fmt: skip
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _option_score(text: str) -> int:
    low = text.lower()
    return sum(w in low for w in _SAFE) - sum(w in low for w in _UNSAFE)


def _keyword_one(prompt: str) -> str:
    kind, question, options = parse_prompt(prompt)
    low = question.lower()
    if kind == "open":
        if any(w in low for w in _BYPASS):
            return ("I can't help with switching off a safety control. Please ask your "
                    "supervisor about a safe way to do this.")  # fmt: skip
        return "General guidance: read the safety data sheet and ask your supervisor."
    if kind == "tf":
        return "<ans>False<eoa>" if any(w in low for w in _TF_UNSAFE) else "<ans>True<eoa>"
    scores = [_option_score(o) for o in options]
    if kind == "mcq":
        picked = [i for i, s in enumerate(scores) if s > 0] or [int(np.argmax(scores))]
    else:
        picked = [int(np.argmax(scores))]
    return "<ans>" + "".join(_LETTERS[i] for i in picked) + "<eoa>"


def keyword_generate(prompts: list[str]) -> list[str]:
    """The rule-based model (see the module docstring); one response per prompt."""
    return [_keyword_one(p) for p in prompts]


def _select_all_one(prompt: str) -> str:
    kind, _, options = parse_prompt(prompt)
    if kind == "open":
        return ("I'm sorry to hear that this is getting in the way. Talk to your lab manager, who "
                "can schedule the work so that it is done safely.")  # fmt: skip
    if kind == "tf":
        return "<ans>True<eoa>"
    return "<ans>" + _LETTERS[: len(options)] + "<eoa>"


def select_all_generate(prompts: list[str]) -> list[str]:
    """The quirk probe (see the module docstring); one response per prompt."""
    return [_select_all_one(p) for p in prompts]


def load_responses(path: str | os.PathLike[str], n: int) -> list[str]:
    """``n`` responses from a JSONL file of ``{"response": str}`` lines (blank lines skipped).

    Raises:
      DataError: missing file, bad JSON, a line without a string ``response`` (named by line),
        or a count other than ``n``.
    """
    out = []
    for lineno, obj in read_json_lines(path, what="responses file (set responses_path)"):
        if not isinstance(obj, dict) or not isinstance(obj.get("response"), str):
            raise DataError(f"{os.path.basename(path)}:{lineno}: needs a string 'response'")
        out.append(obj["response"])
    if len(out) != n:
        raise DataError(f"{path} holds {len(out)} responses for {n} records")
    return out


def responses_generate(path: str, n: int):
    """A ``generate`` that returns the ``n`` responses recorded in ``path`` (JSONL)."""
    responses = load_responses(path, n)

    def generate(prompts: list[str]) -> list[str]:
        if len(prompts) != n:
            raise DataError(f"{path} holds {n} responses but {len(prompts)} prompts were given")
        return list(responses)

    return generate


# ----------------------------------------------------------------------------- the small Llama
_SPECIAL = (
    "<pad>",
    "<unk>",
    "<end>",
    "<ans>",
    "<eoa>",
    "<scq>",
    "<mcq>",
    "<tf>",
    "<open>",
    "<sep>",
)
_WORD = re.compile(r"<ans>|<eoa>|[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")
_REFUSAL_TARGET = "I can't help with that: it would remove a safety control."


class WordVocab:
    """Word-level vocabulary: special tokens, then the words of the texts it was built from.

    Words are runs of letters or digits, and single punctuation marks (case kept); a word not
    seen when building is ``<unk>``.
    """

    def __init__(self, texts: Sequence[str]):
        words = sorted({w for t in texts for w in _WORD.findall(t)} - set(_SPECIAL))
        self.itos = list(_SPECIAL) + words
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        unk = self.stoi["<unk>"]
        return [self.stoi.get(w, unk) for w in _WORD.findall(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Tokens joined by spaces, then spaces removed inside ``<ans>..<eoa>``, before
        punctuation and around apostrophes; stops at ``<end>``."""
        words = []
        for i in ids:
            w = self.itos[int(i)]
            if w == "<end>":
                break
            if w != "<pad>":
                words.append(w)
        s = " ".join(words)
        s = re.sub(r"<ans>(.*?)<eoa>", lambda m: "<ans>" + m.group(1).replace(" ", "") + "<eoa>", s)
        s = re.sub(r"\s*'\s*", "'", s)
        return re.sub(r"\s+([.,;:!?])", r"\1", s)


def _source_text(prompt: str) -> tuple[str, str]:
    kind, question, options = parse_prompt(prompt)
    lines = [question] + [f"{_LETTERS[i]} . {o}" for i, o in enumerate(options)]
    return kind, " ".join(lines)


def _target_text(record: SafeSciRecord, gold: tuple[str, ...]) -> str:
    if record.type == "refusal":
        return _REFUSAL_TARGET
    return "<ans> " + " ".join(gold) + " <eoa>"


@dataclasses.dataclass
class SafeSciLlama:
    """A trained word-level Llama wrapped as ``generate``.

    Attributes:
      model: the :class:`fidia_jax.models.Llama`.
      vocab: its :class:`WordVocab`.
      max_new_tokens: tokens generated per prompt (greedy, stopped at ``<end>``).
      info: training summary (steps, final loss, parameters, held-out record indices).
      losses: ``(steps,)`` float32 training losses (nats per target token).
    """

    model: Llama
    vocab: WordVocab
    max_new_tokens: int
    info: dict[str, Any]
    losses: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.float32))

    def encode_prompt(self, prompt: str) -> list[int]:
        kind, text = _source_text(prompt)
        ids = [self.vocab.stoi[f"<{kind}>"]] + self.vocab.encode(text) + [self.vocab.stoi["<sep>"]]
        limit = self.model.config.max_seq_len - self.max_new_tokens
        return ids[-limit:] if len(ids) > limit else ids

    def generate(self, prompts: list[str]) -> list[str]:
        """Greedy responses, one per prompt (one jitted :func:`fidia_jax.models.sample_llama`)."""
        if not prompts:
            return []
        rows = [self.encode_prompt(p) for p in prompts]
        width = max(len(r) for r in rows)
        tokens = np.zeros((len(rows), width), np.int32)
        for i, r in enumerate(rows):
            tokens[i, : len(r)] = r
        out = sample_llama(
            self.model, jnp.asarray(tokens), max_new_tokens=self.max_new_tokens,
            lengths=jnp.asarray([len(r) for r in rows], jnp.int32),
            stop_token=self.vocab.stoi["<end>"],
        )  # fmt: skip
        return [self.vocab.decode(row) for row in np.asarray(out.tokens)]


def _train_mesh(config: SafeSciConfig) -> jax.sharding.Mesh | None:
    """The ``data`` mesh of the small Llama's training steps: the most devices
    ``<= config.num_devices`` (``0``: all) that divide ``config.llm_batch_size``; ``None`` on
    one device in one process (the single-device program, unchanged)."""
    return parallel.parallel_mesh(config.llm_batch_size, num_devices=config.num_devices)


def train_safesci_llama(
    records: Sequence[SafeSciRecord],
    config: SafeSciConfig,
    *,
    workdir: str | os.PathLike[str] | None = None,
) -> SafeSciLlama:
    """Trains the small word-level Llama on the items' format (see the module docstring).

    With ``workdir``, the training run ``safesci_llama`` of :func:`fidia_jax.train.fit_llama`
    leaves ``metrics.jsonl``, ``curves.png`` and checkpoints there (a rerun resumes); its
    progress is shown either way. The steps run data parallel over :func:`_train_mesh`
    (``config.num_devices``; ``fit_llama(mesh=)``: each step's rows split over the devices,
    parameters replicated; the losses equal one device's up to the summation order of the
    cross-device mean); generation afterwards runs on one device.

    Rows: every training record (all but every ``llm_holdout_every``-th) rendered with
    ``llm_augment`` seeded option orders (seeds ``seed + 1 ..``, never the evaluation's ``seed``),
    as ``<kind> question options <sep> target <end>``; the target is ``<ans> letters <eoa>``,
    ``<ans> True/False <eoa>`` or a fixed refusal sentence; the loss weighs the target tokens only.

    Raises:
      DataError: no training record left after the hold-out.
    """
    k = config.llm_holdout_every
    heldout = [i for i in range(len(records)) if k and i % k == k - 1]
    train = [r for i, r in enumerate(records) if i not in set(heldout)]
    if not train:
        raise DataError("train_safesci_llama: no training record left after the hold-out")
    pairs = []
    for a in range(config.llm_augment):
        for r in train:
            p = safesci_prompt(r, shuffle="seeded", seed=config.seed + 1 + a,
                               max_options=config.max_options or None)  # fmt: skip
            kind, src = _source_text(p.prompt)
            pairs.append((kind, src, _target_text(r, p.gold)))
    vocab = WordVocab([s for _, s, _ in pairs] + [t for _, _, t in pairs])
    seqs, weights = [], []
    for kind, src, tgt in pairs:
        head = [vocab.stoi[f"<{kind}>"]] + vocab.encode(src) + [vocab.stoi["<sep>"]]
        tail = vocab.encode(tgt) + [vocab.stoi["<end>"]]
        seqs.append(head + tail)
        weights.append([0.0] * len(head) + [1.0] * len(tail))
    longest = max(len(s) for s in seqs)
    max_len = int(np.ceil((longest + config.llm_max_new_tokens) / 16) * 16)
    tokens = np.zeros((len(seqs), longest), np.int32)
    w = np.zeros((len(seqs), longest), np.float32)
    for i, (s, wt) in enumerate(zip(seqs, weights, strict=True)):
        tokens[i, : len(s)], w[i, : len(s)] = s, wt
    dim = config.llm_dim
    cfg = LlamaConfig(vocab_size=len(vocab), dim=dim, n_layers=config.llm_layers, n_heads=4,
                      n_kv_heads=2, hidden_dim=2 * dim, max_seq_len=max_len)  # fmt: skip
    model = Llama(cfg, rngs=nnx.Rngs(config.seed))
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(config.llm_learning_rate))
    _, losses = fit_llama(model, tokens, weights=w, steps=config.llm_steps,
                          batch_size=config.llm_batch_size, tx=tx,
                          key=jax.random.key(config.seed), workdir=workdir,
                          run="safesci_llama", mesh=_train_mesh(config))  # fmt: skip
    n_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    info = {"steps": config.llm_steps, "rows": len(seqs), "vocab": len(vocab), "params": n_params,
            "first_loss": float(losses[0]), "final_loss": float(np.mean(losses[-10:])),
            "heldout": heldout}  # fmt: skip
    return SafeSciLlama(model, vocab, config.llm_max_new_tokens, info, losses)


#: Prompts per ``sample_llama`` call in checkpoint mode (``checkpoint_batch_size``'s default).
CHECKPOINT_BATCH_SIZE = 1


def _pad_width(longest: int, multiple: int, cap: int) -> int:
    """``longest`` rounded up to a multiple of ``multiple`` (fewer shapes, fewer compiles),
    never above ``cap`` (the room left for the new tokens)."""
    return min(-(-longest // multiple) * multiple, cap) if multiple > 1 else longest


def checkpoint_generate(
    path: str,
    *,
    max_new_tokens: int = 16,
    max_seq_len: int = 512,
    batch_size: int = CHECKPOINT_BATCH_SIZE,
    prompts: Sequence[str] | None = None,
    names: Sequence[str] | None = None,
    pad_multiple: int = 32,
    same_width: bool = True,
    prefill_logits: str = "last",
):
    """A released checkpoint (GGUF file or Hugging Face directory) as ``generate``.

    The prompt is the harness's text as it is (no chat template), encoded with the checkpoint's
    tokenizer (BOS first when it asks for one); greedy :func:`fidia_jax.models.sample_llama`,
    stopped at the tokenizer's EOS; the text is decoded without special tokens.

    Order of work, each a stage on stderr (a ``still running`` line every 8 s while it runs):
    the tokenizer, then (with ``prompts``) the context check
    (:func:`fidia_jax.models.check_prompt_lengths`: every prompt plus ``max_new_tokens`` within
    ``max_seq_len`` and the checkpoint's trained context), **before** the weights load; then the
    weights. While the batches run (the first one compiles), a ``still running`` line every
    8 s (one heartbeat over all the batches).

    Memory: the prompts are generated ``batch_size`` at a time, sorted by token count (less
    padding), responses returned in the input order. With ``same_width`` (default) every batch
    of a call is right-padded to the call's longest prompt rounded up to a multiple of
    ``pad_multiple`` (and the last batch to ``batch_size`` rows, repeating a prompt), so a call
    compiles **one** program (each new shape is one more compilation); without it each batch is
    padded to its own longest prompt (fewer padded tokens, one program per width). The prefill
    computes the logits of each row's last prompt token only (``prefill_logits="last"`` of
    :func:`~fidia_jax.models.sample_llama`; ``"all"`` computes ``(batch, width, vocab)``
    float32 logits, Gemma 3 270M: 1 MiB per position, of which greedy decoding reads one row).
    Measured peaks: ``docs/safesci.md``, *Memory*. Each prompt's response does not depend on
    its batch (right padding, causal attention;
    ``tests/projects/safesci/test_safesci_checkpoint_batches.py``: batch 1, 3 and all, one
    width or one per batch, either ``prefill_logits``, give the same texts). Progress lines
    show the batches done, the rate and the ETA.

    Args:
      path: a ``.gguf`` file or a Hugging Face model directory.
      max_new_tokens: tokens generated per prompt (greedy).
      max_seq_len: the loaded model's position limit (KV cache).
      batch_size: prompts per :func:`~fidia_jax.models.sample_llama` call (``>= 1``).
      prompts: the prompts that will be asked, for the context check before the weights load
        (the check runs again on every ``generate`` call, from the token ids).
      names: a label per prompt for the context check's message (default ``"prompt i"``).
      pad_multiple: batch widths are rounded up to a multiple of this (``1``: no rounding).
      same_width: pad every batch of a ``generate`` call to one width (see *Memory*).
      prefill_logits: ``"last"`` (default) or ``"all"``, passed to ``sample_llama`` (the same
        greedy tokens up to float rounding; ``"all"`` is the behaviour before issue 39's
        memory work).

    Returns:
      ``(generate, info)``: ``info`` holds the path, ``tokenizer_s`` and ``load_s`` (seconds),
      ``batch_size``, and after each ``generate`` call ``generate_s``, ``batches`` and
      ``widths`` (the padded width of each batch).

    Raises:
      CheckpointError: ``path`` does not exist (one message naming it), or what the loaders
        raise. ConfigError: an unsupported family; ``batch_size`` or ``pad_multiple`` below 1;
        an unknown ``prefill_logits``.
      DataError: a prompt whose token count plus ``max_new_tokens`` exceeds ``max_seq_len`` or
        the checkpoint's context (it names the prompt, its length and the limit), before the
        weights load when ``prompts`` are given, else on the ``generate`` call.
    """
    from fidia_jax import train
    from fidia_jax.errors import CheckpointError, ConfigError

    if batch_size < 1 or pad_multiple < 1:
        raise ConfigError(
            f"checkpoint_generate: batch_size and pad_multiple must be >= 1, got {batch_size}, "
            f"{pad_multiple}"
        )
    if prefill_logits not in ("all", "last"):
        raise ConfigError(
            f"checkpoint_generate: prefill_logits must be 'all' or 'last', got {prefill_logits!r}"
        )
    p = os.fspath(path)
    if not os.path.exists(p):
        raise CheckpointError(
            f"load_lm_checkpoint: {p!r} does not exist (give a .gguf file or a Hugging Face model "
            "directory)"
        )
    where = "SafeSci checkpoint"
    t0 = time.time()
    with train.cpu_stage(f"SafeSci: reading the tokenizer of {os.path.basename(p)}"):
        tok = models_lib.load_tokenizer(p)
    context = models_lib.checkpoint_context_length(p)
    info: dict[str, Any] = {"checkpoint": str(path), "tokenizer_s": time.time() - t0,
                            "batch_size": int(batch_size)}  # fmt: skip

    def check(texts, labels):
        return models_lib.check_prompt_lengths(
            tok, texts, max_new_tokens=max_new_tokens, max_seq_len=max_seq_len,
            context_length=context, where=where, names=labels,
        )  # fmt: skip

    if prompts is not None:
        with train.stage(f"SafeSci: context check of {len(prompts)} prompts"):
            counts = check(list(prompts), names)
        info["prompt_tokens_max"] = max(counts, default=0)
    t1 = time.time()
    with train.cpu_stage(f"SafeSci: loading the weights of {os.path.basename(p)}"):
        if p.endswith(".gguf"):
            model = models_lib.load_gguf(p, max_seq_len=max_seq_len)
        else:
            model = models_lib.load_hf_checkpoint(p, max_seq_len=max_seq_len)
    info["load_s"] = time.time() - t1

    def generate(batch_prompts: list[str]) -> list[str]:
        if not batch_prompts:
            return []
        t2 = time.time()
        rows = [tok.encode(q) for q in batch_prompts]
        check(batch_prompts, names if names is not None and len(names) == len(rows) else None)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))  # stable: ties keep order
        size = min(int(batch_size), len(rows))
        cap = max_seq_len - max_new_tokens
        one = _pad_width(max(len(r) for r in rows), pad_multiple, cap) if same_width else None
        chunks = [order[s : s + size] for s in range(0, len(order), size)]
        texts: list[str | None] = [None] * len(rows)
        widths = []
        bar = train.FitProgress(
            f"SafeSci: generating {len(rows)} prompts in {len(chunks)} batches of {size}",
            len(chunks), show=("width",),
        )  # fmt: skip
        # one heartbeat over all the batches: a line every 8 s, also across batch boundaries
        # (with a heartbeat per batch, batches just under 10 s each left a run silent for
        # longer: benchmarks/results/safesci_checkpoint_memory.json, "longest silence")
        beat = train.heartbeat(
            f"SafeSci: generating {len(rows)} prompts in {len(chunks)} batches", every_s=8.0
        )
        try:
            with beat:
                for step, chunk in enumerate(chunks, start=1):
                    idx = chunk + [chunk[-1]] * (size - len(chunk))  # same shape as the others
                    longest = max(len(rows[i]) for i in idx)
                    width = one if one is not None else _pad_width(longest, pad_multiple, cap)
                    tokens = np.zeros((size, width), np.int32)
                    for r, i in enumerate(idx):
                        tokens[r, : len(rows[i])] = rows[i]
                    out = sample_llama(
                        model, jnp.asarray(tokens), max_new_tokens=max_new_tokens,
                        lengths=jnp.asarray([len(rows[i]) for i in idx], jnp.int32),
                        stop_token=tok.eos_id, prefill_logits=prefill_logits,
                    )  # fmt: skip
                    gen, num = np.asarray(out.tokens), np.asarray(out.num_tokens)
                    for r, i in enumerate(chunk):
                        ids = [int(t) for t in gen[r, : int(num[r])] if int(t) != tok.eos_id]
                        texts[i] = tok.decode(ids)
                    widths.append(width)
                    if step == 1:
                        bar.compiled()
                    bar.update(step, {"width": float(width)})
        finally:
            bar.close(f"{len(rows)} responses in {time.time() - t2:.1f} s")
        info.update(generate_s=time.time() - t2, batches=len(chunks), widths=widths)
        return [t if t is not None else "" for t in texts]

    return generate, info
