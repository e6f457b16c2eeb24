"""benchmarks/distill_ceiling.py: distillation alone, from a frozen copy of a finished run's final checkpoint."""

import torch
from benchmark_scripts import load

from edge.policy.model import load_policy, save_policy
from edge.train import train
from tests.test_paired_evaluation import control_params


def test_distillation_alone_closes_the_gap_on_the_states_it_trains_on_and_evaluates_paired_by_task(tmp_path):
    ceiling = load("distill_ceiling")
    params = control_params(tmp_path, "edge-oracle-bank", rounds=1)
    run = train(params)
    # An untrained policy is near uniform and hardly reads the advice: the student is another initialisation
    # made sharp (its output layer scaled up), a gap to close.
    other = load_policy(params.policy, seed=11, envs=["household"])
    with torch.no_grad():
        other.model.get_output_embeddings().weight.mul_(30.0)
    student = save_policy(other, tmp_path / "student")
    result = ceiling.probe(run.folder, seed=3, iterations=2, epochs=2, episodes=4, eval_every=1,
                           student_checkpoint=student)
    assert [r["iteration"] for r in result["rows"]] == [1, 2]
    for row in result["rows"]:
        assert row["states"] > 0 and row["optimizer_steps"] == 2 * 2  # epochs x grpo.minibatches
        assert row["kl_after"] < 0.9 * row["kl_before"]  # the steps pull the student towards the teacher
    assert set(result["evals"]) == {"0", "1", "2"}
    # Every evaluation is of the same tasks, so the differences pair task by task.
    assert set(result["final_tasks"]) == set(result["teacher_tasks"]) == set(result["start_tasks"])
    assert len(result["final_tasks"]) == 4

    by_seed = {3: result, 4: result}
    summary = ceiling.summary("o31", by_seed)
    assert summary["seeds"] == [3, 4]
    final, start = sum(result["final_tasks"].values()) / 4, sum(result["start_tasks"].values()) / 4
    assert abs(summary["final_minus_start"]["mean"] - (final - start)) < 1e-9
    table = ceiling.markdown("o31", by_seed, summary, "benchmarks/distill_ceiling.py --seed 3 --seed 4",
                             "distill_ceiling_o31")
    assert table.count("\n| 3 | ") == 1 and table.count("\n| 4 | ") == 1

    # Only the teacher's won episodes: fewer states, none of the student's own.
    won = ceiling.probe(run.folder, seed=3, iterations=1, epochs=1, episodes=4, eval_every=1,
                        student_checkpoint=student, states="won")
    assert won["states"] == "won" and won["rows"][0]["states"] < result["rows"][0]["states"]
