"""GRPO arithmetic on hand-made numbers, and one real update of the tiny model."""

import math

import torch

from edge.algorithms.grpo import (
    Sample,
    UpdateConfig,
    fill_reference_logprobs,
    group_advantages,
    grpo_samples,
    k3_kl,
    plain_baseline_advantages,
    policy_update,
    ppo_clip_loss,
    sample_logprobs,
    unit_weights,
)
from edge.config import PolicyConfig
from edge.envs.household import generate_tasks
from edge.policy.actor import Actor
from edge.policy.model import load_policy
from edge.rollout import read_rollouts, rollout, write_rollouts


def test_group_advantages_by_hand():
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), eps=0.0)
    assert torch.allclose(adv, torch.tensor([1.0, -1.0, -1.0, 1.0]))
    assert torch.allclose(group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), std_normalize=False),
                          torch.tensor([0.75, -0.25, -0.25, -0.25]))
    assert torch.equal(group_advantages(torch.tensor([1.0, 1.0, 1.0])), torch.zeros(3))
    assert torch.equal(group_advantages(torch.tensor([0.0, 0.0])), torch.zeros(2))


def test_ppo_clip_by_hand():
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1, 0.5]))
    old = torch.zeros(4)
    adv = torch.tensor([1.0, -1.0, 1.0, 1.0])
    loss, clipped = ppo_clip_loss(logp, old, adv, clip_low=0.2, clip_high=0.28)
    # ratio 1.5, A=+1: clipped at 1.28; ratio 0.5, A=-1: min(-0.5, -0.8) = -0.8; ratio 1.1: inside;
    # ratio 0.5, A=+1: min(0.5, 0.8) = 0.5 (pessimistic, not clipped).
    assert torch.allclose(loss, torch.tensor([-1.28, 0.8, -1.1, -0.5]))
    assert clipped.tolist() == [True, True, False, False]


def test_k3_by_hand_and_zero_at_equality():
    p, q = torch.log(torch.tensor([0.5])), torch.log(torch.tensor([0.25]))
    assert math.isclose(float(k3_kl(p, q)), 0.5 - math.log(0.5) - 1, rel_tol=1e-6)
    x = torch.randn(10)
    assert torch.equal(k3_kl(x, x), torch.zeros(10))
    assert (k3_kl(torch.randn(100), torch.randn(100)) >= 0).all()


def test_loss_aggregation_weights():
    assert unit_weights(4, 10, "token-mean") == 1.0
    assert unit_weights(4, 10, "step-mean") == 0.25
    assert unit_weights(1, 10, "episode-mean") == 0.1  # ten steps of one episode weigh one episode


def small_rollout(actor, n_tasks=2, group=4, seed=0):
    tasks = generate_tasks("train", n_tasks, seed=seed)
    return rollout(actor, tasks, group, seed, max_steps=6)


def test_rollout_groups_record_steps_and_round_trip_through_parquet(tmp_path):
    actor = Actor(load_policy(PolicyConfig(), seed=0, envs=["household"]))
    trajs = small_rollout(actor)
    assert len(trajs) == 8 and {t.group_id for t in trajs} == {t.task.task_id for t in trajs}
    assert all(len(t.steps) == 6 for t in trajs)  # an untrained model does not win in 6 steps
    path = write_rollouts(trajs, tmp_path / "rollouts.parquet")
    back = read_rollouts(path)
    assert [t.traj_id for t in back] == [t.traj_id for t in trajs]
    assert back[3].steps[2].decision.candidate_ids == trajs[3].steps[2].decision.candidate_ids
    assert back[3].state_at(2).history == trajs[3].state_at(2).history
    assert abs(back[0].steps[0].decision.logp[0] - trajs[0].steps[0].decision.logp[0]) < 1e-6


def test_one_update_changes_parameters_and_kl_starts_at_zero():
    torch.manual_seed(0)
    actor = Actor(load_policy(PolicyConfig(), seed=0, envs=["household"]))
    trajs = small_rollout(actor)
    for i, t in enumerate(trajs):  # hand-made outcomes so that every group carries signal
        t.reward = float(i % 2)
    samples, stats = grpo_samples(trajs)
    assert stats["informative_group_share"] == 1.0 and len(samples) == 8 * 6
    fill_reference_logprobs(actor, samples)
    with torch.no_grad():
        now = sample_logprobs(actor, samples)
    assert all(torch.equal(k3_kl(lp, torch.tensor(s.ref_logp)), torch.zeros_like(lp)) for lp, s in zip(now, samples))
    before = [p.detach().clone() for p in actor.policy.model.parameters()]
    optimizer = torch.optim.AdamW(actor.policy.model.parameters(), lr=1e-3)
    cfg = UpdateConfig(lr=1e-3, epochs=1, minibatches=1, clip_low=0.2, clip_high=0.28, beta=0.1,
                       loss_agg="episode-mean", max_grad_norm=1.0)
    metrics = policy_update(actor, optimizer, samples, cfg, torch.Generator().manual_seed(0))
    after = list(actor.policy.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after))
    assert metrics["grad_norm"] > 0 and abs(metrics["kl"]) < 1e-9  # one minibatch: measured before the step
    # Winners' actions became more likely, losers' less.
    with torch.no_grad():
        new = sample_logprobs(actor, samples)
    gain = [float(n - torch.tensor(s.old_logp)) * s.advantage for n, s in zip(new, samples)]
    assert sum(gain) > 0


def test_equal_rewards_give_no_samples():
    s = Sample([1], [[2]], 0, None, [0.0], 0.0, 1)
    assert s.n_units == 1
    actor = Actor(load_policy(PolicyConfig(), seed=0, envs=["household"]))
    trajs = small_rollout(actor, n_tasks=1, group=3)
    samples, stats = grpo_samples(trajs)
    assert samples == [] and stats["informative_group_share"] == 0.0


def test_plain_baseline_measures_every_member_against_the_plain_members_mean():
    # Plain members 0, 0, 0, 1 (mean 0.25); conditioned 1, 1, 0, 1. The group's std scales both.
    rewards = torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    conditioned = [False] * 4 + [True] * 4
    adv = plain_baseline_advantages(rewards, conditioned)
    std = rewards.std(unbiased=False)
    assert torch.allclose(adv, (rewards - 0.25) / (std + 1e-6))
    # An all-failed plain half carries nothing, as GRPO's all-failed group; the advised wins stay credited.
    rewards = torch.tensor([0.0] * 4 + [1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    adv = plain_baseline_advantages(rewards, conditioned)
    assert adv[:4].abs().max() == 0 and adv[6] > 0 and adv[5] == 0
    assert (group_advantages(rewards)[:4] < 0).all()
    # A group that is not split keeps GRPO's advantages.
    plain_only = plain_baseline_advantages(rewards, [False] * 8)
    assert torch.equal(plain_only, group_advantages(rewards))


def test_grpo_samples_read_the_conditioned_flag_under_the_plain_baseline():
    actor = Actor(load_policy(PolicyConfig(), seed=0, envs=["household"]))
    trajs = small_rollout(actor, n_tasks=2, group=4)
    # Group 1 split: plain members 0 and 1 lost, conditioned 2 won and 3 lost. Group 2 not split: 1 of 4 won.
    for i, t in enumerate(trajs):
        t.conditioned = i < 4 and i >= 2
        t.reward = float(i in (2, 5))
    group, _ = grpo_samples(trajs)
    plain, _ = grpo_samples(trajs, baseline="plain")
    members = lambda samples: {s.key[0] for s in samples}  # noqa: E731
    ids = [t.traj_id for t in trajs]
    # The whole group's mean pushes the losing plain members down; the plain members' mean (0) leaves them out,
    # and the conditioned loser too.
    assert {ids[0], ids[1], ids[3]} <= members(group)
    assert not {ids[0], ids[1], ids[3]} & members(plain) and ids[2] in members(plain)
    # The group that is not split has GRPO's advantages under either baseline.
    unsplit = lambda samples: [(s.key, s.advantage) for s in samples if s.key[0] in ids[4:]]  # noqa: E731
    assert unsplit(group) == unsplit(plain) and unsplit(group)
