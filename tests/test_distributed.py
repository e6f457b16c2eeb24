"""The policy update on two processes (``accelerate launch``, gloo on the CPU) equals the one-process
update within float rounding: same weights, same optimizer step count, same losses."""

import json
import shutil

import pytest
from safetensors.torch import load_file
from test_train import tiny_params

from edge.policy.model import load_policy
from edge.rollout import read_rollouts, write_rollouts
from edge.train import Run, score_stage, train, update_stage


def unseal(round_dir, *stages: str) -> None:
    """Make ``stages`` run again, under parameters that differ only in ``grpo.update_processes``."""
    manifest = json.loads((round_dir / "manifest.json").read_text())
    manifest["params_sha256"] = None
    for stage in stages:
        manifest["stages"].pop(stage, None)
    (round_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("distill", [{}, {"extra_epochs": 1, "anchor": 1.0}], ids=["default", "extra-anchored"])
def test_two_process_update_matches_one_process(tmp_path, distill):
    params = tiny_params(tmp_path, rounds=1, method="edge-oracle-bank")
    params.rollout.tasks_per_round, params.rollout.group_size = 3, 4
    params.grpo.minibatches = 3
    for name, value in distill.items():  # the extra steps of distillation alone take the sharded path too
        setattr(params.distill, name, value)
    run = train(params)
    round_dir = run.round_dir(0)
    # A fresh tiny model rarely succeeds; give the groups rewards that differ so every state carries a
    # PG gradient (and the oracle's groups a positive gap, so distillation rides along).
    trajectories = read_rollouts(round_dir / "rollouts.parquet")
    for i, t in enumerate(trajectories):
        t.reward = float(t.conditioned or i % 3 == 0)
    write_rollouts(trajectories, round_dir / "rollouts.parquet")
    run.seal(0, "collect", ["collect.json", "rollouts.parquet"])  # these are the round's rollouts now
    unseal(round_dir)
    start = {n: p.detach().clone() for n, p in load_policy(params.policy, seed=params.seed,
                                                           envs=["household"]).model.state_dict().items()}

    results = {}
    for processes in (1, 2):
        shutil.rmtree(round_dir / "checkpoint", ignore_errors=True)
        (round_dir / "train_metrics.json").unlink(missing_ok=True)
        unseal(round_dir, "score", "distill")  # credit from the new rewards, then the update again
        p = params.model_copy(deep=True)
        p.grpo.update_processes = processes
        # The workers read the run's parameters from its folder, as they do in a run started with them.
        (run.folder / "params.json").write_text(json.dumps(p.model_dump(mode="json")))
        fresh = Run(p, run.folder)
        score_stage(fresh, 0)
        update_stage(fresh, 0)
        metrics = json.loads((round_dir / "train_metrics.json").read_text())
        weights = load_file(round_dir / "checkpoint" / "model.safetensors")
        results[processes] = metrics, weights
    (one, w1), (two, w2) = results[1], results[2]
    assert two["update_processes"] == 2 and one["update_processes"] == 1
    assert one["optimizer_steps"] == two["optimizer_steps"] == 3
    assert one["samples"] == two["samples"] > 0 and one["distill_samples"] > 0
    keys = ["pg_loss", "distill_loss", "grad_norm", "clip_frac"]
    if distill:
        assert one["distill_extra_steps"] == two["distill_extra_steps"] == 3
        keys += ["anchor_kl", "distill_extra_kl", "distill_extra_anchor_kl"]
    for key in keys:
        assert abs(one[key] - two[key]) < 1e-5 * max(1.0, abs(one[key])), key
    assert w1.keys() == w2.keys()
    # Adam divides by the root of the squared gradients, so on weights whose gradient is almost zero the
    # last bits of a sum done in another order move a step by a visible fraction: 1e-4 is a tenth of one
    # step at lr 1e-3 (measured here: 3e-5).
    assert max(float((w1[n] - w2[n]).abs().max()) for n in w1) < 1e-4
    # ... and the update did move the weights, by much more than the two differ.
    assert max(float((w1[n] - start[n]).abs().max()) for n in w1 if n in start) > 1e-3
