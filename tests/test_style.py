"""The shared figure style: series that others would hide are found, drawn visible and named."""

import matplotlib.pyplot as plt
import numpy as np

from kernels.paper import style

X = np.array([1.0, 2.0, 4.0, 8.0])


def _figure(*series, ncols=1):
    """A figure of one panel per list in ``series``: each list of ``(label, y, color)`` drawn in turn."""
    fig, axes = style.figure(width=style.FULL_WIDTH, ncols=ncols, squeeze=False)
    for ax, lines in zip(axes[0], series):
        for text, y, color in lines:
            ax.plot(X, y, marker="o", color=color, label=text)
        ax.set_yscale("log")
    fig.tight_layout()
    return fig, list(axes[0])


def test_a_line_under_a_later_one_is_hidden_and_a_distinct_one_is_not():
    fig, axes = _figure([("ours", X * 100, "C0"), ("theirs", X * 100.5, "C1"), ("far", X * 10, "C2")])
    assert style.hidden_series(axes) == [style._series(axes[0].lines[0])]


def test_error_bar_caps_and_plain_lines_are_not_series():
    fig, ax = style.figure()
    ax.errorbar(X, X, yerr=0 * X, fmt="o", color="C0", capsize=2)
    ax.plot(X, X, color="C1")
    assert style.hidden_series([ax]) == []


def test_hidden_series_are_drawn_on_top_in_hollow_rings_of_distinct_sizes():
    fig, axes = _figure([("a", X * 100, "C0"), ("b", X * 100, "C1"), ("c", X * 100, "C2"), ("d", X * 10, "C3")])
    a, b, c, d = axes[0].lines
    assert style.reveal_hidden(axes) == [style._series(a), style._series(b)]
    assert a.get_markerfacecolor() == b.get_markerfacecolor() == "none"
    assert a.get_markersize() != b.get_markersize() and min(a.get_markersize(), b.get_markersize()) > \
        c.get_markersize()
    assert min(a.get_zorder(), b.get_zorder()) > c.get_zorder()
    assert d.get_markerfacecolor() != "none" and d.get_markersize() == c.get_markersize()


def test_coinciding_names_the_first_drawn_in_every_panel():
    fig, axes = _figure([("a", X * 100, "C0"), ("b", X * 100, "C1"), ("c", X * 100.3, "C2")],
                        [("a", X, "C0"), ("b", X, "C1"), ("c", X * 3, "C2")], ncols=2)
    assert style.coinciding(axes) == {"b": "= a"}  # c lies on a in one panel only
    fig, axes = _figure([("a", X * 100, "C0"), ("c", X * 100.3, "C2")])
    assert style.coinciding(axes) == {"c": "≈ a"}


def test_legend_says_which_series_coincide():
    fig, axes = _figure([("a", X * 100, "C0"), ("b", X * 100, "C1")])
    style.legend_below(fig, axes)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b (= a)"]
    assert axes[0].lines[0].get_markerfacecolor() == "none"


def test_a_legend_without_reveal_leaves_the_series_as_drawn():
    fig, axes = _figure([("a", X * 100, "C0"), ("b", X * 100, "C1")])
    style.legend_below(fig, axes, reveal=False)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["a", "b (= a)"]
    assert axes[0].lines[0].get_markerfacecolor() != "none"
    assert {ln.get_markersize() for ln in axes[0].lines} == {plt.rcParams["lines.markersize"]}


def test_a_log_y_axis_has_a_labelled_tick_beyond_each_end_of_its_lines():
    """Values of 6.4 to 150 on a log y axis: set to 5 and 200, its lowest and highest labelled
    ticks; from the data, not the margins (10.5 to 98: 10 and 100); a line drawn after autoscales it
    again, and a second call sets it anew; an x axis keeps its limits."""
    fig, ax = style.figure()
    ax.plot([1.3, 50], [6.4, 150])
    ax.set_xscale("log")
    ax.set_yscale("log")
    xlim = ax.get_xlim()
    style.plain_log(ax)
    fig.canvas.draw()
    assert ax.get_ylim() == (5.0, 200.0) and ax.get_xlim() == xlim
    labels = [t.get_text() for t in ax.get_yticklabels() if 5 <= t.get_position()[1] <= 200]
    assert labels[0] == "5" and labels[-1] == "200"
    ax.plot([1.3, 50], [1.5, 150])
    style.plain_log(ax, "y")
    assert ax.get_ylim() == (1.0, 200.0)
    plt.close(fig)
    fig, ax = style.figure()
    ax.plot([1.3, 50], [10.5, 98])
    ax.set_yscale("log")
    style.plain_log(ax, "y")
    assert ax.get_ylim() == (10.0, 100.0)
    plt.close(fig)
    assert style.tokens(131072) == "128K" and style.tokens(8191) == "8K" and style.tokens(3277) == "3.2K"
    assert style.tokens(64) == "64" and style.tokens(float("nan")) == style.MISSING
