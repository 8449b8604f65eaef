"""Tiny random checkpoints of each Hugging Face family, and transformers' logits on them
(issue 26, Deliver 2b; run once, in a throwaway venv: torch and transformers are never
dependencies of fidia_jax).

Environment (2026-12-02)::

    python3.11 -m venv /tmp/h26b/venv
    /tmp/h26b/venv/bin/pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
    /tmp/h26b/venv/bin/pip install transformers safetensors numpy      # (or torch from PyPI)
    /tmp/h26b/venv/bin/python tools/hf_tiny_make_fixtures.py

For each family (``llama``, ``qwen2``, ``qwen3``, ``gemma3_text``) transformers builds a model
from a tiny config (width 32, 2 layers, vocabulary 128, grouped-query attention) with random
weights from ``torch.manual_seed``; every norm weight and bias is also randomised (their
initial values, 1 or 0, would hide a misread one). ``save_pretrained`` writes the checkpoint
exactly as a released one is laid out (``config.json`` + ``model.safetensors``, float32) under
``tests/data/hf_tiny/<family>/``, and ``reference.npz`` beside it holds ``tokens`` (S, T) int32
(fixed random sequences) and ``logits`` (S, T, V) float32 from transformers' own forward pass
(float32, eager attention), plus ``versions``.

What each family exercises: llama, untied head and llama3 RoPE scaling; qwen2, QKV biases and
tied embeddings; qwen3, ``head_dim`` different from ``hidden / heads`` and QK-norm; gemma3_text,
a sliding window of 4 on the local layer (sequences of 12 tokens, so the window masks), its
global layer with its own RoPE base, ``query_pre_attn_scalar``, the offset norms, post-norms and
the embedding scale. ``tests/models/test_hf_tiny_parity.py`` loads each directory with
``models.load_hf_checkpoint`` and compares the logits.
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np

COMMON = {
    "vocab_size": 128,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6,
}

FAMILIES = {
    "llama": {
        "model_type": "llama",
        "tie_word_embeddings": False,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8,
        },
    },
    "qwen2": {"model_type": "qwen2", "tie_word_embeddings": True, "rope_theta": 1e6},
    "qwen3": {
        "model_type": "qwen3",
        "tie_word_embeddings": False,
        "head_dim": 16,
        "rope_theta": 1e6,
    },
    "gemma3_text": {
        "model_type": "gemma3_text",
        "head_dim": 16,
        "sliding_window": 4,
        "sliding_window_pattern": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "query_pre_attn_scalar": 12,
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "hidden_activation": "gelu_pytorch_tanh",
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
    },
}

SEQUENCES, LENGTH = 3, 12


def make(family: str, out: pathlib.Path, seed: int) -> None:
    import torch
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.AutoConfig.for_model(**{**COMMON, **FAMILIES[family]})
    cfg._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".bias"):
                p.copy_(0.3 * torch.randn_like(p) + (0.0 if family == "gemma3_text" else 1.0))
                if name.endswith(".bias"):
                    p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(0.2 * torch.randn_like(p))
    folder = out / family
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, COMMON["vocab_size"], size=(SEQUENCES, LENGTH)).astype(np.int32)
    with torch.no_grad():
        logits = model(torch.as_tensor(tokens, dtype=torch.long)).logits.float().numpy()
    np.savez_compressed(
        folder / "reference.npz",
        tokens=tokens,
        logits=logits.astype(np.float32),
        versions=np.asarray(f"torch {torch.__version__}, transformers {transformers.__version__}"),
    )
    print(family, sorted(p.name for p in folder.iterdir()), float(np.abs(logits).max()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path(__file__).resolve().parents[1] / "tests/data/hf_tiny",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for i, family in enumerate(FAMILIES):
        make(family, args.out, args.seed + i)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
