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


def test_mass_sums_the_actions_on_each_side(probe):
    admissible = ["go to microwave 1", "heat apple 1 with microwave 1", "go to fridge 1", "go to sinkbasin 1",
                  "go to shelf 1"]
    traj = heat_trajectory(["take apple 1 from countertop 1"], admissible)
    right_actions, other_actions = probe.tool_sides(traj, 0)
    assert right_actions == admissible[:2] and other_actions == admissible[2:4]  # the shelf is no tool
    logp = torch.log(torch.tensor([0.2, 0.3, 0.1, 0.15, 0.25]))
    right, other = probe.mass(logp, admissible, right_actions, other_actions)
    assert math.isclose(right, 0.5, rel_tol=1e-6) and math.isclose(other, 0.25, rel_tol=1e-6)


def test_search_states_run_until_the_object_is_in_sight_or_taken(probe):
    # apples usually lie in the fridge, on the countertop or the dining table (world.OBJECT_KINDS)
    look = ["go to cabinet 1", "go to countertop 1", "go to fridge 1"]
    actions = ["go to cabinet 1", "open cabinet 1", "go to countertop 1", "take apple 1 from countertop 1",
               "go to microwave 1"]
    admissible = [look, look, look + ["take apple 1 from countertop 1"], look, look]
    task = heat_trajectory([], []).task
    steps = [StepRecord(f"obs {i}", adm, Decision(a, [], None, 0, None, [0.0]))
             for i, (a, adm) in enumerate(zip(actions, admissible))]
    traj = Trajectory("t0/m0", task, "t0", 0, False, None, steps)
    assert probe.search_states(traj) == [0, 1]  # at step 2 the apple is in sight; at 3 it is taken
    # the cabinet is visited at step 0: from step 1 on, it is on neither side
    assert probe.search_sides(traj, 0) == (["go to countertop 1", "go to fridge 1"], ["go to cabinet 1"])
    assert probe.search_sides(traj, 1) == (["go to countertop 1", "go to fridge 1"], [])
    # with no unvisited receptacle of another kind to choose instead, the step asks nothing
    assert probe.probe_states([traj], 10, 0, probe.STAGES["find"]) == [(traj, 0)]


def test_the_step_stage_weighs_the_tool_against_the_target_and_the_after_stage_the_reverse(probe):
    # heat an apple, put it in the fridge: the fridge is the target, the sink basin another tool
    actions = ["take apple 1 from countertop 1", "go to microwave 1", "heat apple 1 with microwave 1",
               "go to sinkbasin 1", "go to fridge 1", "put apple 1 in/on fridge 1", "go to microwave 1"]
    admissible = ["go to microwave 1", "go to fridge 1", "go to sinkbasin 1", "put apple 1 in/on fridge 1"]
    traj = heat_trajectory(actions, admissible)
    assert probe.held_states(traj) == [1, 2]
    assert probe.step_sides(traj, 1) == (["go to microwave 1"], ["go to fridge 1", "put apple 1 in/on fridge 1"])
    assert probe.transformed_states(traj) == [3, 4, 5]  # until the apple is put down
    # the fridge is the target here, so only the sink basin counts as another tool
    assert probe.after_sides(traj, 3) == (["go to fridge 1", "put apple 1 in/on fridge 1"], ["go to sinkbasin 1"])
    # a task without a transform asks neither question
    goal = {"object": "apple", "target": "fridge", "type": "pick_and_place_simple"}
    task = Task("household", "train", "t1", "pick_and_place_simple", "put an apple in fridge.", {"goal": goal})
    plain = Trajectory("t1/m0", task, "t1", 0, False, None, traj.steps)
    assert probe.held_states(plain) == [] and probe.transformed_states(plain) == []


def test_the_place_stage_weighs_the_target_against_the_carried_objects_usual_places(probe):
    goal = {"object": "watch", "target": "tvstand", "type": "pick_and_place_simple"}
    task = Task("household", "train", "t2", "pick_and_place_simple", "put a watch in tvstand.", {"goal": goal})
    actions = ["go to drawer 1", "take watch 1 from drawer 1", "go to sidetable 1", "go to tvstand 1",
               "put watch 1 in/on tvstand 1", "go to drawer 1"]
    admissible = ["go to drawer 1", "go to sidetable 1", "go to tvstand 1", "go to sofa 1",
                  "put watch 1 in/on drawer 1"]
    steps = [StepRecord(f"obs {i}", admissible, Decision(a, [], None, 0, None, [0.0])) for i, a in enumerate(actions)]
    traj = Trajectory("t2/m0", task, "t2", 0, False, None, steps)
    assert probe.carried_states(traj) == [2, 3, 4]  # from the take until the watch is put down
    # the sofa is neither the target nor where watches lie: on no side
    assert probe.place_sides(traj, 2) == (["go to tvstand 1"], ["go to drawer 1", "go to sidetable 1",
                                                               "put watch 1 in/on drawer 1"])
    assert probe.carried_states(heat_trajectory(actions, admissible)) == []  # a transform type: the after stage
