"""The cost of the experience bank in a round: time in retrieval, credit, synthesis, pruning and the
distillation teacher, the extra prompt tokens of the experience block, the bank's size on disk."""

from __future__ import annotations

import json
from pathlib import Path


def bank_cost(round_record: dict) -> dict:
    """What the bank cost in one round, from the files the stages wrote and the probes' timers."""
    import pyarrow.parquet as pq

    folder = Path(round_record["folder"])
    collect = json.loads((folder / "collect.json").read_text())
    metrics = json.loads((folder / "train_metrics.json").read_text())
    changes_file = folder / "bank_changes.json"
    changes = json.loads(changes_file.read_text()) if changes_file.exists() else None
    steps = pq.read_table(folder / "rollouts.parquet", columns=["prompt_ids", "conditioned"]).to_pylist()
    prompt_tokens = sum(len(s["prompt_ids"]) for s in steps)
    conditioned_steps = sum(s["conditioned"] for s in steps)
    total = round_record["total_seconds"]
    seconds = {
        "retrieval": collect["retrieval_seconds"],
        "credit": changes["seconds"]["credit"] if changes else 0.0,
        "synthesis": changes["seconds"]["synthesis"] if changes else 0.0,
        "prune": changes["seconds"]["prune"] if changes else 0.0,
        "update_bank_stage": round_record["stages"]["update_bank"],
        "distill_teacher": round_record["update"]["teacher_seconds"],
    }
    return {
        "round": round_record["round"],
        "round_seconds": total,
        "seconds": seconds,
        "share_of_round": {k: v / total for k, v in seconds.items()},
        "bank_seconds": seconds["retrieval"] + seconds["update_bank_stage"] + seconds["distill_teacher"],
        "experience_tokens": metrics["experience_tokens"],
        "prompt_tokens": prompt_tokens,
        "experience_token_share": metrics["experience_tokens"] / prompt_tokens if prompt_tokens else 0.0,
        "conditioned_steps": conditioned_steps,
        "steps": len(steps),
        "experience_tokens_per_conditioned_step": (metrics["experience_tokens"] / conditioned_steps
                                                   if conditioned_steps else 0.0),
        "bank_active_entries": changes["size_active"] if changes else 0,
        "bank_total_entries": changes["size_total"] if changes else 0,
        "bank_folder_bytes": round_record["bank_folder_bytes"],
        "snapshot_bytes": changes["snapshot_bytes"] if changes else 0,
    }


def bank_cost_of_run(run_folder: Path) -> list[dict]:
    """The cost of the bank in every round of a finished training run, from the files its stages wrote
    (``collect.json``, ``bank_changes.json``, ``train_metrics.json``, ``eval.json``, the rollouts).

    The round's total is the sum of the recorded stage times (collect, update-bank, update, evaluate;
    the score stage records none and takes well under a second)."""
    import pyarrow.parquet as pq

    rows = []
    for folder in sorted(Path(run_folder).glob("round_*")):
        files = {name: folder / f"{name}.json" for name in ("collect", "bank_changes", "train_metrics", "eval")}
        if not (files["train_metrics"].exists() and files["collect"].exists()):
            continue
        collect = json.loads(files["collect"].read_text())
        metrics = json.loads(files["train_metrics"].read_text())
        changes = json.loads(files["bank_changes"].read_text()) if files["bank_changes"].exists() else None
        evaluation = json.loads(files["eval"].read_text()) if files["eval"].exists() else {}
        bank_seconds = changes["seconds"] if changes else {"credit": 0.0, "synthesis": 0.0, "prune": 0.0, "total": 0.0}
        total = (collect["collect_seconds"] + bank_seconds["total"] + metrics["update_seconds"]
                 + evaluation.get("eval_seconds", 0.0))
        steps = pq.read_table(folder / "rollouts.parquet", columns=["prompt_ids", "conditioned"]).to_pylist()
        prompt_tokens = sum(len(s["prompt_ids"]) for s in steps)
        rows.append({
            "round": metrics["round"], "round_seconds": total, "retrieval_seconds": collect["retrieval_seconds"],
            "credit_seconds": bank_seconds["credit"], "synthesis_seconds": bank_seconds["synthesis"],
            "prune_seconds": bank_seconds["prune"], "update_bank_seconds": bank_seconds["total"],
            "bank_share": (collect["retrieval_seconds"] + bank_seconds["total"]) / total if total else 0.0,
            "experience_tokens": metrics["experience_tokens"], "prompt_tokens": prompt_tokens,
            "conditioned_steps": sum(s["conditioned"] for s in steps), "distill_samples": metrics["distill_samples"],
            "bank_active_entries": changes["size_active"] if changes else 0,
            "snapshot_bytes": changes["snapshot_bytes"] if changes else 0,
        })
    return rows
