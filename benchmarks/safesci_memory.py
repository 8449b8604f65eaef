"""SafeSci checkpoint mode: peak memory of whole runs, and where it goes (issue 39, Deliver 4).

Writes ``benchmarks/results/safesci_checkpoint_memory.json`` (``docs/safesci.md``, *Memory*)
with two tables:

``runs``: whole ``fidia-jax safesci evaluate --set model=checkpoint`` runs, each read from a
directory that holds what the run left: ``stderr.txt`` (the command's stderr, ending with
``/usr/bin/time -v``'s report; each line may start with a Unix time stamp, which gives the
longest silence between two lines), ``load_before.txt`` / ``load_after.txt`` (``uptime``) and
``out/report.json`` (the responses). The responses of every run are compared with the first
run's. A run is made with::

    nice -n 10 /usr/bin/time -v fidia-jax safesci evaluate --set model=checkpoint \\
        --set checkpoint=gemma-3-270m-q4_k_m.gguf --workdir DIR/out 2> DIR/stderr.txt

``probe`` (with ``--probe CHECKPOINT``): in this process, each step's peak resident memory
above what was resident before it (``VmHWM`` reset through ``/proc/self/clear_refs``, Linux):
loading the weights; reading the conversion cache's file through ``safetensors.safe_open``
(a memory map) and with plain reads (``fidia_jax._disk_cache.read_into``); one greedy
``sample_llama`` call (batch 1, the fixture's padded width, 16 new tokens) with the head at the
last prompt position or at every position, and through ``nnx.jit``'s default graph updates
(the sampler's jit before this change, which hands every weight back out of the program).

Usage::

    python benchmarks/safesci_memory.py --probe /tmp/gemma_gguf/gemma-3-270m-q4_k_m.gguf \\
        --run NAME DIR "CODE" "NOTE" [--run ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import pathlib
import re
import time

from _results import load_average, write_results

_GB = 1e9


def _status() -> dict[str, float]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[key] = int(val.split()[0]) * 1024 / _GB
    return out


def _trim() -> None:
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _measure(fn):
    """``(result, peak GB above the resident memory before, resident GB after)``."""
    _trim()
    before = _status()["VmRSS"]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size
    out = fn()
    st = _status()
    return out, st["VmHWM"] - before, st["VmRSS"]


def probe(checkpoint: str, width: int, new_tokens: int) -> tuple[list, dict]:
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from fidia_jax import _disk_cache as cc
    from fidia_jax import models
    from fidia_jax.models import _llama_hooks as hk

    rows, raw = [], {}
    base = _status()["VmRSS"]
    tok = models.load_tokenizer(checkpoint)
    model, up, after = _measure(lambda: models.load_gguf(checkpoint, max_seq_len=512))
    rows.append(["load_gguf (from the conversion cache)", up, after])
    raw["resident_before_load_gb"] = base

    entries = sorted(pathlib.Path(cc.default_cache_dir()).glob("gguf-model-*/weights.safetensors"))
    if entries:
        file = str(max(entries, key=lambda p: p.stat().st_mtime))
        raw["cache_file"] = file

        def mapped():
            from safetensors import safe_open

            total = 0
            with safe_open(file, framework="numpy") as f:
                for name in f.keys():
                    total += f.get_tensor(name).nbytes  # each array dropped at once
            return total

        def plain():
            total = 0
            for _, _, offset, nbytes in cc.safetensors_table(file).values():
                buf = np.empty(nbytes, np.uint8)
                cc.read_into(file, offset, buf)
                total += buf.nbytes
            return total

        n, up, after = _measure(mapped)
        rows.append(["read the cache file, safe_open (memory map), one array at a time", up, after])
        raw["cache_file_gb"] = n / _GB
        _, up, after = _measure(plain)
        rows.append(
            ["read the cache file, plain reads (read_into), one array at a time", up, after]
        )

    prompt = jnp.asarray(np.full((1, width), 2, np.int32))
    lengths = jnp.asarray([width - 3], jnp.int32)
    kw = dict(max_new_tokens=new_tokens, logit_bias=None, cache_len=width + new_tokens - 1)
    graph_updates = nnx.jit(  # the sampler's jit before: every variable handed back
        hk._sample_impl,
        static_argnames=("max_new_tokens", "logit_bias", "cache_len", "prefill_logits"),
    )
    stop = jnp.int32(tok.eos_id)
    args = (model, prompt, lengths, None, None, (), None, None, stop)
    cases = [
        ("last", hk._sample_jit, "head at the last prompt position"),
        ("all", hk._sample_jit, "head at every prompt position"),
        ("last", graph_updates, "head at the last position, nnx.jit graph updates (before)"),
    ]
    tokens = {}
    for mode, jit, label in cases:
        for rep in ("compile and run", "run again"):
            t0 = time.perf_counter()
            out, up, after = _measure(
                lambda jit=jit, mode=mode: np.asarray(jit(*args, prefill_logits=mode, **kw).tokens)
            )
            rows.append([f"sample_llama width {width}, {label}: {rep}", up, after])
            raw[f"{label}: {rep} s"] = time.perf_counter() - t0
            tokens[label] = out[0].tolist()
    raw["tokens"] = tokens
    raw["same_tokens"] = len({tuple(v) for v in tokens.values()}) == 1
    return rows, raw


def _time_v(text: str) -> dict:
    def grab(pat, cast=float):
        m = re.search(pat, text)
        return cast(m.group(1)) if m else None

    wall = grab(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", str)
    secs = None
    if wall:
        secs = 0.0
        for part in wall.split(":"):
            secs = secs * 60 + float(part)
    return {
        "peak_rss_gb": grab(
            r"Maximum resident set size \(kbytes\): (\d+)", lambda s: int(s) * 1024 / _GB
        ),
        "wall_s": secs,
        "user_s": grab(r"User time \(seconds\): ([\d.]+)"),
        "system_s": grab(r"System time \(seconds\): ([\d.]+)"),
        "exit_status": grab(r"Exit status: (\d+)", int),
    }


def _silence(text: str) -> dict | None:
    """The longest gap between two time-stamped lines of the run's own output (the
    ``/usr/bin/time`` report at the end excluded), and the line that ended it."""
    stamped = []
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        try:
            stamped.append((float(head), rest))
        except ValueError:
            continue
    cut = next((i for i, (_, s) in enumerate(stamped) if "Command being timed" in s), None)
    stamped = stamped[:cut]
    if len(stamped) < 2:
        return None
    gaps = [(b[0] - a[0], b[1].strip()) for a, b in zip(stamped, stamped[1:], strict=False)]
    gap, line = max(gaps)
    return {"longest_silence_s": round(gap, 2), "ended_by": line[:160], "lines": len(stamped)}


def collect(name: str, folder: str, code: str, note: str) -> dict:
    d = pathlib.Path(folder)
    err = (d / "stderr.txt").read_text()
    rep = json.loads((d / "out" / "report.json").read_text())
    model = rep.get("model", {})
    run = {"run": name, "code": code, "note": note, "dir": str(d), **_time_v(err)}
    for f in ("load_before", "load_after"):
        p = d / f"{f}.txt"
        run[f] = p.read_text().strip() if p.exists() else None
    for k in ("tokenizer_s", "load_s", "generate_s", "batch_size", "batches", "widths"):
        run[k] = model.get(k)
    run["choice_accuracy_strict"] = (
        (rep.get("choice_accuracy") or {}).get("Overall", {}).get("mean")
    )
    run["responses"] = [item["response"] for item in rep["items"]]
    run["silence"] = _silence(err)
    return run


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", nargs=4, action="append", default=[],
                    metavar=("NAME", "DIR", "CODE", "NOTE"))  # fmt: skip
    ap.add_argument("--probe", metavar="CHECKPOINT", help="the GGUF file to probe")
    ap.add_argument("--width", type=int, default=224, help="probe prompt width")
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    load0 = load_average()
    runs = [collect(*r) for r in args.run]
    first = runs[0]["responses"] if runs else None
    table_runs = []
    for r in runs:
        widths = r["widths"] or []
        shown = sorted(set(widths))
        silence = (r["silence"] or {}).get("longest_silence_s")
        table_runs.append([
            r["run"], r["code"], f"{r['batches']} ({', '.join(map(str, shown))})",
            r["peak_rss_gb"], r["wall_s"] / 60 if r["wall_s"] is not None else None,
            r["user_s"], r["load_s"], r["generate_s"], silence,
            "yes" if r["responses"] == first else "NO",
        ])  # fmt: skip
    tables = {
        "runs": {
            "columns": ["run", "code", "batches (widths)", "peak RSS GB", "wall min",
                        "CPU user s", "weights load s", "generation s",
                        "longest silence s", "responses = first run's"],
            "rows": table_runs,
            "formats": [None, None, None, ".2f", ".1f", ".0f", ".0f", ".0f", ".1f", None],
        }
    }  # fmt: skip
    extra = {"runs": [{k: v for k, v in r.items() if k != "responses"} for r in runs],
             "responses_first_run": first}  # fmt: skip
    if args.probe:
        rows, raw = probe(args.probe, args.width, args.new_tokens)
        tables["probe"] = {
            "columns": ["step (one process, in this order)", "peak above before GB",
                        "resident after GB"],
            "rows": rows,
            "formats": [None, ".2f", ".2f"],
        }  # fmt: skip
        extra["probe"] = raw
    write_results("safesci_checkpoint_memory", tables, load_start=load0, extra=extra,
                  out=args.out)  # fmt: skip


if __name__ == "__main__":
    main()
