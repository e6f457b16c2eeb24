"""Evidence that can separate methods: common random numbers, a fair update budget, the controls."""

import json

import pytest
import torch

from edge.algorithms.contribution import group_contributions
from edge.algorithms.distill import attach, distill_samples, make_distill_loss
from edge.algorithms.grpo import UpdateConfig, grpo_samples, minibatch_bounds, policy_update
from edge.bank.store import read_snapshot
from edge.config import PolicyConfig, parse_params
from edge.envs.household import generate_tasks
from edge.evaluate import evaluate
from edge.policy.actor import Actor
from edge.policy.model import load_policy
from edge.rollout import Experience, read_rollouts, rollout
from edge.train import Run, train

ADVICE = Experience("try : look for apple in fridge , countertop .", ["g000001"])


def tiny_actor(seed=0) -> Actor:
    return Actor(load_policy(PolicyConfig(), seed=seed, envs=["household"]))


def actions(trajectory) -> list[str]:
    return [s.decision.action for s in trajectory.steps]


def test_a_task_that_retrieves_nothing_replays_its_plain_episode_exactly():
    actor, tasks = tiny_actor(), generate_tasks("test_seen", 10, seed=0)
    plain = rollout(actor, tasks, 1, 123, max_steps=12)
    # Every second task is conditioned: its episode changes length, the others must not move at all.
    half = {t.task_id: ADVICE for t in tasks[::2]}
    mixed = rollout(actor, tasks, 1, 123, experiences=half, conditioned_per_group=1, max_steps=12)
    for a, b in zip(plain, mixed):
        assert a.task.task_id == b.task.task_id
        if b.conditioned:
            continue
        assert actions(a) == actions(b) and a.won == b.won
        assert [s.decision.logp[0] for s in a.steps] == pytest.approx([s.decision.logp[0] for s in b.steps], abs=1e-5)
    assert any(actions(a) != actions(b) for a, b in zip(plain, mixed) if b.conditioned)
    # Not trivially equal: another stage seed gives other episodes.
    other = rollout(actor, tasks, 1, 124, max_steps=12)
    assert any(actions(a) != actions(b) for a, b in zip(plain, other))


def test_two_evaluations_of_one_policy_agree_task_by_task_and_share_streams_across_batches():
    actor, tasks = tiny_actor(), generate_tasks("test_seen", 12, seed=1)
    first = evaluate(actor, tasks, seed=7)
    again = evaluate(actor, tasks, seed=7, chunk=5)  # other batches: the same episodes
    assert first.won_by_task == again.won_by_task and first.mean_steps == again.mean_steps
    assert len(first.won_by_task) == 12
    nothing = evaluate(actor, tasks, seed=7, experience_for=lambda task: None)
    assert nothing.to_dict() == first.to_dict()


def toy_groups(actor):
    """Three groups of four, members 0-1 conditioned, with rewards set by hand so that Delta > 0:
    group 0 [1, 1 | 1, 0], group 1 [1, 0.5 | 0.5, 0] (member 2 sits at the mean: zero advantage),
    group 2 all 0 (no PG signal, Delta 0)."""
    tasks = generate_tasks("train", 3, seed=2)
    trajectories = rollout(actor, tasks, 4, 5, experiences={t.task_id: ADVICE for t in tasks},
                           conditioned_per_group=2, max_steps=4)
    rewards = {0: [1, 1, 1, 0], 1: [1, 0.5, 0.5, 0], 2: [0, 0, 0, 0]}
    for t in trajectories:
        group = [task.task_id for task in tasks].index(t.group_id)
        t.reward = t.score = float(rewards[group][t.member])
        t.won = t.reward == 1
    return trajectories


def updated(samples, extra_loss, cfg):
    actor = tiny_actor()
    optimizer = torch.optim.AdamW(actor.policy.model.parameters(), lr=cfg.lr)
    metrics = policy_update(actor, optimizer, samples, cfg, torch.Generator().manual_seed(0), extra_loss)
    return metrics, [p.detach().clone() for p in actor.policy.model.parameters()]


def test_every_method_takes_the_same_optimizer_steps_and_distillation_rides_on_the_pg_samples():
    actor = tiny_actor()
    trajectories = toy_groups(actor)
    contributions = group_contributions(trajectories)
    assert [round(c.delta, 3) for c in contributions] == [0.5, 0.5, 0.0]
    cfg = UpdateConfig(lr=1e-2, epochs=2, minibatches=3, clip_low=0.2, clip_high=0.28, beta=0.0,
                       loss_agg="episode-mean", max_grad_norm=1.0)
    grpo, _ = grpo_samples(trajectories)
    distill = distill_samples(actor, trajectories, contributions, "exact")
    # The plain members of groups 0 and 1 are distilled; group 1's member 2 has no PG advantage.
    plain_steps = {(t.traj_id, i) for t in trajectories if t.group_id != trajectories[-1].group_id
                   and not t.conditioned for i in range(len(t.steps))}
    assert {d.key for d in distill} == plain_steps
    edge, only = attach(grpo_samples(trajectories)[0], distill)
    member_2 = {(t.traj_id, i) for t in trajectories if t.member == 2 and t.group_id == trajectories[4].group_id
                for i in range(len(t.steps))}
    assert only == len(member_2) > 0 and len(edge) == len(grpo) + only
    assert sum("teacher" in s.extras for s in edge) == len(distill)

    grpo_metrics, grpo_params = updated(grpo_samples(trajectories)[0], None, cfg)
    edge_metrics, edge_params = updated(edge, make_distill_loss(1.0, "exact"), cfg)
    assert grpo_metrics["optimizer_steps"] == edge_metrics["optimizer_steps"] == 2 * 3
    assert edge_metrics["distill_weight"] > 0 and edge_metrics["distill_kl"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(grpo_params, edge_params))
    # With lambda_d = 0 EDGE's update is GRPO's exactly, up to the distillation-only samples, which
    # then carry nothing but still count in the normaliser: remove them and the parameters match.
    shared = [s for s in attach(grpo_samples(trajectories)[0], distill)[0] if s.pg]
    _, zero_params = updated(shared, make_distill_loss(0.0, "exact"), cfg)
    assert all(torch.equal(a, b) for a, b in zip(grpo_params, zero_params))


def test_minibatch_bounds_are_a_fixed_number_of_near_equal_slices():
    assert minibatch_bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert minibatch_bounds(2, 4) == [(0, 1), (1, 2)]  # fewer samples than minibatches
    assert minibatch_bounds(0, 4) == []


def control_params(tmp_path, method, env="household", rounds=2):
    return parse_params({
        "seed": 3, "data": {"train_tasks": 3},
        "rollout": {"tasks_per_round": 3, "group_size": 4, "max_steps": 8},
        "grpo": {"epochs": 1, "minibatches": 2}, "eval": {"episodes": 4, "intermediate_episodes": 2},
        "bank": {"embedder": "hash", "similarity_threshold": 0.05},
        "train": {"method": method, "env": env, "rounds": rounds, "base_checkpoint": None,
                  "runs_dir": str(tmp_path / "runs")},
    })


def test_oracle_control_conditions_every_group_on_true_advice_and_keeps_no_bank(tmp_path):
    from edge.guidance import experience_block, true_advice

    run = train(control_params(tmp_path, "edge-oracle-bank"))
    assert not (run.folder / "bank").exists()
    for k in range(2):
        assert not (run.round_dir(k) / "bank_changes.json").exists()
        scores = json.loads((run.round_dir(k) / "scores.json").read_text())
        assert scores["summary"]["retrieval_hit_rate"] == 1.0
        for t in read_rollouts(run.round_dir(k) / "rollouts.parquet"):
            assert t.conditioned == (t.member < 2)
            if t.conditioned:
                assert t.experience.text == experience_block(true_advice(t.task)) and t.experience.entry_ids == [
                    "oracle"]
        metrics = json.loads((run.round_dir(k) / "train_metrics.json").read_text())
        assert metrics["optimizer_steps"] == 2 or metrics["samples"] == 0
        # The options that add terms or steps (distill.anchor, distill.extra_epochs) are off by default.
        assert not {"anchor_kl", "distill_extra_steps", "distill_extra_kl"} & set(metrics)
    ev = json.loads((run.round_dir(1) / "eval.json").read_text())["test_seen"]
    assert ev["retrieved_share"] == 1.0 and {"plain", "with_bank", "retention"} <= set(ev)
    # The point in between is the first 2 of the final point's 4 tasks (a paired prefix).
    between = json.loads((run.round_dir(0) / "eval.json").read_text())["test_seen"]
    assert between["plain"]["episodes"] == 2 and ev["plain"]["episodes"] == 4
    assert list(between["plain"]["won_by_task"]) == list(ev["plain"]["won_by_task"])[:2]


def test_oracle_control_refuses_an_environment_without_an_oracle_before_making_a_folder(tmp_path):
    params = control_params(tmp_path, "edge-oracle-bank", env="alfworld")
    with pytest.raises(ValueError, match="no oracle advice.*edge-oracle-bank"):
        Run.open(params)
    assert not (tmp_path / "runs").exists()


def test_misleading_oracle_shows_its_false_advice_in_training_and_in_the_with_advice_evaluation(tmp_path):
    from edge.guidance import experience_block, misleading_advice, true_advice

    params = control_params(tmp_path, "edge-oracle-bank", rounds=1)
    params.bank.oracle_advice = "misleading"
    run = train(params)
    conditioned = [t for t in read_rollouts(run.round_dir(0) / "rollouts.parquet") if t.conditioned]
    assert conditioned and all(t.experience.text == experience_block(misleading_advice(t.task))
                               != experience_block(true_advice(t.task)) for t in conditioned)
    task = run.eval_tasks("test_seen")[0]
    assert run.experience_for(task).text == experience_block(misleading_advice(task))
    assert json.loads((run.round_dir(0) / "eval.json").read_text())["test_seen"]["retrieved_share"] == 1.0


def test_misleading_oracle_refuses_an_environment_without_misleading_advice_before_making_a_folder(tmp_path):
    params = control_params(tmp_path, "edge-oracle-bank", env="shop")
    Run.check(params)  # the shop has the true advice
    params.bank.oracle_advice = "misleading"
    with pytest.raises(ValueError, match="'shop' has no misleading oracle advice.*bank.oracle_advice"):
        Run.open(params)
    assert not (tmp_path / "runs").exists()


def test_random_control_draws_active_entries_of_the_co_evolving_bank(tmp_path):
    run = train(control_params(tmp_path, "edge-random-bank", rounds=3))
    drawn = 0
    for k in (1, 2):
        active = {e.id: e for e in read_snapshot(run.round_dir(k - 1) / "bank.parquet") if e.status == "active"}
        for t in read_rollouts(run.round_dir(k) / "rollouts.parquet"):
            if t.conditioned:
                drawn += 1
                assert set(t.experience.entry_ids) <= set(active)
                assert t.experience.text == " ".join(active[i].text for i in t.experience.entry_ids)
    assert drawn > 0
    # The draw is a stream of (stage seed, task): the same for the same task and stream.
    task = run.eval_tasks("test_seen")[0]
    assert run.experience_for(task, 11) == run.experience_for(task, 11)


def test_compare_reports_each_method_minus_grpo_paired_task_by_task(tmp_path):
    from edge.pipeline import compare_runs, run_pipeline

    folders = [run_pipeline(control_params(tmp_path, method, rounds=1), track=False)["run_folder"]
               for method in ("grpo", "edge-oracle-bank")]
    summary = compare_runs(folders, tmp_path / "compare")
    paired = summary["minus_grpo_plain_paired"]["edge-oracle-bank"]
    assert paired["n"] == 4 and paired["low"] <= paired["mean"] <= paired["high"]
    assert paired["mean"] == pytest.approx(summary["minus_grpo_plain"]["edge-oracle-bank"])


def test_an_evaluation_says_how_its_lost_episodes_failed_per_task_type():
    from collections import Counter

    from edge.envs.household.knowledge import failure_pattern
    from edge.evaluate import summarise

    actor, tasks = tiny_actor(), generate_tasks("test_seen", 18, seed=2)
    trajectories = rollout(actor, tasks, 1, 11, max_steps=15)
    result = summarise(trajectories)
    lost = [t for t in trajectories if not t.won]
    assert lost, "the untrained policy should lose some of 18 short episodes"
    expected: dict[str, Counter] = {}
    for t in lost:
        expected.setdefault(t.task.task_type, Counter())[failure_pattern(t)] += 1
    assert result.failures_by_type == {k: dict(v) for k, v in expected.items()}
    for task_type, failures in result.failures_by_type.items():  # every lost episode counted once
        won = round(result.success_by_type[task_type] * result.episodes_by_type[task_type])
        assert sum(failures.values()) == result.episodes_by_type[task_type] - won
    assert "failures_by_type" in result.to_dict()
