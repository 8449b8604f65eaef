"""Reference greedy tokens of Gemma 3 270M (Q4_K_M GGUF) on SafeSci fixture prompts, from
Hugging Face transformers' ``generate(do_sample=False)``; run once, in a throwaway venv (torch
and transformers are never dependencies of fidia_jax).

Reference: ``transformers`` 5.25.0 with ``torch`` 2.13.0 (CPU wheel), ``gguf`` 0.19.0: it
reads the same GGUF file (``from_pretrained(folder, gguf_file=...)`` dequantises every tensor to
float32 with the ``gguf`` package, as our loader does), eager attention, float32. The versions
are written into the fixture.

Run (2026-12-04)::

    .venv/bin/python tools/lm_greedy_make_fixture.py \\
        --gguf /tmp/gemma_gguf/gemma-3-270m-q4_k_m.gguf          # venv /tmp/peer_lmgreedy

The project side renders the prompts (the four shortest of the benign SafeSci fixture,
``tests/data/safesci/benign.jsonl``, seeded shuffle, seed 0: what ``fidia-jax safesci
evaluate`` asks) and re-runs this file with ``--peer`` in the venv (created on first use:
``pip install torch==2.13.0 transformers accelerate gguf numpy``), which writes
``tests/data/lm/gemma3_270m_greedy.json``: per prompt its text, the reference tokenizer's ids
(BOS first), the ``12`` greedy tokens (``-1`` after the reference stopped at EOS), and per step
the top-2 logits and their margin (to tell a real disagreement from a near-tie); plus the
versions, the GGUF file's size and sha256. Compared by
``tests/models/test_llama_greedy_cache.py::test_gemma3_270m_greedy_with_and_without_cache_matches_transformers``
(``slow``; needs ``FIDIA_GEMMA3_GGUF``).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "lm" / "gemma3_270m_greedy.json"
N_NEW = 12
N_PROMPTS = 4


def _prompts() -> list[str]:
    """The ``N_PROMPTS`` shortest prompts of the benign fixture, as ``evaluate`` renders them."""
    from fidia_jax.projects.safesci import get_config
    from fidia_jax.projects.safesci.evaluate import _prompts as render
    from fidia_jax.projects.safesci.records import load_safesci_jsonl

    records = load_safesci_jsonl(ROOT / "tests" / "data" / "safesci" / "benign.jsonl")
    texts = [p.prompt for p in render(records, get_config("default"))]
    return sorted(texts, key=len)[:N_PROMPTS]


def _peer(gguf: pathlib.Path, prompts: list[str], out: pathlib.Path) -> None:
    import numpy as np
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    rows = []
    for text in prompts:
        ids = tok(text, return_tensors="pt").input_ids
        if ids[0, 0].item() != tok.bos_token_id:
            ids = torch.cat([torch.tensor([[tok.bos_token_id]]), ids], dim=1)
        with torch.no_grad():
            res = model.generate(
                ids, attention_mask=torch.ones_like(ids), max_new_tokens=N_NEW, do_sample=False,
                top_k=None, top_p=None, output_logits=True, return_dict_in_generate=True,
            )  # fmt: skip
        gen = res.sequences[0, ids.shape[1] :].tolist()
        top2 = [np.sort(lg[0].float().numpy())[-2:][::-1].tolist() for lg in res.logits]
        rows.append({
            "prompt": text,
            "ids": ids[0].tolist(),
            "greedy": gen + [-1] * (N_NEW - len(gen)),
            "top2_logits": top2,
            "margins": [a - b for a, b in top2],
            "text": tok.decode(gen),
        })  # fmt: skip
        print(len(ids[0]), repr(tok.decode(gen)), "min margin", min(r for r in rows[-1]["margins"]))
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    data = {
        "reference": "transformers AutoModelForCausalLM.generate(do_sample=False), float32, eager",
        "versions": f"torch {torch.__version__}, transformers {transformers.__version__}",
        "gguf": {"name": gguf.name, "bytes": gguf.stat().st_size, "sha256": sha},
        "max_new_tokens": N_NEW,
        "eos_token_id": tok.eos_token_id,
        "date": datetime.date.today().isoformat(),
        "prompts": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", type=pathlib.Path, required=True, help="gemma-3-270m-q4_k_m.gguf")
    ap.add_argument("--venv", type=pathlib.Path, default=pathlib.Path("/tmp/peer_lmgreedy"))
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    ap.add_argument("--peer", type=pathlib.Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    gguf = args.gguf.resolve()
    if args.peer is not None:  # inside the venv: prompts from the json the project side wrote
        _peer(gguf, json.loads(args.peer.read_text()), args.out)
        return 0
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from _peer import make_venv

    py = make_venv(args.venv, ["torch==2.13.0", "transformers", "accelerate", "gguf", "numpy"])
    prompts_file = args.venv / "prompts.json"
    prompts_file.write_text(json.dumps(_prompts()))
    cmd = [str(py), str(pathlib.Path(__file__).resolve()), "--gguf", str(gguf),
           "--out", str(args.out.resolve()), "--peer", str(prompts_file)]  # fmt: skip
    subprocess.run(cmd, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
