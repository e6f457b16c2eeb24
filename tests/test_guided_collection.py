"""``bank.condition_when: plain_failed``: the plain members play first and the block is shown only in the
groups where every one of them failed; the others stay GRPO's group."""

import json

import pytest
import torch
from builtin_pins import ScriptedActor

from edge.algorithms.contribution import group_contributions
from edge.config import ConfigError, parse_params
from edge.envs.registry import generate_tasks, make_agent, make_env
from edge.guidance import experience_block, true_advice
from edge.policy.actor import Decision
from edge.rollout import Experience, read_rollouts, rollout, rollout_guided_where_plain_failed
from edge.train import train

GROUP, CONDITIONED = 4, 2


class ExpertWhereSolvable(ScriptedActor):
    """Plays the scripted expert in the plain episodes of the tasks in ``solvable`` (so their plain members
    win) and ScriptedActor's draws everywhere else (so the others' plain members lose). One expert per
    episode, known by the episode's generator, which the rollout keeps for the whole episode (held here too, so
    that no later episode's generator can take its id)."""

    def __init__(self, solvable):
        self.solvable = {t.instruction: t for t in solvable}
        self.experts = {}

    def act(self, states, generators, greedy=False):
        decisions = []
        for state, gen in zip(states, generators):
            task = self.solvable.get(state.instruction)
            if task is None or state.experience is not None:
                decisions += super().act([state], [gen])
                continue
            if id(gen) not in self.experts:
                expert = make_agent("household", "expert", 0)
                expert.reset(task, make_env("household").reset(task))
                self.experts[id(gen)] = (expert, gen)
            action = self.experts[id(gen)][0].act(state.observation, state.admissible)
            decisions.append(Decision(action, [], None, state.admissible.index(action), None, [0.0]))
        return decisions


def household_tasks(n):
    tasks, seen = [], set()
    for task in generate_tasks("household", "train", 3 * n, 0):  # the actor tells tasks apart by instruction
        if task.instruction not in seen:
            seen.add(task.instruction)
            tasks.append(task)
    return tasks[:n]


def test_the_block_goes_only_to_groups_whose_plain_members_all_failed_on_the_streams_of_a_whole_rollout():
    tasks = household_tasks(8)
    solvable = tasks[::2]
    advice = {t.task_id: Experience(experience_block(true_advice(t)), ["oracle"]) for t in tasks}
    guided = rollout_guided_where_plain_failed(ExpertWhereSolvable(solvable), tasks, GROUP, 11, experiences=advice,
                                               conditioned_per_group=CONDITIONED, max_steps=12)
    assert [(t.group_id, t.member) for t in guided] == [(t.task_id, m) for t in tasks for m in range(GROUP)]
    for task in tasks:
        group = [t for t in guided if t.group_id == task.task_id]
        plain_half = [t for t in group if t.member >= CONDITIONED]
        assert not any(t.conditioned for t in plain_half)
        if task in solvable:
            assert all(t.won for t in plain_half)
            assert not any(t.conditioned for t in group)  # GRPO's group
        else:
            assert not any(t.won for t in plain_half)
            assert [t.conditioned for t in group] == [True] * CONDITIONED + [False] * (GROUP - CONDITIONED)
            assert all(s.experience == advice[task.task_id].text for t in group[:CONDITIONED] for s in t.steps)
    # Each episode replays the stream it has when the same groups are played whole in one rollout.
    failed = {t.task_id: advice[t.task_id] for t in tasks if t not in solvable}
    whole = rollout(ExpertWhereSolvable(solvable), tasks, GROUP, 11, experiences=failed,
                    conditioned_per_group=CONDITIONED, max_steps=12)
    assert [[s.decision.action for s in t.steps] for t in guided] == [[s.decision.action for s in t.steps]
                                                                       for t in whole]
    assert [t.conditioned for t in guided] == [t.conditioned for t in whole]


def test_a_group_needs_plain_members_to_play_first_and_members_to_condition():
    tasks = household_tasks(1)
    advice = {tasks[0].task_id: Experience("try : look .", ["oracle"])}
    for conditioned in (0, GROUP):
        with pytest.raises(ValueError, match="0 < conditioned members < group size"):
            rollout_guided_where_plain_failed(ScriptedActor(), tasks, GROUP, 0, experiences=advice,
                                              conditioned_per_group=conditioned)
    for rho in (0.0, 1.0, 0.95):  # 0.95 of 8 rounds to 8: no plain member would play first
        with pytest.raises(ConfigError, match=r"round\(bank.rho x rollout.group_size\)"):
            parse_params({"bank": {"condition_when": "plain_failed", "rho": rho}, "rollout": {"group_size": 8}})
    assert parse_params({"bank": {"condition_when": "plain_failed", "rho": 0.25}}).bank.rho == 0.25


def test_a_run_conditions_where_its_plain_members_failed_and_scores_only_those_groups(tmp_path):
    params = parse_params({
        "seed": 2, "data": {"train_tasks": 4},
        "rollout": {"tasks_per_round": 4, "group_size": GROUP, "max_steps": 6},
        "grpo": {"epochs": 1, "minibatches": 2}, "eval": {"episodes": 4},
        "bank": {"embedder": "hash", "condition_when": "plain_failed"},
        "train": {"method": "edge-oracle-bank", "rounds": 1, "base_checkpoint": None,
                  "runs_dir": str(tmp_path / "runs")}})
    run = train(params)
    trajectories = read_rollouts(run.round_dir(0) / "rollouts.parquet", GROUP)
    groups = {}
    for t in trajectories:
        groups.setdefault(t.group_id, []).append(t)
    scored = json.loads((run.round_dir(0) / "scores.json").read_text())["groups"]
    split = {g for g, members in groups.items() if any(t.conditioned for t in members)}
    assert split == {s["group_id"] for s in scored}
    for gid, members in groups.items():
        plain_half_won = any(t.won for t in members if t.member >= CONDITIONED)
        assert (gid in split) == (not plain_half_won)
    assert all(s["success_plain"] == 0 and s["delta"] >= 0 for s in scored)


class ExpertByCoin(ScriptedActor):
    """In a plain episode, the scripted expert or ScriptedActor's draws, by a coin the episode's own stream
    tosses at its first decision, so that members of one group differ and a group's rollout played in two
    parts tosses the same coins as played whole. Episodes shown a block take the draws."""

    def __init__(self):
        self.experts = {}

    def act(self, states, generators, greedy=False):
        decisions = []
        for state, gen in zip(states, generators):
            if state.experience is None and id(gen) not in self.experts:
                expert = None
                if float(torch.rand(1, generator=gen)) < 0.5:
                    task = next(t for t in TASKS if t.instruction == state.instruction)
                    expert = make_agent("household", "expert", 0)
                    expert.reset(task, make_env("household").reset(task))
                self.experts[id(gen)] = (expert, gen)  # the generator held: no later episode takes its id
            expert = self.experts.get(id(gen), (None,))[0] if state.experience is None else None
            if expert is None:
                decisions += super().act([state], [gen])
                continue
            action = expert.act(state.observation, state.admissible)
            decisions.append(Decision(action, [], None, state.admissible.index(action), None, [0.0]))
        return decisions


TASKS = household_tasks(24)


def test_half_of_the_plain_members_decide_and_delta_is_measured_against_the_other_half():
    group, conditioned, deciders = 6, 2, 2
    advice = {t.task_id: Experience(experience_block(true_advice(t)), ["oracle"]) for t in TASKS}
    played = rollout_guided_where_plain_failed(ExpertByCoin(), TASKS, group, 7, experiences=advice,
                                               conditioned_per_group=conditioned, deciders=deciders, max_steps=30)
    groups = {}
    for t in played:
        groups.setdefault(t.group_id, []).append(t)
    split = {gid for gid, members in groups.items() if any(t.conditioned for t in members)}
    for gid, members in groups.items():
        decided = [t for t in members if conditioned <= t.member < conditioned + deciders]
        assert (gid in split) == (not any(t.won for t in decided))
    measured_won = [gid for gid in split if any(t.won for t in groups[gid] if t.member >= conditioned + deciders)]
    assert split and measured_won, "the coins gave no split group a winning measuring member: change the seed"
    unselected = {c.group_id: c for c in group_contributions(played, unselected_plain=True)}
    every = {c.group_id: c for c in group_contributions(played)}
    assert set(unselected) == set(every) == split
    for gid in split:
        cond = [t.reward for t in groups[gid] if t.conditioned]
        measuring = [t.reward for t in groups[gid] if t.member >= conditioned + deciders]
        assert unselected[gid].n_plain == len(measuring) == group - conditioned - deciders
        assert unselected[gid].delta == pytest.approx(sum(cond) / len(cond) - sum(measuring) / len(measuring))
    # Against every plain member, deciders chosen for failing pull the baseline down; against the others
    # the block can be seen to lose.
    assert min(unselected[g].delta for g in measured_won) < 0
    assert all(every[g].delta > unselected[g].delta for g in measured_won)
    # Played in two parts, each episode is the one the whole group's rollout plays.
    failed = {gid: advice[gid] for gid in split}
    whole = rollout(ExpertByCoin(), TASKS, group, 7, experiences=failed, conditioned_per_group=conditioned,
                    max_steps=30)
    assert [[s.decision.action for s in t.steps] for t in played] == [[s.decision.action for s in t.steps]
                                                                       for t in whole]


def test_half_plain_needs_plain_failed_and_two_plain_members():
    with pytest.raises(ConfigError, match=r"bank.decided_by: half_plain .*\(got condition_when: always"):
        parse_params({"bank": {"decided_by": "half_plain"}})
    with pytest.raises(ConfigError, match="1 plain of 8"):
        parse_params({"bank": {"decided_by": "half_plain", "condition_when": "plain_failed", "rho": 0.875}})
    with pytest.raises(ValueError, match="deciders: between 1 and the 2 plain members"):
        rollout_guided_where_plain_failed(ScriptedActor(), TASKS[:1], GROUP, 0, experiences={},
                                          conditioned_per_group=CONDITIONED, deciders=3)
    assert parse_params({"bank": {"decided_by": "half_plain", "condition_when": "plain_failed"}}).bank.rho == 0.5


def test_a_run_decided_by_half_its_plain_members_scores_against_the_others(tmp_path):
    params = parse_params({
        "seed": 2, "data": {"train_tasks": 4},
        "rollout": {"tasks_per_round": 4, "group_size": GROUP, "max_steps": 6},
        "grpo": {"epochs": 1, "minibatches": 2}, "eval": {"episodes": 4},
        "bank": {"embedder": "hash", "condition_when": "plain_failed", "decided_by": "half_plain"},
        "train": {"method": "edge-oracle-bank", "rounds": 1, "base_checkpoint": None,
                  "runs_dir": str(tmp_path / "runs")}})
    run = train(params)
    trajectories = read_rollouts(run.round_dir(0) / "rollouts.parquet", GROUP)
    scored = json.loads((run.round_dir(0) / "scores.json").read_text())["groups"]
    assert scored and all((s["n_conditioned"], s["n_plain"]) == (CONDITIONED, 1) for s in scored)
    for s in scored:  # decided by member 2 alone, measured against member 3
        members = {t.member: t for t in trajectories if t.group_id == s["group_id"]}
        assert not members[2].won and s["success_plain"] == float(members[3].won)
