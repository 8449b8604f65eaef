"""Makes the reference token ids of ``tests/data/lm_tokenizer/`` (``models.load_tokenizer``).

The reference is the tokenizer ``transformers`` builds from a GGUF file
(``AutoTokenizer.from_pretrained(dir, gguf_file=...)``, ``transformers.integrations.gguf``) and,
for a ``tokenizer.json``, ``tokenizers.Tokenizer`` with its post-processor
(``encode(text, add_special_tokens=True)``). Run ONCE in a throwaway venv (torch not needed)::

    python3 -m venv /tmp/peer_tok
    /tmp/peer_tok/bin/pip install transformers tokenizers sentencepiece gguf protobuf numpy
    /tmp/peer_tok/bin/python tools/lm_tokenizer_make_fixture.py [--gemma-gguf PATH]

It writes, under ``tests/data/lm_tokenizer/``, small vocabularies built here from
``corpus.txt`` (checked in) and the reference ids of every corpus line and of the whole text:

* ``spm_gemma3.gguf``: a SentencePiece BPE model trained by ``SentencePieceTrainer`` (byte
  fallback, user-defined pieces for runs of 2..8 spaces, 2..3 tabs, 2..3 newlines and
  ``<start_of_turn>`` / ``<end_of_turn>``), written with the ``gguf`` writer in llama.cpp's
  layout (architecture ``gemma3``, ``add_space_prefix`` false, user-defined runs of spaces
  spelled with real spaces, as llama.cpp's converter writes them).
* ``spm_llama.gguf``: the same vocabulary as architecture ``llama`` with NO
  ``add_space_prefix`` key (the reference's default applies) and ``add_bos_token`` absent.
* ``bpe_bos/tokenizer.json``: a byte-level BPE trained by ``tokenizers`` whose
  ``TemplateProcessing`` post-processor adds ``<|begin_of_text|>`` (the Llama 3 layout), with no
  ``tokenizer_config.json``.
* ``bpe_llama3.gguf`` / ``bpe_qwen2.gguf``: that BPE vocabulary as a ``gpt2``-kind GGUF
  (tokens, control types, ``tokenizer.ggml.merges``) with ``tokenizer.ggml.pre`` ``llama-bpe``
  (``add_bos_token`` true) and ``qwen2`` (no ``add_bos_token`` key: the reference's default, no
  BOS): the two pre-tokenizer expressions differ on digits.
* ``reference.json``: ids per vocabulary and text, with the package versions.

``--gemma-gguf`` (optional) adds the reference ids of a real Gemma 3 GGUF's vocabulary
(``tools/gemma3_270m_gguf.py`` prints its path) under ``"gemma3_270m"``; the test skips that part
unless ``FIDIA_GEMMA3_GGUF`` names the same file.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import json
import pathlib
import shutil
import tempfile

HERE = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "lm_tokenizer"
USER = (
    ["<start_of_turn>", "<end_of_turn>"]
    + ["▁" * n for n in range(2, 9)]
    + ["\t" * n for n in (2, 3)]
    + ["\n" * n for n in (2, 3)]
)


def texts(corpus: str) -> list[str]:
    """Every line of the corpus (without its newline), then the whole corpus."""
    return [*corpus.split("\n")[:-1], corpus]


def train_spm(corpus: str):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    buf = io.BytesIO()
    extra = "the quick brown fox jumps over the lazy dog while the cat sat on the mat\n" * 4
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter((corpus + extra).split("\n")),
        model_writer=buf,
        model_type="bpe",
        vocab_size=400,
        byte_fallback=True,
        user_defined_symbols=USER,
        control_symbols=[],
        pad_id=0,
        eos_id=1,
        bos_id=2,
        unk_id=3,
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        split_digits=True,
        allow_whitespace_only_pieces=True,
        character_coverage=1.0,
        hard_vocab_limit=False,
    )
    m = pb.ModelProto()
    m.ParseFromString(buf.getvalue())
    return m


def write_gguf(path: pathlib.Path, m, *, arch: str, space_prefix_key: bool, add_bos_key: bool):
    import gguf
    import numpy as np

    tokens, scores, types = [], [], []
    for p in m.pieces:
        t = p.piece
        if p.type == 4 and set(t) == {"▁"}:  # llama.cpp's converter: user-defined spaces as " "
            t = t.replace("▁", " ")
        tokens.append(t)
        scores.append(p.score)
        types.append(int(p.type))
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_bos_token_id(2)
    wr.add_eos_token_id(1)
    wr.add_unk_token_id(3)
    wr.add_pad_token_id(0)
    if add_bos_key:
        wr.add_add_bos_token(True)
    if space_prefix_key:
        wr.add_add_space_prefix(False)
    wr.add_tensor("token_embd.weight", np.zeros((len(tokens), 4), np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def write_bpe(folder: pathlib.Path, corpus: str):
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
    from tokenizers import models as tm

    tk = Tokenizer(tm.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train_from_iterator(corpus.split("\n") * 3, trainer)
    tk.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A",
        pair="<|begin_of_text|> $A <|begin_of_text|> $B",
        special_tokens=[("<|begin_of_text|>", 0)],
    )
    folder.mkdir(exist_ok=True)
    tk.save(str(folder / "tokenizer.json"))
    return tk


def write_bpe_gguf(path: pathlib.Path, tk, *, pre: str, add_bos: bool | None):
    """The byte-level BPE as llama.cpp's converter writes it: tokens, types, merges, pre."""
    import gguf

    spec = json.loads(tk.to_str())
    vocab = spec["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    special = {a["content"] for a in spec["added_tokens"]}
    wr = gguf.GGUFWriter(str(path), "llama" if pre == "llama-bpe" else "qwen2")
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre(pre)
    wr.add_token_list(tokens)
    wr.add_token_types([3 if t in special else 1 for t in tokens])
    wr.add_token_merges(merges)
    wr.add_bos_token_id(0)
    wr.add_eos_token_id(1)
    if add_bos is not None:
        wr.add_add_bos_token(add_bos)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def gguf_ids(path: pathlib.Path, cases: list[str]) -> list[list[int]]:
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as d:
        shutil.copy(path, pathlib.Path(d) / path.name)
        tok = AutoTokenizer.from_pretrained(d, gguf_file=path.name)
        return [list(tok(t, add_special_tokens=True)["input_ids"]) for t in cases]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemma-gguf", type=pathlib.Path, default=None)
    args = ap.parse_args(argv)
    import sentencepiece
    import tokenizers
    import transformers

    corpus = (HERE / "corpus.txt").read_text(encoding="utf-8")
    cases = texts(corpus)
    m = train_spm(corpus)
    write_gguf(HERE / "spm_gemma3.gguf", m, arch="gemma3", space_prefix_key=True, add_bos_key=True)
    write_gguf(HERE / "spm_llama.gguf", m, arch="llama", space_prefix_key=False, add_bos_key=False)
    bpe = write_bpe(HERE / "bpe_bos", corpus)
    write_bpe_gguf(HERE / "bpe_llama3.gguf", bpe, pre="llama-bpe", add_bos=True)
    write_bpe_gguf(HERE / "bpe_qwen2.gguf", bpe, pre="qwen2", add_bos=None)
    out = {
        "reference": "transformers AutoTokenizer(gguf_file=...) / tokenizers encode(add_special_tokens)",
        "versions": {
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "sentencepiece": sentencepiece.__version__,
            "gguf": importlib.metadata.version("gguf"),
        },
        "texts": cases,
        "ids": {
            "spm_gemma3.gguf": gguf_ids(HERE / "spm_gemma3.gguf", cases),
            "spm_llama.gguf": gguf_ids(HERE / "spm_llama.gguf", cases),
            "bpe_bos": [bpe.encode(t, add_special_tokens=True).ids for t in cases],
            "bpe_llama3.gguf": gguf_ids(HERE / "bpe_llama3.gguf", cases),
            "bpe_qwen2.gguf": gguf_ids(HERE / "bpe_qwen2.gguf", cases),
        },
    }
    if args.gemma_gguf is not None:
        out["ids"]["gemma3_270m"] = gguf_ids(args.gemma_gguf, cases)
    (HERE / "reference.json").write_text(json.dumps(out, ensure_ascii=False, indent=None) + "\n")
    print("wrote", HERE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
