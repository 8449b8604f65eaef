"""Small-scale CPU experiments for the attention kernels (docs/kernels.md).

1. Attn-QAT: train the small LLaMA on Shakespeare bytes with bf16-input attention ("bf16"),
   the drop-in FP4 variant and Attn-QAT (same init, same batches, same steps); report loss
   curves and final validation loss.
2. SANTA: take the model trained with bf16 attention, prefill half of a validation window
   densely, then decode the second half teacher-forced with dense attention and with SANTA
   (S in {32, 128, 512, 2048}, iid / stratified / systematic); report validation perplexity of the
   decoded positions and top-1 agreement of the SANTA logits with dense decoding.

Usage:
  python benchmarks/attention_experiments.py --data-dir ../shared/data [--steps 300]

Writes benchmarks/results/attention_experiments.json. CPU only; a few minutes on 2 cores.

The experiments are the attention driver's (:func:`fidia_jax.projects.attention.run_experiments`,
the ``default`` preset; ``fidia-jax attention train --config tiny|demo|default`` runs them at
other scales). The flags below override that preset.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib

from fidia_jax._io import atomic_write_text
from fidia_jax.projects import attention


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("FIDIA_DATA_DIR", "../shared/data"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--santa-batch", type=int, default=16)
    ap.add_argument("--skip-qat", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/attention_experiments.json")
    args = ap.parse_args(argv)
    config = attention.get_config(
        "default",
        data={"data_dir": args.data_dir, "seq_len": args.seq_len},
        qat={
            "steps": args.steps,
            "batch_size": args.batch,
            "learning_rate": args.lr,
            "impls": ("bf16",) if args.skip_qat else attention.QAT_IMPLS,
        },
        santa={"batch_size": args.santa_batch},
    )
    results = {"args": vars(args), **attention.run_experiments(config)}
    out = pathlib.Path(args.out)
    atomic_write_text(out, json.dumps(results, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
