"""A finished run's final policy evaluated on a split it did not evaluate during training.

The sweep's runs evaluate test_seen only (``eval.splits``); issue 16 asks for the same table on
test_unseen. ``final_evaluation`` evaluates the run's last checkpoint exactly as its last round's
evaluation would have with that split: the run's own parameters (its bank section: retrieval, type
steps, per-step queries), the first ``episodes`` tasks of the split for the run's seed, the last
round's evaluation stream, and the bank as the run left it. So two runs with the same seed are paired
task by task, as the training-time evaluations are, and evaluating the run's own split reproduces its
last ``eval.json`` (the test checks this).

Results are kept in ``cache_dir`` (one file per run, split and episodes), keyed by what they depend
on: the run's parameters and its final checkpoint's manifest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from edge.config import run_params
from edge.files import read_json, write_json
from edge.runs import run_status


def evaluation_key(folder: Path, params: dict, split: str, episodes: int) -> str:
    """What a final evaluation depends on: the run's parameters (``params``, as its params.json records
    them), its final checkpoint, the split and size."""
    last = folder / f"round_{params['train']['rounds'] - 1:03d}" / "checkpoint" / "edge_manifest.json"
    what = {"params": params, "checkpoint": read_json(last), "split": split, "episodes": episodes}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def final_evaluation(folder: Path, split: str, episodes: int, cache_dir: Path | None = None) -> dict:
    """The final policy of the finished run in ``folder`` on the first ``episodes`` tasks of ``split``:
    ``{"plain": EvalResult dict, "with_bank": ..., "retention": ..., "retrieved_share": ...}`` (the last
    three for methods that use a bank or the oracle's advice), as ``evaluate_policy`` writes them."""
    from edge.policy.actor import Actor
    from edge.train import Run, evaluate_policy, stage_seed

    folder = Path(folder)
    status = run_status(folder)
    if status.rounds_done < status.rounds_planned:  # every round's stages sealed: the final policy is there
        raise ValueError(f"{folder}: the run is not finished ({status.state}); its final policy is not there yet")
    recorded = read_json(folder / "params.json")
    cache = None
    if cache_dir is not None:
        key = evaluation_key(folder, recorded, split, episodes)
        cache = Path(cache_dir) / f"{folder.name}-{split}-{episodes}-{key}.json"
        if cache.exists():
            return read_json(cache)
    recorded["eval"] = dict(recorded["eval"], splits=[split], episodes=episodes)
    params = run_params(recorded)
    run = Run(params, folder)  # read only: no lock, no stage is sealed, nothing in the folder is written
    last = params.train.rounds - 1
    if run.settings.stores_bank and run.bank().version() != run.bank_versions()[last]:
        raise RuntimeError(f"{folder / 'bank'}: the table is at version {run.bank().version()}, the run ended "
                           f"at {run.bank_versions()[last]}")
    policy, _ = run.policy_for(last + 1)
    result = evaluate_policy(run, Actor(policy), stage_seed(params.seed, last, "evaluate"))[split]
    if cache is not None:
        write_json(cache, result)
    return result
