#!/usr/bin/env bash
# The GPU benchmarks of docs/benchmarks.md in one command, for one H200 on a device machine
# (issues 41 and 44): at most ~410 s of wall time in all, every stage under its own `timeout`.
#
#   1. benchmarks/gpu_attention.py --parts decode,train --train-len 1024 (decode step, Attn-QAT
#      forward, bf16 peers forward and forward+backward)                       <= 130 s
#   2. benchmarks/gpu_attention.py --parts qat_bwd --append (the Pallas Attn-QAT backward,
#      whose compile has not finished in earlier runs; its own short limit)    <=  40 s
#   3. benchmarks/gpu_paso.py --data-dir .devdata (digits T = 2048, tiny LLaMA T = 512,
#      windows 16 and 32)                                                       <= 150 s
#   4. JAX_PLATFORMS=cuda pytest tests/kernels (the Pallas kernels compiled by Triton, not
#      interpreted, against their references)                                  <=  80 s
#
# A stage stopped by its limit keeps what it measured: the scripts write their results file
# before and after every measurement (the cut-off cell says "not finished"). The results files
# are written to benchmarks/results/ (so their recorded command is the one that remakes them)
# and copied, with the logs, to $OUT (flat, 5 files):
#   gpu_attention.json  gpu_paso.json  kernels_pytest.log  device_gpu_bench.log  stages.tsv
#
# Needs, in the repository root: the working tree (PYTHONPATH=., nothing is installed) and the
# Shakespeare text in .devdata/text/shakespeare (`mkdir -p .devdata/text && cp -r
# ../shared/data/text/shakespeare .devdata/text/`; carried to the device with carry
# [".devdata"]). The device has no .git: set FIDIA_COMMIT to this tree's commit
# (`git rev-parse HEAD`, plus "+dirty" when it has changes) so the results files record it.
#
# Usage (from the repository root):
#   OUT=/some/dir FIDIA_COMMIT=<sha> bash tools/device_gpu_bench.sh           # on the GPU
#   OUT=/tmp/gpuout bash tools/device_gpu_bench.sh --smoke                     # CPU check
# --smoke runs the same stages on the CPU (JAX_PLATFORMS=cpu, the scripts' --smoke modes,
# results written to $OUT only, one small kernels test file), with longer limits.
set -u

# everything in one function: bash has read the whole file before the first stage starts
main() {
  SMOKE=0
  if [ "${1:-}" = "--smoke" ]; then SMOKE=1; fi
  OUT="${OUT:-/tmp/gpuout}"
  mkdir -p "$OUT"
  LOG="$OUT/device_gpu_bench.log"
  STAGES="$OUT/stages.tsv"
  : >"$LOG"
  printf 'stage\texit\tseconds\tlimit_s\n' >"$STAGES"
  export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONUNBUFFERED=1
  PY="${PYTHON:-python3}"
  START=$(date +%s)
  BUDGET="${BENCH_BUDGET_S:-410}"  # the whole script's wall time, seconds
  if [ "$SMOKE" = 1 ]; then
    export JAX_PLATFORMS=cpu
    BUDGET="${BENCH_BUDGET_S:-1500}"
    RES="$OUT"  # smoke results are not the page's: keep them out of benchmarks/results
  else
    RES="benchmarks/results"
  fi

  log() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - START))s] $*" | tee -a "$LOG"; }

  copy_results() {
    if [ "$RES" != "$OUT" ]; then
      for f in gpu_attention.json gpu_paso.json; do
        [ -f "$RES/$f" ] && cp "$RES/$f" "$OUT/$f"
      done
    fi
    return 0
  }
  trap copy_results EXIT

  # stage NAME LIMIT_S LOGFILE CMD...: runs CMD under `timeout`, capped by what is left of BUDGET
  stage() {
    local name=$1 limit=$2 logfile=$3
    shift 3
    local left=$((BUDGET - ($(date +%s) - START)))
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    if [ "$limit" -lt 15 ]; then
      log "SKIP $name: ${left}s left of the ${BUDGET}s budget"
      printf '%s\tskipped\t0\t%s\n' "$name" "$limit" >>"$STAGES"
      return 0
    fi
    log "START $name (limit ${limit}s): $*"
    local t0 rc
    t0=$(date +%s)
    timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$logfile"
    rc=${PIPESTATUS[0]}
    local dt=$(($(date +%s) - t0))
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && log "TIMEOUT $name after ${dt}s (rc $rc)"
    log "END $name rc=$rc ${dt}s"
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$dt" "$limit" >>"$STAGES"
    copy_results
    return 0
  }

  log "repository $(pwd); OUT=$OUT; smoke=$SMOKE; budget ${BUDGET}s; FIDIA_COMMIT=${FIDIA_COMMIT:-unset}"
  {
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
    "$PY" -c 'import sys, jax, flax, optax, numpy, sklearn; print(sys.version.split()[0], "jax", jax.__version__, "flax", flax.__version__, "optax", optax.__version__, "numpy", numpy.__version__, "sklearn", sklearn.__version__); print(jax.devices())'
    ls .devdata/text/shakespeare 2>/dev/null | wc -l | sed 's/^/shakespeare files in .devdata: /'
  } >>"$LOG" 2>&1

  if [ "$SMOKE" = 1 ]; then
    stage attention 600 "$LOG" "$PY" benchmarks/gpu_attention.py --smoke --parts decode,train \
      --out "$RES/gpu_attention.json"
    stage attention_qat_bwd 300 "$LOG" "$PY" benchmarks/gpu_attention.py --smoke --parts qat_bwd \
      --append --out "$RES/gpu_attention.json"
    stage paso 600 "$LOG" "$PY" benchmarks/gpu_paso.py --smoke --data-dir .devdata \
      --out "$RES/gpu_paso.json"
    PLATFORM=cpu KERNELS_LIMIT=300 SELECT="test_decode_backend_choice"  # one quick file
  else
    stage attention 130 "$LOG" "$PY" benchmarks/gpu_attention.py --parts decode,train \
      --train-len 1024 --repeats 10
    stage attention_qat_bwd 40 "$LOG" "$PY" benchmarks/gpu_attention.py --parts qat_bwd \
      --train-len 1024 --repeats 5 --append
    stage paso 150 "$LOG" "$PY" benchmarks/gpu_paso.py --data-dir .devdata
    PLATFORM=cuda KERNELS_LIMIT=80 SELECT=""
  fi
  # tests/kernels: the Pallas kernels compiled for the GPU first (their non-interpret test
  # classes), then the rest; -v so that a run cut off by its limit still shows what passed.
  # Deprecation and user warnings are shown (warnings summary), not raised: jax 0.11 warns that
  # the Pallas Triton backend is deprecated, which pyproject's filter (error on warnings raised
  # from fidia_jax.*) could turn into a failure of every GPU kernel test.
  first="tests/kernels/test_santa_pallas.py tests/kernels/test_attn_qat_pallas.py"
  first="$first tests/kernels/test_triton_lowering.py"
  rest=$(ls tests/kernels/test_*.py | grep -v -e test_santa_pallas.py -e test_attn_qat_pallas.py \
    -e test_triton_lowering.py)
  # shellcheck disable=SC2086
  stage kernels_pytest "$KERNELS_LIMIT" "$OUT/kernels_pytest.log" env JAX_PLATFORMS="$PLATFORM" \
    "$PY" -m pytest -v -p no:cacheprovider -p no:xdist -W default::DeprecationWarning \
    -W default::UserWarning ${SELECT:+-k "$SELECT"} $first $rest --maxfail=5 -rfE --durations=10
  tail -n 5 "$OUT/kernels_pytest.log" 2>/dev/null | sed 's/^/kernels_pytest: /' | tee -a "$LOG"
  log "done; stages:"
  tee -a "$LOG" <"$STAGES"
  copy_results
  ls -la "$OUT" | tee -a "$LOG"
}

main "$@"
