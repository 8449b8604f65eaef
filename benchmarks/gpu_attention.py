"""GPU benchmark for the attention kernels (run on one H200: see docs/benchmarks.md).

Decode (one step, Llama-3-8B-like: 32 query heads, 8 kv heads, head dim 128, bf16, 32k context):
  * copy bandwidth first (``x + 1`` on a 1 GiB bf16 buffer: read + write), the roofline;
  * Pallas SANTA (systematic, S in {512, 2048}) vs Pallas flash-decoding vs
    ``jax.nn.dot_product_attention`` (implementation "xla" and "cudnn" where available);
  * time per step (median of repeats after one compiling call), achieved GB/s (K and V bytes
    read / time), distinct V rows SANTA samples, max |error| vs the float32 dense reference.
Training (Attn-QAT): forward and forward+backward of the Pallas FP4 kernels vs bf16
``jax.nn.dot_product_attention`` (cudnn, xla); B=1, T=S=``--train-len``, 32 heads, D=128, causal.

Every measurement is wrapped: one that fails (a kernel that does not lower, an implementation
that is absent) records its error in its table cell and the script goes on. The results file is
written before and after every measurement, so a run stopped by a time limit keeps what it
measured, and the cell it was measuring says "not finished". The Pallas Attn-QAT backward has its
own part (``qat_bwd``), so a driver can give its compile a separate, short time limit
(``tools/device_gpu_bench.sh``) and add it to the same file with ``--append``.

Usage:
  python benchmarks/gpu_attention.py            # on a GPU, all parts, T = 4096
  python benchmarks/gpu_attention.py --parts decode,train --train-len 1024
  python benchmarks/gpu_attention.py --parts qat_bwd --train-len 1024 --append
  python benchmarks/gpu_attention.py --smoke --out /tmp/ga.json   # tiny shapes, interpret mode

Writes ``benchmarks/results/gpu_attention.json`` (``benchmarks/_results.py``) with the tables
``decode``, ``train`` and ``ratios`` that docs/benchmarks.md renders, and the raw rows.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import traceback

import jax
import jax.numpy as jnp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _gpu_results import NOT_FINISHED, cell_error  # noqa: E402
from _results import command_line, load_average, write_results  # noqa: E402
from _timing import median_seconds  # noqa: E402

from fidia_jax.kernels.attn_qat import BlockSizes as QatBlocks  # noqa: E402
from fidia_jax.kernels.attn_qat import attn_qat_pallas  # noqa: E402
from fidia_jax.kernels.santa import BlockSizes, flash_decode_pallas, santa_decode_pallas  # noqa: E402
from fidia_jax.kernels.santa import reference as R  # noqa: E402
from fidia_jax.kernels.santa.api import samples_per_tile_for  # noqa: E402

PARTS = ("decode", "train", "qat_bwd")
#: train kernels: (raw name, label in the table)
TRAIN_KERNELS = (
    ("attn_qat_pallas", "Pallas Attn-QAT (ours, FP4)"),
    ("bf16_dpa_cudnn", "`jax.nn.dot_product_attention` cudnn, bf16"),
    ("bf16_dpa_xla", "`jax.nn.dot_product_attention` xla, bf16"),
)


def _thin(n: int) -> str:
    return f"{n:,}".replace(",", "\u2009")


def _bytes_text(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB"


class Run:
    """The raw rows so far and the file they are written to after every change."""

    def __init__(self, args, meta, previous=None):
        self.args = args
        self.meta = meta
        self.load_start = load_average()
        self.decode: list[dict] = []
        self.train: list[dict] = []
        self.command = command_line()
        if previous is not None:  # --append: keep the rows this run does not measure again
            self.decode = list(previous.get("raw", {}).get("decode", []))
            self.train = list(previous.get("raw", {}).get("train", []))
            self.command = f"{previous['command']} && {self.command}"

    def attempt(self, rows: list[dict], name: str, f, **fixed):
        """Measures ``f()`` (a dict of numbers) as row ``name``; an exception becomes its error."""
        rows[:] = [r for r in rows if r["name"] != name]
        row = {"name": name, "status": "running", **fixed}
        rows.append(row)
        self.save()
        t0 = time.perf_counter()
        try:
            row.update(f())
            row["status"] = "ok"
            print(json.dumps(row), flush=True)
        except Exception as e:  # noqa: BLE001 - report and continue
            row["status"] = "failed"
            row["error"] = f"{type(e).__name__}: {e}"[:500]
            print(f"{name}: FAILED {row['error'][:300]}", flush=True)
        row["wall_s_incl_compile"] = time.perf_counter() - t0
        self.save()

    def save(self):
        """Writes the file; a failure to write is printed, and the next save tries again."""
        try:
            write_results(
                "gpu_attention",
                tables(self.decode, self.train),
                command=self.command,
                load_start=self.load_start,
                extra={"meta": self.meta, "raw": {"decode": self.decode, "train": self.train}},
                out=self.args.out,
            )
        except Exception:  # noqa: BLE001 - the measurements go on; the raw rows are printed
            traceback.print_exc()


def _status_cell(row: dict | None):
    """The number's replacement for a row that has none: its error, or "not finished"."""
    if row is None:
        return None
    if row["status"] == "failed":
        return cell_error(row["error"])
    if row["status"] == "running":
        return NOT_FINISHED
    return None


def _decode_label(row: dict) -> str:
    name = row["name"]
    if name == "copy_bandwidth":
        return f"copy `x + 1` ({_bytes_text(row['buffer_bytes'])} bf16, read + write; GB/s of the copy)"
    if name == "pallas_flash_decode":
        return "Pallas flash-decoding (ours, exact peer)"
    if name.startswith("pallas_santa_S"):
        spt = row.get("samples_per_tile")
        per_tile = f", {spt} per tile" if spt else ""
        return f"Pallas SANTA, S = {row['S']} (systematic{per_tile})"
    if name.startswith("dot_product_attention_"):
        return f"`jax.nn.dot_product_attention`, {name.rsplit('_', 1)[1]}"
    return name


def tables(decode: list[dict], train: list[dict]) -> dict:
    """The ``decode``, ``train`` and ``ratios`` tables of the raw rows."""
    drows = []
    for r in decode:
        label = _decode_label(r)
        if r["status"] != "ok":
            drows.append([label, _status_cell(r), None, None, None])
            continue
        if r["name"] == "copy_bandwidth":
            drows.append([label, r["ms"], r["GBps"], None, None])
            continue
        if "distinct_v_rows" in r:
            share = r["distinct_v_rows"] / r["v_rows_total"]
            rows_read = (f"{_thin(r['distinct_v_rows'])} / {_thin(r['v_rows_total'])} "
                         f"({share:.1%})")  # fmt: skip
        else:
            rows_read = "all"
        drows.append([label, r["ms"], r["GBps_kv"], r["max_abs_err"], rows_read])
    decode_table = {
        "columns": ["kernel", "time (ms)", "KV GB/s", "max abs err", "V rows read"],
        "rows": drows,
        "formats": [None, ".3f", ".0f", ".2g", None],
    }
    by_name = {r["name"]: r for r in train}
    trows = []
    for key, label in TRAIN_KERNELS:
        fwd, bwd = by_name.get(f"{key}_fwd"), by_name.get(f"{key}_fwd_bwd")
        if fwd is None and bwd is None:
            continue
        t_len = (fwd or bwd).get("T")
        cells = []
        for r in (fwd, bwd):
            cells.append(r["ms"] if r is not None and r["status"] == "ok" else _status_cell(r))
        trows.append([label, t_len, *cells])
    train_table = {
        "columns": ["kernel", "T", "forward (ms)", "forward + backward (ms)"],
        "rows": trows,
        "formats": [None, None, ".3f", ".3f"],
    }
    return {"decode": decode_table, "train": train_table, "ratios": ratios_table(decode, train)}


def ratios_table(decode: list[dict], train: list[dict]) -> dict:
    """Ratios of the measured times that the page's prose discusses (rows whose two
    measurements both succeeded), with the issue's goal where there is one."""
    ok = {r["name"]: r for r in decode + train if r["status"] == "ok"}
    rows = []

    def add(text, num, den, key="ms", goal=None, met=None):
        if num in ok and den in ok:
            value = ok[num][key] / ok[den][key]
            rows.append([text, value, goal, None if met is None else bool(met(value))])

    add("Pallas flash-decoding time / Pallas SANTA (S = 2048) time", "pallas_flash_decode",
        "pallas_santa_S2048", goal=">= 1.3", met=lambda x: x >= 1.3)  # fmt: skip
    if "pallas_flash_decode" in ok and "copy_bandwidth" in ok:
        value = ok["pallas_flash_decode"]["GBps_kv"] / ok["copy_bandwidth"]["GBps"]
        rows.append(["Pallas flash-decoding KV GB/s / copy GB/s", value, None, None])
    add("Pallas flash-decoding time / `dot_product_attention` xla time", "pallas_flash_decode",
        "dot_product_attention_xla")  # fmt: skip
    add("Pallas SANTA (S = 2048) time / `dot_product_attention` xla time", "pallas_santa_S2048",
        "dot_product_attention_xla")  # fmt: skip
    add("Pallas Attn-QAT forward time / bf16 cudnn forward time", "attn_qat_pallas_fwd",
        "bf16_dpa_cudnn_fwd")  # fmt: skip
    add("Pallas Attn-QAT forward + backward time / bf16 cudnn forward + backward time",
        "attn_qat_pallas_fwd_bwd", "bf16_dpa_cudnn_fwd_bwd")  # fmt: skip
    return {"columns": ["ratio", "value", "goal", "met"], "rows": rows,
            "formats": [None, ".3g", None, None]}  # fmt: skip


def _decode(run: Run, smoke, interpret, reps, shape, nk, bk):
    b, hq, hkv, d = shape
    rows = run.decode

    n = (1 << 20) if smoke else (1 << 29)  # bf16 elements (1 GiB on the GPU)

    def copy_bw():
        x = jnp.ones((n,), jnp.bfloat16)
        t = median_seconds(jax.jit(lambda x: x + 1), x, repeats=reps)
        moved = 2 * 2 * n  # read + write
        return {"bytes_moved": moved, "ms": 1e3 * t, "GBps": moved / t / 1e9}

    run.attempt(rows, "copy_bandwidth", copy_bw, buffer_bytes=2 * n)

    kq, kk, kv, ku = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(kq, (b, hq, d), jnp.bfloat16)
    k = jax.random.normal(kk, (b, nk, hkv, d), jnp.bfloat16)
    v = jax.random.normal(kv, (b, nk, hkv, d), jnp.bfloat16)
    kv_bytes = 2 * b * nk * hkv * d * 2
    exact = R.dense_decode_reference(q, k, v).astype(jnp.float32)

    def decode_row(fn, *a, extra=None):
        t = median_seconds(fn, *a, repeats=reps)
        out = fn(*a).astype(jnp.float32).reshape(b, hq, d)
        row = {
            "ms": 1e3 * t,
            "GBps_kv": kv_bytes / t / 1e9,
            "max_abs_err": float(jnp.max(jnp.abs(out - exact))),
        }
        row.update(extra or {})
        return row

    lengths = jnp.full((b,), nk, jnp.int32)
    flash = jax.jit(
        lambda q, k, v: flash_decode_pallas(
            q, k, v, lengths, block_sizes=BlockSizes(bk), interpret=interpret
        )
    )
    run.attempt(rows, "pallas_flash_decode", lambda: decode_row(flash, q, k, v))

    for s_total in (2048, 512):
        spt = samples_per_tile_for(s_total, nk, bk)
        u = R.make_uniforms(ku, b, hq, nk, block_k=bk, samples_per_tile=spt, method="systematic")
        santa = jax.jit(
            lambda q, k, v, u, spt=spt: santa_decode_pallas(
                q, k, v, u, lengths, samples_per_tile=spt, method="systematic",
                block_sizes=BlockSizes(bk), interpret=interpret,
            )
        )  # fmt: skip

        def santa_row(santa=santa, u=u, spt=spt):
            n_rows = R.distinct_value_rows(q, k, u, samples_per_tile=spt, block_k=bk)
            k_bytes = b * nk * hkv * d * 2
            row = decode_row(santa, q, k, v, u, extra={"distinct_v_rows": int(n_rows),
                                                       "v_rows_total": b * nk * hkv})  # fmt: skip
            row["GBps_if_gather"] = (k_bytes + int(n_rows) * d * 2) / (row["ms"] / 1e3) / 1e9
            return row

        run.attempt(rows, f"pallas_santa_S{s_total}", santa_row, S=s_total, samples_per_tile=spt)

    q4 = q[:, None]
    for impl in ("xla", "cudnn"):
        f = jax.jit(
            lambda q, k, v, impl=impl: jax.nn.dot_product_attention(q, k, v, implementation=impl)
        )
        run.attempt(rows, f"dot_product_attention_{impl}", lambda f=f: decode_row(f, q4, k, v))


def _train(run: Run, parts, smoke, interpret, reps, t_len, h, d):
    kq, kk, kv = jax.random.split(jax.random.key(1), 3)
    q = jax.random.normal(kq, (1, t_len, h, d), jnp.bfloat16)
    k = jax.random.normal(kk, (1, t_len, h, d), jnp.bfloat16)
    v = jax.random.normal(kv, (1, t_len, h, d), jnp.bfloat16)
    blocks = QatBlocks(32, 32) if smoke else QatBlocks(64, 64)
    fns = {
        "attn_qat_pallas": lambda q, k, v: attn_qat_pallas(
            q, k, v, causal=True, block_sizes=blocks, interpret=interpret
        ),
        "bf16_dpa_cudnn": lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, is_causal=True, implementation="cudnn"
        ),
        "bf16_dpa_xla": lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, is_causal=True, implementation="xla"
        ),
    }

    def timing(fn, grad):
        measured = fn
        if grad:
            measured = jax.grad(lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32)),
                                argnums=(0, 1, 2))  # fmt: skip
        return lambda: {"ms": 1e3 * median_seconds(jax.jit(measured), q, k, v, repeats=reps)}

    for key, _ in TRAIN_KERNELS:
        qat = key == "attn_qat_pallas"
        if "train" in parts:
            run.attempt(run.train, f"{key}_fwd", timing(fns[key], False), T=t_len)
            if not qat:
                run.attempt(run.train, f"{key}_fwd_bwd", timing(fns[key], True), T=t_len)
    if "qat_bwd" in parts:  # last: its compile is the slow one
        run.attempt(run.train, "attn_qat_pallas_fwd_bwd", timing(fns["attn_qat_pallas"], True),
                    T=t_len)  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="GPU attention benchmark (SANTA, flash-decode, Attn-QAT)"
    )
    ap.add_argument("--smoke", action="store_true", help="tiny shapes in interpret mode (CPU)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default="benchmarks/results/gpu_attention.json")
    ap.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="comma-separated, of: decode (decode step), train (Attn-QAT forward and the bf16 "
        "peers' forward and forward+backward), qat_bwd (Attn-QAT forward+backward)",
    )
    ap.add_argument("--only", choices=("decode", "train"),
                    help="old spelling: --only train is --parts train,qat_bwd")  # fmt: skip
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of --out that this run does not measure")  # fmt: skip
    ap.add_argument("--train-len", type=int, default=4096, help="sequence length of Attn-QAT")
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if args.only:
        parts = {"decode"} if args.only == "decode" else {"train", "qat_bwd"}
    unknown = parts - set(PARTS)
    if unknown:
        ap.error(f"--parts: unknown {sorted(unknown)}; choose from {PARTS}")
    smoke = args.smoke
    interpret = smoke
    reps = 1 if smoke else args.repeats
    b, hq, hkv, d = (1, 8, 2, 64) if smoke else (1, 32, 8, 128)
    nk = 256 if smoke else 32768
    bk = 64 if smoke else 128
    t_len = 64 if smoke else args.train_len
    meta = {
        "device": str(jax.devices()[0]),
        "device_kind": jax.devices()[0].device_kind,
        "jax": jax.__version__,
        "smoke": smoke,
        "repeats": reps,
        "decode_shape": dict(
            batch=b, q_heads=hq, kv_heads=hkv, head_dim=d, n_k=nk, block_k=bk, dtype="bfloat16"
        ),
        "train_shape": {"batch": 1, "T": t_len, "heads": hq, "head_dim": d, "causal": True},
    }
    previous = None
    out = pathlib.Path(args.out)
    if args.append and out.is_file():
        previous = json.loads(out.read_text())
    run = Run(args, meta, previous)

    if "decode" in parts:
        _decode(run, smoke, interpret, reps, (b, hq, hkv, d), nk, bk)
    if parts & {"train", "qat_bwd"}:
        _train(run, parts, smoke, interpret, reps, t_len, hq, d)
    run.save()
    print(f"\n{'name':32s} {'ms':>10s}  status")
    for row in run.decode + run.train:
        ms = f"{row['ms']:10.3f}" if "ms" in row else " " * 10
        print(f"{row['name']:32s} {ms}  {row['status']}")
    for r in ratios_table(run.decode, run.train)["rows"]:
        print(f"{r[0]}: {r[1]:.3g}" + (f" (goal {r[2]}: {'met' if r[3] else 'not met'})"
                                        if r[2] else ""))  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
