"""``bank.condition_when: plain_failed``: the plain members play first and the block is shown only in the
groups where every one of them failed; the others stay GRPO's group."""

import json

import pytest
from builtin_pins import ScriptedActor

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
