"""benchmarks/distill_generalisation.py: fits to the advised teacher on nested sets of tasks, the KL measured on
held-out tasks' states."""

import pytest
import torch
from benchmark_scripts import load

from edge.config import with_overrides
from edge.policy.model import load_policy, save_policy
from tests.test_paired_evaluation import control_params


def test_nested_fits_take_the_same_steps_and_are_measured_on_the_same_held_out_states(tmp_path):
    probe = load("distill_generalisation")
    params = with_overrides(control_params(tmp_path, "edge-oracle-bank"), ["data.train_tasks=8"])
    teacher = save_policy(load_policy(params.policy, seed=5, envs=["household"]), tmp_path / "teacher")
    # An untrained policy is near uniform: the student is another initialisation made sharp, a gap to close.
    other = load_policy(params.policy, seed=11, envs=["household"])
    with torch.no_grad():
        other.model.get_output_embeddings().weight.mul_(30.0)
    student = save_policy(other, tmp_path / "student")
    result = probe.probe(params, teacher, "tiny", seed=3, sizes=[2, 5], heldout=3, members=1, epochs=2, episodes=4,
                         student_checkpoint=student)
    small, large = result["fits"]
    assert (small["tasks"], large["tasks"]) == (2, 5)
    assert 0 < small["states"] < large["states"]  # the first two tasks' states are among the first five's
    for fit in result["fits"]:
        assert fit["optimizer_steps"] == 2 * 2  # epochs x grpo.minibatches, whatever the number of states
        assert fit["train_kl_after"] < 0.9 * fit["train_kl_before"]
        # The fit moves the student on the held-out states too (measured against the same start).
        assert fit["heldout_kl_after"] != pytest.approx(result["heldout_kl_before"])
        assert set(fit["plain_tasks"]) == set(result["teacher_tasks"]) == set(result["start_tasks"])
    assert result["heldout_states"] > 0

    by_seed = {3: result, 4: result}
    summary = probe.summary(by_seed)
    assert list(summary) == ["2", "5"]
    start = sum(result["start_tasks"].values()) / 4
    assert summary["5"]["minus_start"]["mean"] == pytest.approx(large["plain_success"] - start)
    table = probe.markdown("tiny", by_seed, summary, "benchmarks/distill_generalisation.py --seed 3 --seed 4",
                           "distill_generalisation_tiny")
    assert table.count("\n| 3 | ") == 2 and table.count("\n| 5 | ") == 1


def test_the_held_out_and_training_tasks_do_not_depend_on_the_sizes_fitted():
    probe = load("distill_generalisation")
    pool = [f"task-{i}" for i in range(40)]
    held, train = probe.split_pool(pool, seed=2, heldout=6)
    assert len(held) == 6 and sorted(held + train) == sorted(pool)
    assert probe.split_pool(pool, seed=2, heldout=6) == (held, train)  # one shuffle a seed
    assert probe.split_pool(pool, seed=3, heldout=6)[0] != held


def test_more_tasks_than_the_pool_holds_is_refused(tmp_path):
    probe = load("distill_generalisation")
    params = control_params(tmp_path, "edge-oracle-bank")  # three training tasks
    teacher = save_policy(load_policy(params.policy, seed=5, envs=["household"]), tmp_path / "teacher")
    with pytest.raises(ValueError, match="exceed the 3 training tasks"):
        probe.probe(params, teacher, "tiny", seed=3, sizes=[2], heldout=2, members=1, epochs=1, episodes=2)
