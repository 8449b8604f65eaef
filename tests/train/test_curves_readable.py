"""The training-curve figures are readable (issue 41): labelled axes, log / symlog y-axes where
the values span decades, a legend even for one run, one colour per method across figures."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("matplotlib")

from fidia_jax.train import _report  # noqa: E402


def _records(runs, n=40, *, loss, acc=None):
    out = []
    for run in runs:
        for i in range(1, n + 1):
            r = {"run": run, "step": i, "loss": loss(i)}
            out.append(r)
        if acc is not None:
            out += [{"run": run, "step": s, "eval/accuracy": acc(s)} for s in (10, 20, 40)]
    return out


def _figure(records, keys=("loss",)):
    plt = _report.pyplot()
    fig = _report._curves_figure(records, keys, None, plt)
    assert fig is not None
    return fig, plt


def test_scale_rule():
    assert _report.axis_scale([0.2, 0.5, 0.9]) == ("linear", {})
    assert _report.axis_scale([1e3, 1.0, 0.5]) == ("log", {})  # 3.3 decades
    assert _report.axis_scale([50.0, 1.0]) == ("linear", {})  # 1.7 decades
    scale, kw = _report.axis_scale([5.0, 0.03, -2.0, -400.0])
    assert scale == "symlog" and kw["linthresh"] == pytest.approx(0.01)
    assert _report.axis_scale([1.0, -0.5, 2.0]) == ("linear", {})  # crosses zero, one decade
    assert _report.axis_scale([math.nan, 0.0]) == ("linear", {})


def test_one_run_has_labels_log_axis_and_legend():
    fig, plt = _figure(_records(["train"], loss=lambda i: 10.0 * 0.8**i,
                                acc=lambda s: 1e-4 * 10 ** (s / 10)))  # fmt: skip
    try:
        loss_ax, acc_ax = fig.axes
        assert loss_ax.get_yscale() == "log"  # 10 -> 1.3e-3: 3.9 decades
        assert acc_ax.get_yscale() == "log"  # an eval panel over decades is log too
        assert loss_ax.get_ylabel().startswith("loss")
        assert acc_ax.get_ylabel().startswith("accuracy")
        assert all(ax.get_xlabel() == "step" for ax in fig.axes)
        legend = loss_ax.get_legend()
        assert legend is not None and [t.get_text() for t in legend.get_texts()] == ["train"]
    finally:
        plt.close(fig)


def test_negative_loss_over_decades_is_symlog_and_small_range_linear():
    fig, plt = _figure(_records(["hist"], loss=lambda i: 3.0 - 1.2**i,
                                acc=lambda s: 0.5 + s / 100))  # fmt: skip
    try:
        loss_ax, acc_ax = fig.axes
        assert loss_ax.get_yscale() == "symlog"  # +1.8 down to -1.5e3
        assert acc_ax.get_yscale() == "linear"  # 0.6 .. 0.9
        assert "symlog" in loss_ax.get_ylabel()
    finally:
        plt.close(fig)


def test_same_colour_per_method_across_figures():
    a, plt = _figure(_records(["hypcl/order0", "euclidean/order0"], loss=lambda i: 1.0 / i))
    b, _ = _figure(_records(["euclidean/order1", "mystery", "hypcl/order1"], loss=lambda i: 2.0))
    try:
        colours = {}
        for fig in (a, b):
            for line in fig.axes[0].get_lines():
                method = line.get_label().split("/")[0]
                colours.setdefault(method, set()).add(line.get_color())
        assert all(len(c) == 1 for c in colours.values()), colours
        assert colours["hypcl"] != colours["euclidean"]
        assert colours["mystery"] == {_report.method_color("mystery")}
        assert _report.method_color("mystery") == _report.method_color("Mystery/seed3")
        assert len(b.axes[0].get_legend().get_texts()) == 3
    finally:
        plt.close(a)
        plt.close(b)


def test_plot_curves_writes_png(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _records(["train"], loss=lambda i: i)))
    assert _report.plot_curves(path, tmp_path / "c.png") == tmp_path / "c.png"
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert _report.plot_curves(path, tmp_path / "d.png", keys=("absent",)) is None
    assert not (tmp_path / "d.png").exists()


def test_bars_use_method_colours_and_log_axis(tmp_path):
    plt = _report.pyplot()
    seen = []
    orig = plt.subplots

    def spy(*a, **k):
        fig, axes = orig(*a, **k)
        seen.append(fig)
        return fig, axes

    plt.subplots = spy
    try:
        _report.plot_bars(
            [{"m": "hist", "t": 1.0, "e": 0.5}, {"m": "baseline", "t": 500.0, "e": 0.4}],
            tmp_path / "b.png", label="m", values=["t", "e"],
        )  # fmt: skip
    finally:
        plt.subplots = orig
    (fig,) = seen
    t_ax, e_ax = fig.axes
    assert t_ax.get_yscale() == "log" and e_ax.get_yscale() == "linear"
    assert t_ax.get_ylabel().startswith("t") and e_ax.get_ylabel() == "e"
    import matplotlib.colors as mc

    got = [mc.to_hex(p.get_facecolor()) for p in t_ax.patches]
    assert got == [_report.method_color("hist"), _report.method_color("baseline")]
    plt.close(fig)
