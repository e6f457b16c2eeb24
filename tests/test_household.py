"""The household environment: ALFWorld rules and wording, splits, agents, determinism."""

import json

import pytest

from edge.envs.base import SPLITS, Task
from edge.envs.group import make_group
from edge.envs.household import TASK_TYPES, expert_plan, generate_tasks, make_env
from edge.envs.household.tasks import LAYOUTS, is_unseen_combo, is_unseen_layout
from edge.envs.household.world import OBJECT_KINDS, PRIOR_MASS, ROOM_RECEPTACLES, kind_of
from edge.envs.play import play, play_episode
from edge.envs.registry import make_agent


def tiny_task(goal: dict, objects: list, lamp=None, instruction="put a clean apple in fridge.") -> Task:
    receptacles = ["cabinet 1", "countertop 1", "fridge 1", "microwave 1", "sinkbasin 1"]
    if lamp:
        receptacles.append(lamp[1]) if lamp[1] not in receptacles else None
    spec = {"room": "kitchen", "layout": "test", "receptacles": receptacles, "lamp": lamp,
            "objects": objects, "goal": goal}
    return Task("household", "train", "t0", goal["type"], instruction, spec)


CLEAN_GOAL = {"type": "pick_clean_then_place_in_recep", "object": "apple", "target": "fridge",
              "tool": "sinkbasin", "count": 1}


def test_alfworld_wording_and_rules():
    env = make_env()
    first = env.reset(tiny_task(CLEAN_GOAL, [["apple 1", "cabinet 1"], ["mug 1", "countertop 1"]]))
    assert first.observation.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert "Your task is to: put a clean apple in fridge." in first.observation
    assert "go to fridge 1" in first.admissible_actions
    assert env.step("go to cabinet 1").observation == "You arrive at cabinet 1. The cabinet 1 is closed."
    # A closed receptacle hides its content: taking is not admissible yet.
    assert env.step("take apple 1 from cabinet 1").observation == "Nothing happens."
    out = env.step("open cabinet 1")
    assert out.observation == "You open the cabinet 1. The cabinet 1 is open. In it, you see a apple 1."
    assert env.step("take apple 1 from cabinet 1").observation == "You pick up the apple 1 from the cabinet 1."
    assert env.step("inventory").observation == "You are carrying: a apple 1."
    # Putting it in the fridge before cleaning does not win.
    assert env.step("go to fridge 1").observation == "You arrive at fridge 1. The fridge 1 is closed."
    env.step("open fridge 1")
    out = env.step("put apple 1 in/on fridge 1")
    assert out.observation == "You put the apple 1 in/on the fridge 1." and not out.info.won
    env.step("take apple 1 from fridge 1")
    out = env.step("go to countertop 1")
    assert out.observation == "You arrive at countertop 1. On the countertop 1, you see a mug 1."
    env.step("go to sinkbasin 1")
    assert env.step("clean apple 1 with sinkbasin 1").observation == "You clean the apple 1 using the sinkbasin 1."
    assert env.step("examine apple 1").observation == "This is a clean apple 1."
    env.step("go to fridge 1")
    out = env.step("put apple 1 in/on fridge 1")
    assert out.info.won and out.done and out.reward == 1.0 and out.info.score == 1.0
    assert out.info.invalid_action is False


def test_invalid_action_is_answered_and_counted_never_raised():
    env = make_env()
    env.reset(tiny_task(CLEAN_GOAL, [["apple 1", "cabinet 1"]]))
    for bad in ["fly to the moon", "", "take apple 1 from cabinet 1", "go to fridge 9"]:
        out = env.step(bad)
        assert out.observation == "Nothing happens." and out.info.invalid_action and out.reward == 0
    assert env.invalid_count == 4
    # Case and spacing are normalised the way a typed command would be.
    assert not env.step("  Go  to Fridge 1 ").info.invalid_action


def test_step_limit_truncates():
    env = make_env(max_steps=3)
    env.reset(tiny_task(CLEAN_GOAL, [["apple 1", "cabinet 1"]]))
    outs = [env.step("look") for _ in range(3)]
    assert [o.done for o in outs] == [False, False, True]
    assert outs[-1].info.truncated and not outs[-1].info.won and outs[-1].info.steps == 3
    with pytest.raises(RuntimeError):
        env.step("look")


def test_light_task_needs_object_in_hand_and_lamp_on():
    goal = {"type": "look_at_obj_in_light", "object": "book", "target": "desklamp", "tool": None, "count": 1}
    task = tiny_task(goal, [["book 1", "countertop 1"]], lamp=["desklamp 1", "cabinet 1"],
                     instruction="look at book under the desklamp.")
    env = make_env()
    env.reset(task)
    env.step("go to cabinet 1")
    env.step("open cabinet 1")
    out = env.step("use desklamp 1")
    assert out.observation == "You turn on the desklamp 1." and not out.info.won
    env.step("go to countertop 1")
    env.step("take book 1 from countertop 1")
    assert not env.won  # book in hand, lamp on, but not at the lamp
    out = env.step("go to cabinet 1")
    assert out.info.won and out.done  # lamp on, book in hand, at the lamp: ALFWorld's goal holds


def test_pick_two_needs_two():
    goal = {"type": "pick_two_obj_and_place", "object": "mug", "target": "countertop", "tool": None, "count": 2}
    env = make_env()
    env.reset(tiny_task(goal, [["mug 1", "cabinet 1"], ["mug 2", "sinkbasin 1"]]))
    for a in ["go to cabinet 1", "open cabinet 1", "take mug 1 from cabinet 1", "go to countertop 1",
              "put mug 1 in/on countertop 1"]:
        out = env.step(a)
    assert not out.info.won
    for a in ["go to sinkbasin 1", "take mug 2 from sinkbasin 1", "go to countertop 1"]:
        env.step(a)
    assert env.step("put mug 2 in/on countertop 1").info.won


@pytest.mark.parametrize("split", SPLITS)
def test_expert_solves_every_task(split):
    report, _ = play("household", split, "expert", 200, seed=0)
    assert report.success_rate == 1.0
    assert set(report.success_by_type) == set(TASK_TYPES)


def test_random_policy_rarely_succeeds():
    for split in SPLITS:
        report, _ = play("household", split, "random", 200, seed=1)
        assert report.success_rate <= 0.05, (split, report.success_rate)


def test_explorer_succeeds_but_needs_more_steps_than_expert():
    explore, _ = play("household", "test_seen", "explore", 100, seed=0)
    expert, _ = play("household", "test_seen", "expert", 100, seed=0)
    assert explore.success_rate >= 0.8
    assert explore.mean_steps > 2 * expert.mean_steps


def test_same_seed_same_tasks_and_episode_byte_for_byte():
    a = [t.to_json() for t in generate_tasks("train", 50, seed=7)]
    b = [t.to_json() for t in generate_tasks("train", 50, seed=7)]
    c = [t.to_json() for t in generate_tasks("train", 50, seed=8)]
    assert a == b and a != c
    task = generate_tasks("train", 1, seed=7)[0]
    runs = [play_episode(make_env(), make_agent("household", "random", 3), task, record=True).transcript
            for _ in range(2)]
    assert "\n".join(runs[0]).encode() == "\n".join(runs[1]).encode()


def test_splits_are_disjoint_and_unseen_is_new():
    tasks = {s: generate_tasks(s, 300, seed=0) for s in SPLITS}
    specs = {s: {json.dumps(t.spec, sort_keys=True) for t in ts} for s, ts in tasks.items()}
    assert not specs["train"] & specs["test_seen"]
    assert not specs["train"] & specs["test_unseen"]
    train_layouts = {t.spec["layout"] for t in tasks["train"]}
    train_combos = {(t.spec["goal"]["object"], t.spec["goal"]["target"]) for t in tasks["train"]}
    for t in tasks["test_unseen"]:
        assert t.spec["layout"] not in train_layouts
        assert (t.spec["goal"]["object"], t.spec["goal"]["target"]) not in train_combos
    # test_seen shares train's world: its layouts and combinations are all seen ones.
    for t in tasks["test_seen"]:
        assert not is_unseen_combo(t.spec["goal"]["object"], t.spec["goal"]["target"])
    assert all(any(is_unseen_layout(lay) for lay in layouts) for layouts in LAYOUTS.values())


def test_all_six_task_types_appear_evenly():
    tasks = generate_tasks("train", 60, seed=0)
    assert {t.task_type: sum(x.task_type == t.task_type for x in tasks) for t in tasks} == \
        {t: 10 for t in TASK_TYPES}


def test_objects_follow_their_kinds_location_regularities():
    # What an experience bank can learn: most objects lie in one of their kind's likely receptacles.
    tasks = generate_tasks("train", 300, seed=0)
    hits = total = 0
    for t in tasks:
        present = {kind_of(r) for r in t.spec["receptacles"]}
        for obj, loc in t.spec["objects"]:
            likely = [k for k in OBJECT_KINDS[kind_of(obj)].likely if k in present]
            if likely:
                total += 1
                hits += kind_of(loc) in likely
    assert hits / total > PRIOR_MASS - 0.05


def test_group_members_start_identical():
    task = generate_tasks("test_seen", 1, seed=0)[0]
    envs, resets = make_group(task, 4)
    assert len({(r.observation, tuple(r.admissible_actions)) for r in resets}) == 1
    plan = expert_plan(task)
    finals = [[env.step(a).observation for a in plan] for env in envs]
    assert all(f == finals[0] for f in finals) and envs[0].won


def test_task_round_trips_through_json():
    task = generate_tasks("test_unseen", 1, seed=0)[0]
    assert Task.from_dict(json.loads(task.to_json())) == task


def test_wrong_env_task_is_refused():
    task = generate_tasks("train", 1, seed=0)[0]
    other = Task("shop", task.split, task.task_id, task.task_type, task.instruction, task.spec)
    with pytest.raises(ValueError, match="shop"):
        make_env().reset(other)


def test_vocabulary_covers_every_word_play_produces():
    import ast
    import re

    from edge.envs.household import vocabulary

    vocab, seen = vocabulary(), set()
    for split in SPLITS:
        for policy in ("random", "explore", "expert"):
            for task in generate_tasks(split, 60, seed=2):
                ep = play_episode(make_env(), make_agent("household", policy, 2), task, record=True)
                lines = [line for line in ep.transcript if not line.startswith("admissible: ")]
                lines += [a for line in ep.transcript if line.startswith("admissible: ")
                          for a in ast.literal_eval(line[len("admissible: "):])]
                seen.update(re.findall(r"\w+|[^\w\s]+", " ".join(lines).lower().replace("> ", "")))
    assert seen <= vocab, sorted(seen - vocab)


def test_the_moved_world_is_the_same_tasks_with_objects_in_other_places():
    from edge.envs.household.world import likely_kinds, moved_likely
    from edge.envs.registry import generate_tasks as tasks_of
    from edge.envs.registry import knowledge
    from edge.envs.registry import make_env as env_named

    usual, moved = tasks_of("household", "train", 300, 0), tasks_of("household_moved", "train", 300, 0)
    for u, m in zip(usual, moved):  # room, layout, goal and instruction task for task
        assert (u.task_type, u.instruction, u.spec["layout"], u.spec["goal"]) == \
            (m.task_type, m.instruction, m.spec["layout"], m.spec["goal"])
        assert "world" not in u.spec and m.spec["world"] == "moved" and m.env == "household_moved"
    for kind in OBJECT_KINDS.values():  # other places, of the kind's own rooms, none a special holder
        rooms_hold = {r for room in kind.rooms for r in ROOM_RECEPTACLES[room]}
        assert not set(moved_likely(kind)) & set(kind.likely)
        assert len(moved_likely(kind)) == len(kind.likely) and set(moved_likely(kind)) <= rooms_hold
        assert not {"towelholder", "handtowelholder", "toiletpaperhanger"} & set(moved_likely(kind))
    # The objects follow the moved regularities, no longer the usual ones.
    shares = {}
    for world, tasks in (("usual", usual), ("moved", moved)):
        hits = {w: 0 for w in ("usual", "moved")}
        total = 0
        for t in tasks:
            present = {kind_of(r) for r in t.spec["receptacles"]}
            for obj, loc in t.spec["objects"]:
                if any(k in present for k in likely_kinds(kind_of(obj), world)):
                    total += 1
                    for w in hits:
                        hits[w] += kind_of(loc) in likely_kinds(kind_of(obj), w)
        shares[world] = {w: h / total for w, h in hits.items()}
    assert shares["moved"]["moved"] > PRIOR_MASS - 0.05 and shares["moved"]["usual"] < 0.15
    assert shares["usual"]["usual"] > PRIOR_MASS - 0.05 and shares["usual"]["moved"] < 0.15
    # The oracle names the moved places; the household's rules play the tasks unchanged.
    task = moved[2]
    advice = knowledge("household_moved").oracle_advice(task)[0]
    named = [k for k in likely_kinds(task.spec["goal"]["object"], "moved")
             if k in {kind_of(r) for r in task.spec["receptacles"]}]
    assert advice == f"try : look for {task.spec['goal']['object']} in {' , '.join(named)} ."
    env = env_named("household_moved")
    env.reset(task)
    assert [env.step(a) for a in expert_plan(task)][-1].info.won
    with pytest.raises(ValueError, match="household_moved"):
        make_env().reset(task)  # the usual household refuses the moved world's task
    with pytest.raises(ValueError, match="household world 'tilted' has no likely kinds"):
        likely_kinds("apple", "tilted")


def test_expert_solves_every_moved_task():
    report, _ = play("household_moved", "test_seen", "expert", 100, seed=0)
    assert report.success_rate == 1.0


def test_in_the_shuffled_world_each_tasks_object_lies_where_its_own_advice_says():
    from edge.envs.registry import generate_tasks as tasks_of
    from edge.envs.registry import knowledge

    usual, shuffled = tasks_of("household", "train", 300, 0), tasks_of("household_shuffled", "train", 300, 0)
    hits = total = 0
    for u, s in zip(usual, shuffled):
        assert (u.instruction, u.spec["goal"]) == (s.instruction, s.spec["goal"]) and s.env == "household_shuffled"
        likely = s.spec["likely"]
        assert len(likely) == 3 and s.spec["goal"]["target"] not in likely
        assert set(likely) <= {kind_of(r) for r in s.spec["receptacles"]}
        assert knowledge(s.env).oracle_advice(s)[0] == f"try : look for {s.spec['goal']['object']} in " \
            + " , ".join(likely) + " ."
        goal_objects = [loc for obj, loc in s.spec["objects"] if kind_of(obj) == s.spec["goal"]["object"]]
        hits += sum(kind_of(loc) in likely for loc in goal_objects)
        total += len(goal_objects)
    assert hits / total > PRIOR_MASS - 0.05
    # No regularity across tasks: an object kind's drawn places vary from task to task.
    drawn: dict[str, set] = {}
    for s in shuffled:
        drawn.setdefault(s.spec["goal"]["object"], set()).add(tuple(s.spec["likely"]))
    assert sum(len(v) > 1 for v in drawn.values()) > 0.8 * sum(len(v) > 0 for v in drawn.values() if len(v) > 0)
    report, _ = play("household_shuffled", "test_seen", "expert", 60, seed=0)
    assert report.success_rate == 1.0


@pytest.mark.parametrize("env", ["household", "household_moved", "household_shuffled"])
def test_misleading_advice_says_the_oracles_things_falsely_in_its_words(env):
    from edge.envs.household.knowledge import advised_receptacle_kinds
    from edge.envs.household.tasks import TRANSFORM
    from edge.envs.household.world import TOOL_FOR
    from edge.envs.registry import generate_tasks as tasks_of
    from edge.envs.registry import knowledge
    from edge.policy.model import tiny_vocabulary
    from edge.text import split_words

    know, words = knowledge(env), tiny_vocabulary([env])
    in_true = in_misleading = total = 0
    for task in tasks_of(env, "train", 300, 0):
        true, false = know.oracle_advice(task), know.misleading_advice(task)
        goal = task.spec["goal"]
        assert set(split_words(" ".join(false))) <= words  # the tiny model reads every word of it
        true_places, false_places = advised_receptacle_kinds(true), advised_receptacle_kinds(false)
        assert not set(false_places) & set(true_places) and len(false_places) <= len(true_places)
        # The steps after finding: a transformation made false with its own tool; the others kept.
        assert len(false) - bool(false_places) == len(true) - bool(true_places)
        if goal["type"] in TRANSFORM:
            verb = false[-1].split()[2]
            assert verb != TRANSFORM[goal["type"]] and f"with the {TOOL_FOR[verb]} " in false[-1]
        else:
            assert false[bool(false_places):] == true[bool(true_places):]
        places = [kind_of(loc) for obj, loc in task.spec["objects"] if kind_of(obj) == goal["object"]]
        in_true += sum(p in true_places for p in places)
        in_misleading += sum(p in false_places for p in places)
        total += len(places)
    # The true places hold most of the goal's objects; the misleading ones only what lies anywhere by chance.
    assert in_true / total > PRIOR_MASS - 0.1 and in_misleading / total < 0.15
