"""A whole training run as users drive it: the rounds, MLflow tracking, plots and DVC outputs.

``run_pipeline`` is what the Prefect flow, ``dvc repro`` and ``edge train`` all end up calling. It
adds to ``edge.train.train`` what a person wants afterwards: every per-round metric in MLflow, the
bank snapshots and plots as artifacts, and ``metrics.json`` / ``curve.json`` for DVC.
"""

from __future__ import annotations

import json
from pathlib import Path

from edge.config import EdgeParams
from edge.plots import run_plots
from edge.train import Run, round_summary, train, write_json


def collect_rows(run: Run) -> list[dict]:
    rows = []
    for k in range(run.params.train.rounds):
        if (run.round_dir(k) / "train_metrics.json").exists():
            rows.append(round_summary(run, k))
    return rows


def final_metrics(run: Run, rows: list[dict]) -> dict:
    """The last evaluated round's numbers, flat, for `dvc metrics show` and the summary table."""
    last = next((r for r in reversed(rows) if any(k.startswith("eval_") for k in r)), {})
    base = json.loads((run.folder / "eval_base.json").read_text())
    out = {"method": run.params.train.method, "env": run.params.train.env, "seed": run.params.seed,
           "rounds": len(rows), "last_evaluated_round": last.get("round")}
    for split in run.params.eval.splits:
        out[f"{split}_base_plain"] = base[split]["plain"]["success"]
        for key in ("plain", "with_bank", "retention"):
            out[f"{split}_{key}"] = last.get(f"eval_{split}_{key}")
    return out


def format_round(k: int, s: dict, run: Run) -> list[str]:
    """What a person wants to see after a round: success, losses, Delta, and the bank's changes."""
    evals = "  ".join(f"{key[5:]}={v:.1%}" for key, v in s.items() if key.startswith("eval_") and v is not None)
    conditioned = s.get("train_success_conditioned")
    lines = [f"round {k}: train plain {s['train_success_plain']:.1%}"
             + (f" / conditioned {conditioned:.1%}" if conditioned is not None else "")
             + f"  pg {s.get('pg_loss', 0):+.4f}  distill {s.get('distill_loss', 0):.4f}  kl {s.get('kl', 0):.4f}"
             f"  samples {s['samples']}  {evals}  ({s['collect_seconds']:.0f}+{s['update_seconds']:.0f} s)"]
    changes_file = run.round_dir(k) / "bank_changes.json"
    if changes_file.exists():
        changes = json.loads(changes_file.read_text())
        lines.append(f"  Delta mean {s['delta_mean']:+.3f}, Delta>0 in {s['delta_positive_share']:.0%} of the "
                     f"{s['retrieval_hit_rate']:.0%} of groups that retrieved; bank {changes['size_active']} active "
                     f"(+{len(changes['added'])} added, {len(changes['merged'])} merged, "
                     f"-{len(changes['pruned'])} pruned)")
        for a in changes["added"]:
            more = " ..." if len(a["provenance"]) > 3 else ""
            lines.append(f"  + {a['id']} [{a['signature']}] {a['text']}  from {', '.join(a['provenance'][:3])}{more}")
        for p in changes["pruned"]:
            lines.append(f"  - {p['id']} pruned ({p['reason']}, utility {p['utility']:+.3f}, {p['uses']} uses)")
    elif run.settings.use_bank:  # the oracle control: experience without a bank
        lines.append(f"  Delta mean {s['delta_mean']:+.3f}, Delta>0 in {s['delta_positive_share']:.0%} of the "
                     f"{s['retrieval_hit_rate']:.0%} of groups that retrieved; distill KL {s.get('distill_kl', 0):.4f}")
    return lines


def run_pipeline(params: EdgeParams, stages: dict | None = None, track: bool = True, on_round=None) -> dict:
    tracker = None
    if track:
        from edge.tracking import Tracker, params_dict

        run_folder = Run.open(params).folder
        tracker = Tracker(run_folder, params_dict(params))

    def after_round(k: int, summary: dict, run: Run) -> None:
        if tracker:
            tracker.log_round(k, summary, run.round_dir(k))
        if on_round:
            on_round(k, summary, run)

    run = train(params, on_round=after_round, stages=stages)
    rows = collect_rows(run)
    # Rounds without an evaluation leave those keys out (DVC's plots skip missing keys, not nulls).
    write_json(run.folder / "curve.json", [{k: v for k, v in r.items() if v is not None} for r in rows])
    metrics = final_metrics(run, rows)
    write_json(run.folder / "metrics.json", metrics)
    title = f"{params.train.env} / {params.train.method} / seed {params.seed}"
    plots = run_plots(rows, run.folder / "plots", title)
    if tracker:
        tracker.log_files(plots, "plots")
        tracker.log_files([run.folder / "metrics.json", run.folder / "curve.json"], "summary")
        tracker.finish()
    return metrics | {"run_folder": str(run.folder)}


def last_outcomes(folder: Path, metrics: dict, split: str = "test_seen") -> dict | None:
    """Plain success by task id at a run's last evaluated round (None for runs from before it was kept)."""
    k = metrics.get("last_evaluated_round")
    path = Path(folder) / f"round_{k:03d}" / "eval.json" if k is not None else None
    if path is None or not path.exists():
        return None
    return json.loads(path.read_text()).get(split, {}).get("plain", {}).get("won_by_task")


def compare_runs(run_folders: list[Path], out_dir: Path) -> dict:
    """The `compare` stage: a table and a plot across methods (paired by seed and tasks)."""
    from edge.plots import compare_plot

    table, curves, folders = [], {}, {}
    for folder in run_folders:
        metrics = json.loads((Path(folder) / "metrics.json").read_text())
        rows = json.loads((Path(folder) / "curve.json").read_text())
        table.append(metrics)
        folders[metrics["method"]] = Path(folder)
        curves[f"{metrics['method']} s{metrics['seed']}"] = [
            (r["round"], r["eval_test_seen_plain"], r.get("eval_test_seen_with_bank"))
            for r in rows if r.get("eval_test_seen_plain") is not None]
    by_method = {m["method"]: m for m in table}
    summary = {"runs": table}
    if "grpo" in by_method:
        from edge.benchmarking.stats import paired_task_difference

        summary["minus_grpo_plain"] = {m: r["test_seen_plain"] - by_method["grpo"]["test_seen_plain"]
                                       for m, r in by_method.items() if m != "grpo"}
        if "edge" in by_method:
            summary["edge_minus_grpo_plain"] = summary["minus_grpo_plain"]["edge"]
        # Paired task by task (same tasks, same random streams): the interval is evaluation noise only.
        grpo_tasks = last_outcomes(folders["grpo"], by_method["grpo"])
        summary["minus_grpo_plain_paired"] = {
            m: paired_task_difference(ours, grpo_tasks).to_dict() for m, r in by_method.items()
            if m != "grpo" and grpo_tasks and (ours := last_outcomes(folders[m], r))}
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "compare.json", summary)
    compare_plot(curves, out_dir / "compare.png", "methods against GRPO (test_seen)")
    return summary
