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


def test_success_by_type_reads_each_runs_last_evaluation_and_averages_over_seeds(script, tmp_path):
    import json

    def evaluation(folder, round_, plain, with_bank=None):
        ev = {"plain": {"success_by_type": plain}}
        if with_bank is not None:
            ev["with_bank"] = {"success_by_type": with_bank}
        (tmp_path / folder / f"round_{round_:03d}").mkdir(parents=True)
        (tmp_path / folder / f"round_{round_:03d}" / "eval.json").write_text(json.dumps({"test_seen": ev}))

    evaluation("s0", 3, {"heat": 0.0}, {"heat": 0.0})  # an earlier point: not the final one
    evaluation("s0", 7, {"heat": 0.5}, {"heat": 0.25})
    evaluation("s1", 7, {"heat": 0.7}, {"heat": 0.15})
    by_type = script.success_by_type([tmp_path / "s0", tmp_path / "s1"])
    assert by_type["plain"] == pytest.approx({"heat": 0.6}) and by_type["with_bank"] == pytest.approx({"heat": 0.2})
    evaluation("grpo", 7, {"heat": 0.4})
    assert script.success_by_type([tmp_path / "grpo"]) == {"plain": {"heat": 0.4}}


def test_transformations_count_the_tasks_own_and_the_false_verb_per_kind_of_episode(script, tmp_path):
    from edge.envs.household.tasks import TRANSFORM

    tasks = [t for t in generate_tasks("train", 120, seed=4) if t.spec["goal"]["type"] in TRANSFORM][:20]
    false = {t.task_id: Experience(experience_block(misleading_advice(t)), ["oracle"]) for t in tasks}
    trajectories = rollout(ScriptedActor(), tasks, 4, seed=0, experiences=false, conditioned_per_group=2,
                           max_steps=40)
    write_rollouts(trajectories, tmp_path / "s0" / "round_000" / "rollouts.parquet")
    counted = script.transformations([tmp_path / "s0"], rounds=(0,))["0"]
    assert counted["plain"]["episodes"] == counted["advised"]["episodes"] == 40
    # Recounted by hand from the trajectories, for the verb the false advice names.
    wrong = {"clean": "heat", "heat": "cool", "cool": "clean"}
    by_hand = [any(s.decision.action.startswith(wrong[TRANSFORM[t.task.spec["goal"]["type"]]] + " ") for s in t.steps)
               for t in trajectories if t.conditioned]
    assert counted["advised"]["false"] == sum(by_hand) / 40
    assert 0 < counted["advised"]["false"]
