"""A whole training run as users drive it: the rounds, MLflow tracking, plots and DVC outputs.

``run_pipeline`` is what the Prefect flow, ``dvc repro`` and ``edge train`` all end up calling. It
adds to ``edge.train.train`` what a person wants afterwards: every per-round metric in MLflow, the
bank snapshots and plots as artifacts, and ``metrics.json`` / ``curve.json`` / ``eval_curve.json`` for DVC.
"""

from __future__ import annotations

import json
from pathlib import Path

from edge.config import EdgeParams
from edge.plots import run_plots
from edge.train import Run, base_summary, round_summary, train, write_json


def collect_rows(run: Run) -> list[dict]:
    rows = []
    for k in range(run.params.train.rounds):
        if (run.round_dir(k) / "train_metrics.json").exists():
            rows.append(round_summary(run, k))
    return rows


def is_eval_key(key: str) -> bool:
    return key.startswith("eval_") or key == "evaluate_seconds"


def same_keys(rows: list[dict]) -> list[dict]:
    """Every row with every key any row has (None where a row lacks it): DVC's plot converter rejects a
    file whose rows have different keys."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return [{k: r.get(k) for k in keys} for r in rows]


def dvc_curves(rows: list[dict], base: dict) -> tuple[list[dict], list[dict]]:
    """(``curve.json``: the training metrics of every round; ``eval_curve.json``: the evaluation of the
    base, as round -1, and of every evaluated round). Two files because evaluation runs every
    ``eval.every`` rounds: in one file its lines would be isolated points between nulls."""
    train_rows = same_keys([{k: v for k, v in r.items() if not is_eval_key(k)} for r in rows])
    evaluated = [base] + [{k: v for k, v in r.items() if k == "round" or is_eval_key(k)}
                          for r in rows if any(k.startswith("eval_") for k in r)]
    return train_rows, same_keys(evaluated)


def final_metrics(run: Run, rows: list[dict]) -> dict:
    """The last evaluated round's numbers, flat, for `dvc metrics show` and the summary table."""
    last = next((r for r in reversed(rows) if any(k.startswith("eval_") for k in r)), {})
    base = run.read_json(None, "eval_base.json")
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
    plain, conditioned = s.get("train_success_plain"), s.get("train_success_conditioned")
    lines = [f"round {k}: train " + (f"plain {plain:.1%}" if plain is not None else "no plain member")
             + (f" / conditioned {conditioned:.1%}" if conditioned is not None else "")
             + f"  pg {s.get('pg_loss', 0):+.4f}  distill {s.get('distill_loss', 0):.4f}  kl {s.get('kl', 0):.4f}"
             f"  samples {s['samples']}  {evals}  ({s['collect_seconds']:.0f}+{s['update_seconds']:.0f} s)"]
    if run.sealed(k, "update_bank"):
        changes = run.read_json(k, "bank_changes.json")
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
    # Held for the whole command: the summary files and MLflow's state below are the run's too.
    holder = Run.open(params)
    try:
        return _run_pipeline(params, holder.folder, stages, track, on_round)
    finally:
        holder.close()


def _run_pipeline(params: EdgeParams, run_folder: Path, stages: dict | None, track: bool, on_round) -> dict:
    tracker = None
    if track:
        from edge.tracking import Tracker, params_dict

        tracker = Tracker(run_folder, params_dict(params))

    def after_round(k: int, summary: dict, run: Run) -> None:
        if tracker:
            tracker.log_base(base_summary(run))
            tracker.log_round(k, summary, run.round_dir(k))
        if on_round:
            on_round(k, summary, run)

    run = train(params, on_round=after_round, stages=stages)
    rows = collect_rows(run)
    train_rows, eval_rows = dvc_curves(rows, base_summary(run))
    write_json(run.folder / "curve.json", train_rows)
    write_json(run.folder / "eval_curve.json", eval_rows)
    metrics = final_metrics(run, rows)
    write_json(run.folder / "metrics.json", metrics)
    title = f"{params.train.env} / {params.train.method} / seed {params.seed}"
    plots = run_plots(rows, run.folder / "plots", title)
    if tracker:
        tracker.log_files(plots, "plots")
        tracker.log_files([run.folder / "metrics.json", run.folder / "curve.json", run.folder / "eval_curve.json"],
                          "summary")
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
        evaluated = Path(folder) / "eval_curve.json"
        rows = json.loads((evaluated if evaluated.exists() else Path(folder) / "curve.json").read_text())
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


MLFLOW_UI = "http://127.0.0.1:5000"
"""Where the README's ``mlflow ui`` command serves the store (links in the Prefect artifact)."""


def run_report_markdown(run_folder: Path) -> str:
    """A finished (or stopped) run as markdown: its final numbers, a round table and its MLflow run (the
    Prefect flow publishes it as the flow run's artifact)."""
    folder = Path(run_folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    rows = json.loads((folder / "curve.json").read_text())
    evaluated = {r["round"]: r for r in json.loads((folder / "eval_curve.json").read_text())}
    split = "test_seen"

    def pct(v):
        return "" if v is None else f"{v:.1%}"

    def final(key):
        return pct(metrics.get(f"{split}_{key}"))

    lines = [f"# {folder.name}", "",
             f"{metrics['env']} / {metrics['method']} / seed {metrics['seed']}: {metrics['rounds']} rounds; "
             f"{split} plain {final('plain')} (base {final('base_plain')}), with the bank {final('with_bank')}, "
             f"retention {final('retention')}.", "", f"Run folder: `{folder}`"]
    state = folder / "mlflow.json"
    if state.exists():
        ids = json.loads(state.read_text())
        if ids.get("experiment_id"):
            url = f"{MLFLOW_UI}/#/experiments/{ids['experiment_id']}/runs/{ids['run_id']}"
            lines.append(f"MLflow: [{folder.name}]({url}) (after `mlflow ui` as the README says)")
    lines += ["", f"| round | train plain | train with experience | {split} plain | {split} with bank | samples |",
              "| --- | --- | --- | --- | --- | --- |"]

    def evals(row):
        return f"{pct(row.get(f'eval_{split}_plain'))} | {pct(row.get(f'eval_{split}_with_bank'))}"

    lines.append(f"| base | | | {evals(evaluated.get(-1, {}))} | |")
    for r in rows:
        trained = f"{pct(r.get('train_success_plain'))} | {pct(r.get('train_success_conditioned'))}"
        lines.append(f"| {r['round']} | {trained} | {evals(evaluated.get(r['round'], {}))} | {r.get('samples')} |")
    return "\n".join(lines) + "\n"
