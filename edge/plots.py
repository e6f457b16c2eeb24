"""The figures people look at: success with and without the bank per round, bank growth, Delta."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display here or in CI
import matplotlib.pyplot as plt  # noqa: E402


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_plots(rows: list[dict], folder: Path, title: str) -> list[Path]:
    """``rows``: the per-round summaries of one run (``edge.train.round_summary``)."""
    out = []
    rounds = [r["round"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for key, label, style in (("eval_test_seen_plain", "plain (no bank)", "o-"),
                              ("eval_test_seen_with_bank", "with bank", "s--"),
                              ("train_success_plain", "train, plain", ":")):
        points = [(r["round"], r[key]) for r in rows if r.get(key) is not None]
        if points:
            ax.plot(*zip(*points), style, label=label)
    ax.set(xlabel="round", ylabel="success", title=f"{title}: success", ylim=(0, 1))
    ax.legend()
    out.append(_save(fig, folder / "success.png"))
    if any("bank_size" in r for r in rows):
        fig, ax = plt.subplots(figsize=(6, 3.6))
        ax.plot(rounds, [r.get("bank_size", 0) for r in rows], "o-", label="active entries")
        ax.bar(rounds, [r.get("entries_added", 0) for r in rows], alpha=0.4, label="added")
        ax.bar(rounds, [-r.get("entries_pruned", 0) for r in rows], alpha=0.4, label="pruned")
        ax.set(xlabel="round", ylabel="entries", title=f"{title}: bank")
        ax.legend()
        out.append(_save(fig, folder / "bank.png"))
        fig, ax = plt.subplots(figsize=(6, 3.6))
        ax.plot(rounds, [r.get("delta_mean", 0) for r in rows], "o-", label="mean Delta")
        ax.plot(rounds, [r.get("delta_positive_share", 0) for r in rows], "s--", label="share Delta > 0")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set(xlabel="round", title=f"{title}: marginal contribution")
        ax.legend()
        out.append(_save(fig, folder / "delta.png"))
    return out


def compare_plot(curves: dict[str, list[tuple[int, float, float | None]]], path: Path, title: str) -> Path:
    """Plain (solid) and with-bank (dashed) success per round for several methods."""
    return curves_plot(curves, path, title, xlabel="round (-1: the base)", ylabel="test_seen success")


def curves_plot(curves: dict[str, list[tuple[float, float, float | None]]], path: Path, title: str,
                xlabel: str, ylabel: str = "success", second: str = "with bank") -> Path:
    """Plain (solid) and with-bank (dashed; ``second`` names it in the legend) success against ``xlabel`` for
    several methods; ``curves[method]`` holds (x, plain, with bank or None) points."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for method, points in curves.items():
        line, = ax.plot([p[0] for p in points], [p[1] for p in points], "o-", label=f"{method} plain")
        banked = [(p[0], p[2]) for p in points if p[2] is not None]
        if banked:
            ax.plot(*zip(*banked), "s--", color=line.get_color(), label=f"{method} {second}")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title, ylim=(0, 1))
    ax.legend(fontsize=7)
    return _save(fig, path)


def replicates_plot(rows: dict[str, dict[str, list[float]]], pooled: dict[str, tuple[float, float, float]],
                    path: Path, title: str, xlabel: str = "plain − GRPO (points)") -> Path:
    """One line per configuration: each replicate's paired difference as a dot, coloured by the machine
    that made it (``rows[config][machine]``), and the pooled mean with its interval
    (``pooled[config]``: mean, low, high) as a bar under the dots. A reader sees at once whether one
    machine or one seed carries the mean."""
    configs = list(rows)
    machines = sorted({m for by_machine in rows.values() for m in by_machine})
    colours = {m: f"C{i}" for i, m in enumerate(machines)}
    labelled: set[str] = set()
    fig, ax = plt.subplots(figsize=(7, 1.6 + 0.7 * len(configs)))
    for y, config in enumerate(configs):
        for m, values in rows[config].items():
            # A small vertical jitter, so that replicates with equal values stay visible.
            offsets = [0.08 + 0.04 * (i % 3) for i in range(len(values))]
            ax.scatter(values, [y + o for o in offsets], s=22, color=colours[m],
                       label=None if m in labelled else m)
            labelled.add(m)
        mean, low, high = pooled[config]
        ax.errorbar([mean], [y - 0.12], xerr=[[mean - low], [high - mean]], fmt="D", color="black", capsize=4)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(range(len(configs)), configs)
    ax.set_ylim(-0.6, len(configs) - 0.3)
    ax.invert_yaxis()
    ax.set(xlabel=xlabel, title=title)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=len(machines), frameon=False)
    return _save(fig, path)
