"""benchmarks/step_probe.py: which states it asks about, and how it reads a policy's answer."""

import math

import pytest
import torch
from benchmark_scripts import load

from edge.envs.base import Task
from edge.policy.actor import Decision
from edge.rollout import StepRecord, Trajectory


@pytest.fixture(scope="module")
def probe():
    return load("step_probe")


def heat_trajectory(actions: list[str], admissible: list[str]) -> Trajectory:
    task = Task("household", "train", "t0", "pick_heat_then_place_in_recep", "heat some apple and put it in fridge.",
                {"goal": {"object": "apple", "tool": "microwave", "target": "fridge",
                          "type": "pick_heat_then_place_in_recep"}})
    steps = [StepRecord(f"obs {i}", admissible, Decision(a, [], None, 0, None, [0.0])) for i, a in enumerate(actions)]
    return Trajectory("t0/m0", task, "t0", 0, False, None, steps)


def test_held_states_run_from_the_take_to_the_transformation(probe):
    actions = ["go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1", "go to microwave 1",
               "heat apple 1 with microwave 1", "go to fridge 1", "put apple 1 in/on fridge 1"]
    traj = heat_trajectory(actions, ["go to fridge 1", "go to microwave 1"])
    assert probe.held_states(traj) == [2, 3, 4]  # holding it at steps 2-4; heated at 4
    # another object taken is not the task's object; putting the apple down ends the holding
    traj = heat_trajectory(["take pan 1 from stove 1", "take apple 1 from countertop 1", "put apple 1 in/on shelf 1",
                            "go to microwave 1"], ["go to microwave 1", "go to fridge 1"])
    assert probe.held_states(traj) == [2]


def test_held_states_are_asked_only_where_both_kinds_of_tool_can_be_chosen(probe):
    actions = ["take apple 1 from countertop 1", "go to microwave 1", "go to microwave 1"]
    only_right = heat_trajectory(actions, ["go to microwave 1", "go to shelf 1"])
    both = heat_trajectory(actions, ["go to microwave 1", "go to sinkbasin 1"])
    assert probe.probe_states([only_right], 10, 0) == []
    assert probe.probe_states([both], 10, 0) == [(both, 1), (both, 2)]
    assert len(probe.probe_states([both], 1, 0)) == 1


def test_tool_mass_sums_the_actions_that_name_each_tool(probe):
    admissible = ["go to microwave 1", "heat apple 1 with microwave 1", "go to fridge 1", "go to sinkbasin 1",
                  "go to shelf 1"]
    logp = torch.log(torch.tensor([0.2, 0.3, 0.1, 0.15, 0.25]))
    right, wrong = probe.tool_mass(logp, admissible, "microwave")
    assert math.isclose(right, 0.5, rel_tol=1e-6) and math.isclose(wrong, 0.25, rel_tol=1e-6)
