"""ColabDesign peer of ``mpnn_design_throughput.py``: ``mk_mpnn_model`` over many backbones.

Self-contained: needs ColabDesign 1.1.1 (jax 0.4.30, dm-haiku 0.0.12) in its own venv
(``tools/mpnn_make_peer_venvs.sh``), never fidia_jax. Run by the benchmark through
``benchmarks/_peers.py``::

    python benchmarks/_mpnn_colabdesign_peer.py LIST.txt WORKDIR OUT.json --num-samples 8 --temperature 0.1

For each structure of ``LIST.txt`` (one path per line, ``.gz`` ok): ``prep_inputs`` (all chains),
then ``sample(num=1, batch=num_samples, temperature=T)`` (one jitted call, compiled per length,
as a ColabDesign user runs it); the per-backbone ``seqid`` (native-sequence recovery over the
residues ColabDesign keeps) goes to ``OUT.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import shutil
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("list_txt")
    p.add_argument("workdir")
    p.add_argument("out_json")
    p.add_argument("--num-samples", type=int, required=True)
    p.add_argument("--temperature", type=float, required=True)
    a = p.parse_args(argv)
    from colabdesign.mpnn import mk_mpnn_model

    work = pathlib.Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    model = mk_mpnn_model(model_name="v_48_020", seed=0)
    out = {}
    for line in pathlib.Path(a.list_txt).read_text().split():
        src = pathlib.Path(line)
        name = src.name.removesuffix(".gz").rsplit(".", 1)[0]
        dst = work / f"{name}.pdb"
        with (
            gzip.open(src, "rb") if src.suffix == ".gz" else open(src, "rb") as f,
            open(dst, "wb") as g,
        ):
            shutil.copyfileobj(f, g)
        model.prep_inputs(pdb_filename=str(dst))
        res = model.sample(num=1, batch=a.num_samples, temperature=a.temperature)
        out[name] = {"recovery": [float(x) for x in res["seqid"]]}
        print(
            f"  colabdesign {name}: {sum(out[name]['recovery']) / a.num_samples:.3f}",
            file=sys.stderr,
            flush=True,
        )
    pathlib.Path(a.out_json).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
