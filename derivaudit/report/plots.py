"""The HTML report's plots, drawn by matplotlib as inline SVG (no scripts, no network)."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

TRUTH_NAMES = {True: "valid (supported)", False: "unsupported / contradicted", None: "excluded"}
COLORS = {True: "#2a9d8f", False: "#e76f51", None: "#9e9e9e"}


def _fig(w: float, h: float) -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "derivaudit", "font.size": 9})
    return plt.figure(figsize=(w, h))


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prologue and DOCTYPE: the SVG is inlined in HTML


def _label(text: Any) -> str:
    """Untrusted text as a plot label: controls made visible (an SVG cannot hold C0 characters and
    matplotlib warns with the raw glyph), `$` escaped so that mathtext never parses it."""
    from ..safe import visible

    return visible(str(text)).replace("$", r"\$")


def _finite(xs: Sequence[Any]) -> list[float]:
    out = []
    for x in xs:
        try:
            v = float(x)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            out.append(v)
    return out


def distributions(rows_by_setting: dict[str, list[dict[str, Any]]]) -> str:
    """Log-odds histograms by reference label, one panel per view × evidence setting."""
    keys = list(rows_by_setting)
    cols = min(3, len(keys))
    nrows = math.ceil(len(keys) / cols)
    fig = _fig(3.3 * cols, 2.3 * nrows)
    for i, key in enumerate(keys, start=1):
        ax = fig.add_subplot(nrows, cols, i)
        rows = rows_by_setting[key]
        allv = _finite(r["score"] for r in rows)
        lo, hi = (min(allv), max(allv)) if allv else (-1.0, 1.0)
        bins = 24 if hi > lo else 3
        for truth in (True, False, None):
            vals = _finite(r["score"] for r in rows if r["truth"] is truth)
            if vals:
                ax.hist(vals, bins=bins, range=(lo, hi if hi > lo else lo + 1), histtype="step", linewidth=1.4,
                        color=COLORS[truth], label=f"{TRUTH_NAMES[truth]} ({len(vals)})")
        ax.axvline(0, color="#555", linewidth=0.6, linestyle=":")
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("log-odds yes/no")
        ax.legend(fontsize=6, frameon=False, loc="upper left")  # a fixed place: "best" costs seconds on big runs
    fig.subplots_adjust(hspace=0.65, wspace=0.3)
    return _svg(fig)


def roc_points(pos: Sequence[float], neg: Sequence[float], max_points: int = 400) -> tuple[list[float], list[float]]:
    """(false-positive rates, true-positive rates) over every threshold, ties taken together."""
    scored = sorted([(s, 1) for s in pos] + [(s, 0) for s in neg], key=lambda t: -t[0])
    fpr, tpr = [0.0], [0.0]
    tp = fp = 0
    i = 0
    while i < len(scored):
        j = i
        while j < len(scored) and scored[j][0] == scored[i][0]:
            tp += scored[j][1]
            fp += 1 - scored[j][1]
            j += 1
        fpr.append(fp / len(neg))
        tpr.append(tp / len(pos))
        i = j
    if len(fpr) > 2 * max_points:  # thin a long curve to a grid of steps; its shape is unchanged at plot size
        keep, last = [0], (0.0, 0.0)
        for k in range(1, len(fpr) - 1):
            if abs(fpr[k] - last[0]) >= 1 / max_points or abs(tpr[k] - last[1]) >= 1 / max_points:
                keep.append(k)
                last = (fpr[k], tpr[k])
        keep.append(len(fpr) - 1)
        fpr, tpr = [fpr[k] for k in keep], [tpr[k] for k in keep]
    return fpr, tpr


def roc(rows_by_setting: dict[str, list[dict[str, Any]]]) -> str:
    fig = _fig(4.6, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], color="#bbb", linewidth=0.8, linestyle="--")
    drawn = 0
    for key, rows in rows_by_setting.items():
        pos = _finite(r["score"] for r in rows if r["truth"] is True)
        neg = _finite(r["score"] for r in rows if r["truth"] is False)
        if pos and neg:
            x, y = roc_points(pos, neg)
            ax.plot(x, y, linewidth=1.3, label=_label(key))
            drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, "needs both valid and unsupported memories", ha="center", va="center", fontsize=8)
    ax.set_xlabel("unsupported admitted (false-positive rate)")
    ax.set_ylabel("valid kept (true-positive rate)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    if drawn:
        ax.legend(fontsize=6, frameon=False, loc="lower right")
    return _svg(fig)


def per_conversation(per_conv: Sequence[dict[str, Any]],
                     metrics: Sequence[str] = ("citation_supported", "expanded_supported", "unsupported",
                                               "contradicted", "ambiguous")) -> str:
    import numpy as np

    n = len(per_conv)
    fig = _fig(min(14.0, 2.5 + 0.45 * n * len(metrics) / 3), 3.2)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(n)
    width = 0.8 / len(metrics)
    for i, m in enumerate(metrics):
        ax.bar(x + (i - (len(metrics) - 1) / 2) * width, [r.get(m) or 0.0 for r in per_conv], width, label=m)
    ax.set_xticks(x, [_label(r["conversation_id"]) for r in per_conv], rotation=60 if n > 8 else 0, fontsize=7,
                  ha="right" if n > 8 else "center")
    if n > 40:  # too many to name: keep every k-th label
        k = math.ceil(n / 40)
        for j, lab in enumerate(ax.get_xticklabels()):
            lab.set_visible(j % k == 0)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of the conversation's writes")
    ax.legend(fontsize=7, frameon=False, ncols=len(metrics), loc="upper center", bbox_to_anchor=(0.5, 1.15))
    return _svg(fig)


def noise_curve(noise: dict[str, Any]) -> str:
    levels = sorted(noise.get("levels", {}), key=int)
    fig = _fig(4.6, 3.0)
    ax = fig.add_subplot(1, 1, 1)
    xs = [int(n) for n in levels]
    mean = [noise["levels"][n].get("mean_logodds") for n in levels]
    adm = [noise["levels"][n].get("admitted_argmax") for n in levels]
    ax.plot(xs, [m if m is not None else float("nan") for m in mean], marker="o", color="#264653",
            label="mean log-odds")
    ax.set_xlabel("extra true obligations added")
    ax.set_ylabel("mean log-odds (obligation view)")
    ax.set_xticks(xs)
    ax2 = ax.twinx()
    ax2.plot(xs, [a if a is not None else float("nan") for a in adm], marker="s", color="#e76f51",
             label="admitted at log-odds > 0")
    ax2.set_ylim(0, 1.02)
    ax2.set_ylabel("admitted")
    if not noise.get("writes"):
        ax.text(0.5, 0.5, "no supported memory to probe", ha="center", va="center", transform=ax.transAxes, fontsize=8)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=7, frameon=False, loc="lower left")
    return _svg(fig)


def bars(values: dict[str, float | None], ylabel: str) -> str:
    """One bar per named rate (0–1); a missing rate is drawn as an empty slot marked n/a."""
    fig = _fig(max(3.2, 0.75 * len(values)), 2.8)
    ax = fig.add_subplot(1, 1, 1)
    names = list(values)
    ax.bar(range(len(names)), [v if v is not None else 0 for v in values.values()], color="#2a9d8f")
    for i, v in enumerate(values.values()):
        ax.text(i, (v or 0) + 0.02, "n/a" if v is None else f"{v:.0%}", ha="center", fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([_label(n) for n in names], rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(ylabel)
    return _svg(fig)


def rate_lines(series: dict[str, list[tuple[int, float | None, Sequence[Any]]]], xlabel: str, ylabel: str) -> str:
    """A rate per x for each series, with its interval as error bars."""
    fig = _fig(4.6, 3.0)
    ax = fig.add_subplot(1, 1, 1)
    for (name, pts), color in zip(series.items(), ("#264653", "#e76f51", "#2a9d8f"), strict=False):
        pts = [p for p in pts if p[1] is not None]
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        lo = [y - (p[2][0] if p[2] and p[2][0] is not None else y) for y, p in zip(ys, pts, strict=True)]
        hi = [(p[2][1] if p[2] and p[2][1] is not None else y) - y for y, p in zip(ys, pts, strict=True)]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", color=color, label=_label(name), capsize=3)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, frameon=False)
    return _svg(fig)


def accuracy_at_coverage(acc: dict[str, Any]) -> str:
    """Accuracy of the most confident share of the labelled writes, against that share."""
    fig = _fig(4.2, 2.6)
    ax = fig.add_subplot(1, 1, 1)
    xs = [r["coverage"] for r in acc["table"]]
    ys = [r["accuracy"] for r in acc["table"]]
    ax.plot(xs, ys, marker="o", color="#264653")
    ax.set_xlim(0, 1.05)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("share of labelled writes, most confident first")
    ax.set_ylabel("accuracy against reference")
    ax.grid(alpha=0.3)
    return _svg(fig)
