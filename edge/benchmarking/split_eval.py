"""A finished run's final policy evaluated on a split it did not evaluate during training.

The sweep's runs evaluate test_seen only (``eval.splits``); issue 16 asks for the same table on
test_unseen. ``final_evaluation`` evaluates the run's last checkpoint exactly as its last round's
evaluation would have with that split: the run's own parameters (its bank section: retrieval, type
steps, per-step queries), the first ``episodes`` tasks of the split for the run's seed, the last
round's evaluation stream, and the bank as the run left it. So two runs with the same seed are paired
task by task, as the training-time evaluations are, and evaluating the run's own split reproduces its
last ``eval.json`` (the test checks this).

``after_round`` evaluates the policy after an earlier round the same way (that round's evaluation stream), for
the runs that keep no bank of their own (GRPO and the oracle control): how far a method led at some round
of runs that evaluated only at the end.

Results are kept in ``cache_dir`` (one file per run, split, episodes and round), keyed by what they depend
on: the run's parameters and the evaluated checkpoint's manifest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from edge.config import run_params
from edge.files import read_json, write_json
from edge.runs import run_status


def evaluation_key(folder: Path, params: dict, split: str, episodes: int, after_round: int | None = None) -> str:
    """What an evaluation depends on: the run's parameters (``params``, as its params.json records them), the
    checkpoint (the final one, or ``after_round``'s), the split and size."""
    k = params["train"]["rounds"] - 1 if after_round is None else after_round
    checkpoint = folder / f"round_{k:03d}" / "checkpoint" / "edge_manifest.json"
    what = {"params": params, "checkpoint": read_json(checkpoint), "split": split, "episodes": episodes}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def final_evaluation(folder: Path, split: str, episodes: int, cache_dir: Path | None = None,
                     after_round: int | None = None) -> dict:
    """The final policy of the finished run in ``folder`` (or its policy after round ``after_round``) on the
    first ``episodes`` tasks of ``split``: ``{"plain": EvalResult dict, "with_bank": ..., "retention": ...,
    "retrieved_share": ...}`` (the last three for methods that use a bank or the oracle's advice), as
    ``evaluate_policy`` writes them."""
    from edge.policy.actor import Actor
    from edge.train import Run, evaluate_policy, stage_seed

    folder = Path(folder)
    status = run_status(folder)
    if after_round is None and status.rounds_done < status.rounds_planned:
        raise ValueError(f"{folder}: the run is not finished ({status.state}); its final policy is not there yet")
    if after_round is not None and not 0 <= after_round < status.rounds_done:
        raise ValueError(f"{folder}: after_round {after_round} is not a round the run has done "
                         f"(rounds 0 to {status.rounds_done - 1})")
    recorded = read_json(folder / "params.json")
    cache = None
    if cache_dir is not None:
        key = evaluation_key(folder, recorded, split, episodes, after_round)
        which = "" if after_round is None else f"-after{after_round}"
        cache = Path(cache_dir) / f"{folder.name}-{split}-{episodes}{which}-{key}.json"
        if cache.exists():
            return read_json(cache)
    recorded["eval"] = dict(recorded["eval"], splits=[split], episodes=episodes)
    params = run_params(recorded)
    run = Run(params, folder)  # read only: no lock, no stage is sealed, nothing in the folder is written
    last = params.train.rounds - 1 if after_round is None else after_round
    if run.settings.stores_bank and after_round is not None:
        raise ValueError(f"{folder}: after_round needs the bank as round {after_round} left it; only runs that keep "
                         "no bank of their own (GRPO, the oracle control) are evaluated after an earlier round")
    if run.settings.stores_bank and run.bank().version() != run.bank_versions()[last]:
        raise RuntimeError(f"{folder / 'bank'}: the table is at version {run.bank().version()}, the run ended "
                           f"at {run.bank_versions()[last]}")
    policy, _ = run.policy_for(last + 1)
    result = evaluate_policy(run, Actor(policy), stage_seed(params.seed, last, "evaluate"))[split]
    if cache is not None:
        write_json(cache, result)
    return result
