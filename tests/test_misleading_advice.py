"""benchmarks/misleading_advice.py: where episodes look first, read from real rollouts."""

import pytest
from benchmark_scripts import load
from builtin_pins import ScriptedActor

from edge.envs.household import generate_tasks
from edge.guidance import experience_block, misleading_advice
from edge.rollout import Experience, rollout, write_rollouts


@pytest.fixture(scope="module")
def script():
    return load("misleading_advice")


def test_first_searches_count_moves_to_the_true_and_the_false_places_per_kind_of_episode(script, tmp_path):
    tasks = generate_tasks("train", 24, seed=2)
    false = {t.task_id: Experience(experience_block(misleading_advice(t)), ["oracle"]) for t in tasks}
    for seed, folder in enumerate(("s0", "s1")):
        trajectories = rollout(ScriptedActor(), tasks, 4, seed=seed, experiences=false, conditioned_per_group=2,
                               max_steps=6)
        write_rollouts(trajectories, tmp_path / folder / "round_000" / "rollouts.parquet")
    shares = script.first_searches([tmp_path / "s0", tmp_path / "s1"], rounds=(0,))["0"]
    plain, advised = shares["plain"], shares["advised"]
    assert plain["episodes"] + advised["episodes"] <= 2 * 24 * 4 and min(plain["episodes"], advised["episodes"]) > 60
    # The scripted actor follows the words of the block half the time: the false places draw the advised
    # episodes' first moves, not the plain ones'.
    assert advised["false"] > plain["false"] + 0.2
    assert advised["true"] < advised["false"]


def test_first_search_is_the_kind_of_the_first_go_to(script):
    from types import SimpleNamespace

    def step(action):
        return SimpleNamespace(decision=SimpleNamespace(action=action))

    traj = SimpleNamespace(steps=[step("look"), step("go to countertop 2"), step("go to fridge 1")])
    assert script.first_search(traj) == "countertop"
    assert script.first_search(SimpleNamespace(steps=[step("look")])) is None
