"""``bank.block_follows_progress``: the block drops the entries of the stages an episode has completed."""

from builtin_pins import ScriptedActor

from edge.algorithms.distill import teacher_block
from edge.envs.base import Task
from edge.envs.registry import generate_tasks, knowledge
from edge.guidance import block_after, block_entries, experience_block, true_advice
from edge.policy.actor import Decision
from edge.rollout import Experience, StepRecord, Trajectory, rollout


def household_task(goal_type: str, **goal) -> Task:
    goal = {"object": "apple", "target": "fridge", "tool": None, "count": 1, "type": goal_type} | goal
    return Task("household", "train", "t0", goal_type, "a task.", {"goal": goal, "receptacles": []})


def test_household_stages_are_done_by_the_take_the_transform_the_lamp_and_the_second_take():
    done = knowledge("household").stages_done
    simple = household_task("pick_and_place_simple")
    assert done(simple, ["go to fridge 1", "take tomato 1 from fridge 1"]) == set()  # not the task's object
    assert done(simple, ["take apple 1 from countertop 1"]) == {0}
    heat = household_task("pick_heat_then_place_in_recep", tool="microwave")
    assert done(heat, ["take apple 1 from countertop 1", "go to microwave 1"]) == {0}
    assert done(heat, ["take apple 1 from countertop 1", "heat apple 1 with microwave 1"]) == {0, 1}
    look = household_task("look_at_obj_in_light", target="desklamp")
    assert done(look, ["use desklamp 1", "take apple 1 from countertop 1"]) == {0}  # the lamp before the take
    assert done(look, ["take apple 1 from countertop 1", "use desklamp 1"]) == {0, 1}
    two = household_task("pick_two_obj_and_place", count=2)
    assert done(two, ["take apple 1 from countertop 1", "put apple 1 in/on fridge 1"]) == set()  # one more to find
    assert done(two, ["take apple 1 from countertop 1", "take apple 2 from table 1"]) == {0, 2}
    del two.spec["goal"]["count"]  # as ALFWorld's goals come: the type says how many
    assert done(two, ["take apple 1 from countertop 1"]) == set()
    alfworld = Task("alfworld", "train", "t1", "pick_two_obj_and_place", "a task.", {"goal": dict(two.spec["goal"])})
    assert knowledge("alfworld").stages_done(alfworld, ["take apple 1 from a 1", "take apple 2 from b 1"]) == {0, 2}


def test_a_block_reads_back_into_its_entries_and_loses_those_of_completed_stages():
    heat = household_task("pick_heat_then_place_in_recep", tool="microwave")
    heat.spec["receptacles"] = ["fridge 1", "countertop 1", "microwave 1"]
    advice = true_advice(heat)
    assert len(advice) == 2  # where apples lie, then heat it
    block = experience_block(advice)
    assert block_entries(block) == advice
    assert block_after(block, heat, []) == block
    assert block_after(block, heat, ["take apple 1 from countertop 1"]) == advice[1]
    assert block_after(block, heat, ["take apple 1 from countertop 1", "heat apple 1 with microwave 1"]) is None
    shop = generate_tasks("shop", "train", 1, 0)[0]
    assert block_after("try : search for red shoes .", shop, ["search red shoes"]) == "try : search for red shoes ."


def test_rollout_shows_each_conditioned_step_the_block_of_its_progress_and_plain_members_none():
    tasks = generate_tasks("household", "train", 12, 0)
    experiences = {t.task_id: Experience(experience_block(true_advice(t)), ["oracle"]) for t in tasks}
    trajectories = rollout(ScriptedActor(), tasks, 2, 0, experiences=experiences, conditioned_per_group=1,
                           follow_progress=True, max_steps=30)
    changed = 0
    for traj in trajectories:
        shown = [s.experience for s in traj.steps]
        if not traj.conditioned:
            assert shown == [None] * len(shown)
            continue
        actions = [s.decision.action for s in traj.steps]
        assert shown == [block_after(traj.experience.text, traj.task, actions[:i]) for i in range(len(actions))]
        changed += shown[-1] != traj.experience.text
    assert changed > 0, "some conditioned episode must have completed a stage"
    whole = rollout(ScriptedActor(), tasks, 2, 0, experiences=experiences, conditioned_per_group=1, max_steps=30)
    assert all(s.experience == t.experience.text for t in whole if t.conditioned for s in t.steps)


def test_the_teacher_sees_the_block_of_each_states_progress_and_no_state_without_one():
    simple = household_task("pick_and_place_simple")
    block = "try : look for apple in fridge , countertop ."
    actions = ["go to countertop 1", "take apple 1 from countertop 1", "go to fridge 1"]
    steps = [StepRecord(f"obs {i}", [], Decision(a, [], None, 0, None, [0.0])) for i, a in enumerate(actions)]
    plain = Trajectory("t0/m1", simple, "t0", 1, False, None, steps)
    assert [teacher_block(plain, i, block, True) for i in range(3)] == [block, block, None]
    assert [teacher_block(plain, i, block, False) for i in range(3)] == [block] * 3
    shown = [block, block, None]
    conditioned = Trajectory("t0/m0", simple, "t0", 0, True, Experience(block, []),
                             [StepRecord(s.observation, [], s.decision, e) for s, e in zip(steps, shown)])
    assert [teacher_block(conditioned, i, block, True) for i in range(3)] == shown
    assert [teacher_block(conditioned, i, block, False) for i in range(3)] == [block] * 3


def test_a_run_with_the_option_passes_it_to_collection_evaluation_and_distillation(tmp_path, monkeypatch):
    import edge.train as train_module
    from edge.config import parse_params

    seen = {"rollout": [], "evaluate": [], "distill": [], "shift": []}

    def spy(name, real):
        def wrapped(*args, **kwargs):
            follow = kwargs.get("follow_progress", args[2] if name == "shift" and len(args) > 2 else None)
            seen[name].append((follow, kwargs.get("experience_for")) if name == "evaluate" else follow)
            return real(*args, **kwargs)
        return wrapped

    for name, attr in (("rollout", "rollout"), ("evaluate", "evaluate"), ("distill", "distill_samples"),
                       ("shift", "advice_shift")):
        monkeypatch.setattr(train_module, attr, spy(name, getattr(train_module, attr)))
    params = parse_params({
        "seed": 3, "data": {"train_tasks": 3}, "rollout": {"tasks_per_round": 3, "group_size": 4, "max_steps": 8},
        "grpo": {"epochs": 1, "minibatches": 2}, "eval": {"episodes": 4}, "bank": {"block_follows_progress": True},
        "distill": {"gate": "retrieved"},
        "train": {"method": "edge-oracle-bank", "rounds": 1, "base_checkpoint": None,
                  "runs_dir": str(tmp_path / "runs")}})
    train_module.train(params)
    assert seen["rollout"] == [True] and seen["distill"] == [True] and seen["shift"] == [True]
    with_advice = [follow for follow, experience_for in seen["evaluate"] if experience_for is not None]
    assert with_advice and set(with_advice) == {True}  # the plain evaluations have no block to follow



def test_the_warm_starts_advised_episodes_show_the_block_as_the_runs_will():
    from edge.config import WarmupConfig
    from edge.warmup import demonstrators, record_demo

    advised = demonstrators(WarmupConfig()).advised
    heat = next(t for t in generate_tasks("household", "train", 50, 0)
                if t.task_type == "pick_heat_then_place_in_recep")
    block = experience_block(true_advice(heat))
    whole = record_demo(heat, advised(heat, 7), block, history_steps=1)
    following = record_demo(heat, advised(heat, 7), block, history_steps=1, follow_progress=True)
    actions = [a for _, a in whole]
    assert actions == [a for _, a in following] and actions  # the same (won) episode; only the prompts differ
    assert {s.experience for s, _ in whole} == {block}
    shown = [s.experience for s, _ in following]
    assert shown == [block_after(block, heat, actions[:i]) for i in range(len(actions))]
    assert None in shown and len(set(shown)) == 3  # the whole block, the step alone, then none
