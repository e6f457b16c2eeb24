"""The ALFWorld adapter on the real games (``$ALFWORLD_DATA``, else ``<repo>/../shared/data/alfworld``).

Tests that need the ``alfworld`` extra or the games skip, saying which is missing; the grammar and
the error messages are checked everywhere. Games are few and short (a reset costs 1-2 s, a step
0.1 s), so the file stays well under two minutes on two cores.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from edge.envs.alfworld.data import TASK_TYPES, AlfworldUnavailable, data_root, require_extra
from edge.envs.alfworld.grammar import as_move, normalise_action

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data" / "alfworld"
DATA = Path(os.environ.get("ALFWORLD_DATA") or SHARED_DATA)
HAVE_EXTRA = all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld", "fast_downward"))
HAVE_DATA = (DATA / "json_2.1.1").is_dir()

needs_games = pytest.mark.skipif(
    not (HAVE_EXTRA and HAVE_DATA),
    reason=("the alfworld extra is not installed (pip install 'edge-rl[alfworld]')" if not HAVE_EXTRA else
            f"no ALFWorld games at {DATA} (set ALFWORLD_DATA to a folder with json_2.1.1/ and logic/)"))

# Short games of different types, chosen by id so the tests do not depend on the shuffle.
HEAT_GAME = "alfworld/valid_unseen/pick_heat_then_place_in_recep-Cup-None-Cabinet-10/trial_T20190907_083346_800823"
LOOK_GAME = "alfworld/valid_unseen/look_at_obj_in_light-Pencil-None-DeskLamp-308/trial_T20190908_220545_153480"


@pytest.fixture(scope="module")
def alfworld():
    """The adapter, with ALFWORLD_DATA pointing at the games; its worker processes stop afterwards."""
    previous = os.environ.get("ALFWORLD_DATA")
    os.environ["ALFWORLD_DATA"] = str(DATA)
    import edge.envs.alfworld as module

    yield module
    module.close_pools()
    if previous is None:
        os.environ.pop("ALFWORLD_DATA", None)
    else:
        os.environ["ALFWORLD_DATA"] = previous


def task_by_id(module, split: str, task_id: str):
    return next(t for t in module.generate_tasks(split, 1000, 0) if t.task_id == task_id)


# ----- no extra or data needed ---------------------------------------------------------------------
def test_both_placing_grammars_map_onto_the_admissible_one():
    old = ["go to shelf 1", "put pencil 1 in/on shelf 1"]
    new = ["go to shelf 1", "move pencil 1 to shelf 1"]
    for action in ("put pencil 1 in/on shelf 1", "move pencil 1 to shelf 1", "put pencil 1 on shelf 1",
                   "Put  pencil 1 in shelf 1.", "put pencil 1 into shelf 1"):
        assert normalise_action(action, old) == "put pencil 1 in/on shelf 1"
        assert normalise_action(action, new) == "move pencil 1 to shelf 1"
    assert normalise_action("Go to shelf 1", old) == "go to shelf 1"
    assert normalise_action("move pencil 1 to shelf 2", old) == "move pencil 1 to shelf 2"  # stays invalid
    assert normalise_action("dance", old) == "dance"
    assert as_move("put cd 3 in/on safe 1") == "move cd 3 to safe 1" and as_move("open safe 1") == "open safe 1"


def test_missing_data_folder_and_extra_say_how_to_fix(tmp_path, monkeypatch):
    with pytest.raises(AlfworldUnavailable, match=r"has no json_2\.1\.1/ folder.*ALFWORLD_DATA"):
        data_root(tmp_path)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(AlfworldUnavailable, match="from ALFWORLD_DATA"):
        data_root()
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "alfworld" else
                        real_find_spec(name, *a))
    with pytest.raises(AlfworldUnavailable, match=r"missing modules: alfworld.*pip install 'edge-rl\[alfworld\]'"):
        require_extra()


def test_edge_data_alfworld_offline_lists_what_is_missing(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from edge.cli import app
    from edge.envs.alfworld import fetch

    if not HAVE_EXTRA:
        pytest.skip("the alfworld extra is not installed (pip install 'edge-rl[alfworld]')")
    monkeypatch.setattr(fetch, "online", lambda timeout=5.0: False)
    result = CliRunner().invoke(app, ["data", "alfworld", "--dest", str(tmp_path)], terminal_width=400)
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "json_2.1.1/valid_seen/" in out and "logic/alfred.pddl" in out and "ALFWORLD_DATA" in out


# ----- real games -----------------------------------------------------------------------------------
@needs_games
def test_splits_have_the_standard_sizes_and_six_task_types(alfworld):
    sizes = {split: len(alfworld.generate_tasks(split, 10_000, 0)) for split in ("train", "test_seen", "test_unseen")}
    assert sizes == {"train": 200, "test_seen": 140, "test_unseen": 134}
    unseen = alfworld.generate_tasks("test_unseen", 10_000, 0)
    assert {t.task_type for t in unseen} == set(TASK_TYPES)
    assert len({t.task_id for t in unseen}) == 134 and all(t.instruction.endswith(".") for t in unseen)
    assert alfworld.generate_tasks("test_unseen", 5, 0) == unseen[:5]
    assert alfworld.generate_tasks("test_unseen", 5, 1) != unseen[:5]


@needs_games
def test_following_the_handcoded_expert_wins_in_either_grammar(alfworld):
    env = alfworld.make_env(workers=0)
    # The 2.1.1 wording these games speak ("put X in/on Y"), and the newer one ("move X to Y").
    for task_id, grammar in ((HEAT_GAME, lambda a: a), (HEAT_GAME, as_move), (LOOK_GAME, lambda a: a)):
        task = task_by_id(alfworld, "test_unseen", task_id)
        plan = alfworld.expert_plan(task)
        assert plan and len(plan) <= 50
        first = env.reset(task)
        assert "Your task is to: " + task.instruction in first.observation
        results = [env.step(grammar(action)) for action in plan]
        assert results[-1].info.won and results[-1].done and results[-1].reward == 1.0, task_id
        assert not any(r.info.invalid_action for r in results)


@needs_games
def test_invalid_actions_and_the_step_limit(alfworld):
    env = alfworld.make_env(max_steps=3, workers=0)
    task = task_by_id(alfworld, "test_unseen", LOOK_GAME)
    first = env.reset(task)
    out = env.step("fly to the moon")
    assert out.observation == "Nothing happens." and out.info.invalid_action and not out.done
    assert out.info.admissible_actions == first.admissible_actions
    out = env.step(first.admissible_actions[0])
    assert not out.info.invalid_action and not out.done
    out = env.step("look")
    assert out.done and out.info.truncated and not out.info.won and out.info.steps == 3
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("look")


@needs_games
def test_worker_processes_match_in_process_play_and_groups_are_identical(alfworld):
    from edge.envs.group import make_group
    from edge.envs.parallel import RemoteEnv, step_all

    task = task_by_id(alfworld, "test_unseen", HEAT_GAME)
    envs, resets = make_group(task, 3, workers=2)
    assert all(isinstance(e, RemoteEnv) for e in envs)
    assert resets[0] == resets[1] == resets[2]
    local = alfworld.make_env(workers=0)
    assert local.reset(task) == resets[0]
    actions = [resets[0].admissible_actions[0], "dance", resets[0].admissible_actions[-1]]
    remote = step_all(envs, actions)
    assert [r.info.invalid_action for r in remote] == [False, True, False]
    assert remote[0] == local.step(actions[0])


@needs_games
def test_expert_agent_through_play_wins_and_reports_by_task_type(alfworld):
    from edge.envs.play import play

    report, episodes = play("alfworld", "test_seen", "expert", 3, seed=0)
    assert report.success_rate == 1.0 and report.episodes == 3
    assert sum(report.episodes_by_type.values()) == 3 and set(report.success_by_type) <= set(TASK_TYPES)
    assert report.env_steps_per_second > 0 and all(ep.steps <= 50 for ep in episodes)


@needs_games
def test_tiny_policy_runs_through_the_adapter(alfworld):
    from edge.config import PolicyConfig
    from edge.evaluate import summarise
    from edge.policy.actor import Actor
    from edge.policy.model import load_policy
    from edge.rollout import rollout

    policy = load_policy(PolicyConfig(), envs=["alfworld"], seed=0)
    vocab = policy.tokenizer.get_vocab()
    assert len(vocab) < 1000 and {"sinkbasin", "desklamp", "move", "/"} <= set(vocab)
    task = task_by_id(alfworld, "test_unseen", HEAT_GAME)
    first = alfworld.make_env(workers=0).reset(task)
    ids = policy.tokenizer(first.observation + " " + " ".join(first.admissible_actions))["input_ids"]
    assert policy.tokenizer.unk_token_id not in ids  # every word of a real observation is known
    assert policy.tokenizer("a zorblax 1")["input_ids"]  # an unknown word tokenizes, it does not raise
    actor = Actor(policy)
    trajectories = rollout(actor, [task], 2, 0, max_steps=3)
    assert len(trajectories) == 2 and all(len(t.steps) == 3 for t in trajectories)
    assert all(s.decision.action in s.admissible for t in trajectories for s in t.steps)
    result = summarise(trajectories)
    assert result.episodes == 2 and result.episodes_by_type == {task.task_type: 2}
