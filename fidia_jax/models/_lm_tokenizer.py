"""The tokenizer of a GGUF file, rebuilt to give the ids the reference tokenizers give.

Two kinds of GGUF vocabulary (``tokenizer.ggml.model``):

* ``llama`` -- SentencePiece (Gemma, Llama 2, Mistral): pieces, scores and token types. Rebuilt as
  a ``sentencepiece`` BPE model wrapped by :class:`GGUFSentencePiece`, which first cuts the text at
  the vocabulary's control and user-defined tokens (longest first, matched on the raw text, as
  llama.cpp and ``transformers`` do), so that a token of real spaces (llama.cpp's converter spells
  Gemma's runs of spaces ``"    "``, not ``"▁▁▁▁"``) comes out whole. The space prefix
  (``tokenizer.ggml.add_space_prefix``; default **true** when the key is absent, llama.cpp's and
  ``transformers``' default for this kind) goes before the text only where it starts with a plain
  fragment that does not already start with a space (``transformers``' ``Metaspace`` rule;
  llama.cpp's own rule was not compared).
* ``gpt2`` -- byte-level BPE (Llama 3, Qwen 2/3): tokens and ``tokenizer.ggml.merges``, rebuilt as a
  ``tokenizers`` BPE model whose pre-tokenizer splits with the regular expression of
  ``tokenizer.ggml.pre`` (llama.cpp's names; see :data:`BPE_SPLITS`) before the byte-level map;
  control and user-defined tokens are kept whole.

The reference is ``transformers``' GGUF tokenizer (``AutoTokenizer.from_pretrained(dir,
gguf_file=...)``, transformers 5.25); ``tests/models/test_lm_tokenizer_reference.py`` compares the
ids on a corpus (fixture: ``tools/lm_tokenizer_make_fixture.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fidia_jax.errors import CheckpointError

# GGUF token types (gguf.TokenType): 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
# 6 byte
_UNKNOWN, _CONTROL, _USER, _BYTE = 2, 3, 4, 6

# pre-tokenizer regular expressions by ``tokenizer.ggml.pre`` (published with the models'
# tokenizer.json files and llama.cpp's llama-vocab.cpp)
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BPE_SPLITS: dict[str, str] = {
    "default": _GPT2,
    "gpt-2": _GPT2,
    "llama-bpe": _LLAMA3,
    "llama3": _LLAMA3,
    "llama-v3": _LLAMA3,
    "smaug-bpe": _LLAMA3,
    "qwen2": _QWEN2,
    "deepseek-r1-qwen": _QWEN2,
}


def _specials_regex(table: dict[str, int]) -> re.Pattern | None:
    if not table:
        return None
    alts = sorted(table, key=lambda t: (-len(t), t))  # longest first: the longest match wins
    return re.compile("|".join(re.escape(t) for t in alts))


class GGUFSentencePiece:
    """A GGUF SentencePiece vocabulary: special-token split, space prefix, then ``sentencepiece``.

    Attributes:
      processor: the ``sentencepiece.SentencePieceProcessor`` (no dummy prefix of its own).
      specials: token text -> id of the control, unknown and user-defined tokens, matched whole
        in the raw text.
      add_space_prefix: whether a space goes before the text when it starts with a plain fragment.
    """

    def __init__(self, processor: Any, specials: dict[str, int], add_space_prefix: bool):
        self.processor = processor
        self.specials = dict(specials)
        self.add_space_prefix = bool(add_space_prefix)
        self._split = _specials_regex(self.specials)
        self._special_ids = set(self.specials.values())

    def get_piece_size(self) -> int:
        return int(self.processor.get_piece_size())

    def is_control(self, i: int) -> bool:
        return bool(self.processor.is_control(int(i)))

    def _fragments(self, text: str):
        pos = 0
        if self._split is not None:
            for m in self._split.finditer(text):
                if m.start() > pos:
                    yield pos, text[pos : m.start()], None
                yield m.start(), m.group(), self.specials[m.group()]
                pos = m.end()
        if pos < len(text):
            yield pos, text[pos:], None

    def encode_as_ids(self, text: str) -> list[int]:
        """Ids of ``text`` (no BOS)."""
        out: list[int] = []
        for start, piece, special in self._fragments(text):
            if special is not None:
                out.append(special)
                continue
            if self.add_space_prefix and start == 0 and not piece.startswith(" "):
                piece = " " + piece  # transformers' Metaspace: none before a leading space
            out.extend(int(i) for i in self.processor.encode_as_ids(piece))
        return out

    def decode_ids(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; the space prefix (when the vocabulary adds one) is taken off again."""
        ids = [int(i) for i in ids]
        text = self.processor.decode_ids(ids)
        if (
            self.add_space_prefix
            and ids
            and ids[0] not in self._special_ids
            and text.startswith(" ")
        ):
            text = text[1:]
        return text


def gguf_sentencepiece(reader, field, where: str, spm, pb) -> tuple[GGUFSentencePiece, dict]:
    """The :class:`GGUFSentencePiece` of a ``llama``-kind GGUF vocabulary, and its special ids."""
    tokens = [str(t) for t in field(reader, "tokenizer.ggml.tokens")]
    scores = field(reader, "tokenizer.ggml.scores") or [0.0] * len(tokens)
    types = [int(t) for t in (field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens))]
    if not (len(tokens) == len(scores) == len(types)):
        raise CheckpointError(
            f"{where}: tokenizer.ggml.tokens, .scores and .token_type differ in length "
            f"({len(tokens)}, {len(scores)}, {len(types)})"
        )
    model = pb.ModelProto()
    specials: dict[str, int] = {}
    for i, (piece, score, typ) in enumerate(zip(tokens, scores, types, strict=True)):
        if typ in (_UNKNOWN, _CONTROL, _USER) and piece:
            specials.setdefault(piece, i)
        sp = model.pieces.add()
        # llama.cpp's converter writes user-defined runs of spaces with real spaces; the
        # sentencepiece model sees escaped text ("▁"), so it gets them back in that spelling
        if typ == _USER and piece and not piece.strip(" "):
            piece = "▁" * len(piece)
        sp.piece, sp.score, sp.type = piece, float(score), typ  # same enum as GGUF's
    ids = {
        k: field(reader, f"tokenizer.ggml.{k}_token_id")
        for k in ("unknown", "bos", "eos", "padding")
    }
    ts = model.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.byte_fallback = any(t == _BYTE for t in types)
    ts.unk_id = int(ids["unknown"]) if ids["unknown"] is not None else -1
    ts.bos_id = int(ids["bos"]) if ids["bos"] is not None else -1
    ts.eos_id = int(ids["eos"]) if ids["eos"] is not None else -1
    ts.pad_id = int(ids["padding"]) if ids["padding"] is not None else -1
    ns = model.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = False  # GGUFSentencePiece adds it where the reference does
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    proc = spm.SentencePieceProcessor()
    try:
        proc.LoadFromSerializedProto(model.SerializeToString())
    except RuntimeError as err:
        raise CheckpointError(
            f"{where}: the GGUF vocabulary is not a valid SentencePiece one: {err}"
        ) from err
    prefix = field(reader, "tokenizer.ggml.add_space_prefix")
    return GGUFSentencePiece(proc, specials, True if prefix is None else bool(prefix)), ids


def gguf_byte_level_bpe(reader, field, where: str, tk) -> tuple[Any, dict]:
    """A ``tokenizers.Tokenizer`` for a ``gpt2``-kind (byte-level BPE) GGUF vocabulary."""
    tokens = [str(t) for t in field(reader, "tokenizer.ggml.tokens")]
    types = [int(t) for t in (field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens))]
    merges = field(reader, "tokenizer.ggml.merges")
    if merges is None:
        raise CheckpointError(
            f"{where}: a gpt2 (byte-level BPE) GGUF without tokenizer.ggml.merges"
        )
    pre = field(reader, "tokenizer.ggml.pre") or "default"
    if pre not in BPE_SPLITS:
        raise CheckpointError(
            f"{where}: GGUF BPE pre-tokenizer {pre!r} (tokenizer.ggml.pre) is not supported "
            f"(one of {', '.join(sorted(BPE_SPLITS))}); use the model's tokenizer.json"
        )
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    pairs = []
    for m in merges:
        a, sep, b = str(m).partition(" ")
        if not sep:
            raise CheckpointError(f"{where}: malformed merge {m!r} in tokenizer.ggml.merges")
        pairs.append((a, b))
    tok = tk.Tokenizer(tk.models.BPE(vocab=vocab, merges=pairs, fuse_unk=False))
    tok.pre_tokenizer = tk.pre_tokenizers.Sequence(
        [
            tk.pre_tokenizers.Split(tk.Regex(BPE_SPLITS[pre]), behavior="isolated"),
            tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = tk.decoders.ByteLevel()
    alphabet = set(tk.pre_tokenizers.ByteLevel.alphabet())
    control = [
        tk.AddedToken(t, normalized=False, special=True)
        for t, typ in zip(tokens, types, strict=True)
        if typ == _CONTROL and set(t) <= alphabet  # others: llama.cpp mislabels, skipped
    ]
    user = [
        tk.AddedToken(t, normalized=False, special=False)
        for t, typ in zip(tokens, types, strict=True)
        if typ == _USER
    ]
    if control:
        tok.add_special_tokens(control)
    if user:
        tok.add_tokens(user)
    ids = {
        k: field(reader, f"tokenizer.ggml.{k}_token_id")
        for k in ("unknown", "bos", "eos", "padding")
    }
    return tok, ids
