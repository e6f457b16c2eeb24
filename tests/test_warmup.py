"""The warm start: what the demonstrations contain, per-environment settings, and one tiny clone."""

import json

import pytest
import torch

from edge.config import WarmupConfig, parse_params
from edge.policy.model import load_policy
from edge.warmup import demonstrations, run_warmup


@pytest.mark.parametrize("env", ["household", "shop"])
def test_demonstrations_mix_plain_and_advised_states(env):
    cfg = WarmupConfig(env=env, explore_episodes=6, noisy_expert_episodes=2, advised_episodes=6)
    pairs = demonstrations(cfg, history_steps=1, seed=0)
    advised = [s for s, _ in pairs if s.experience]
    plain = [s for s, _ in pairs if not s.experience]
    assert advised and plain
    for state, action in pairs:
        assert action in state.admissible
    # Advised states carry the task's true advice, verbatim as the bank would write it.
    instructions = {s.instruction for s in advised}
    assert all(s.experience.startswith("try : ") for s in advised) and len(instructions) >= 3
    assert demonstrations(cfg, history_steps=1, seed=0) == pairs  # the seed fixes them


def test_shop_keeps_the_careless_shoppers_lost_episodes():
    only_careless = WarmupConfig(env="shop", explore_episodes=20, noisy_expert_episodes=0, advised_episodes=0)
    pairs = demonstrations(only_careless, history_steps=1, seed=0)
    starts = sum(a.startswith("search[") for _, a in pairs)
    assert starts == 20  # every episode, won or lost (the careless shopper rarely wins)


def test_per_env_fields_replace_the_section_for_that_environment_only():
    params = parse_params({"warmup": {"env": "shop", "epochs": 3, "per_env": {"shop": {"objective": "candidates"}}}})
    assert params.warmup.for_env().objective == "candidates" and params.warmup.for_env().epochs == 3
    household = parse_params({"warmup": {"per_env": {"shop": {"objective": "candidates"}}}})
    assert household.warmup.for_env().objective == "sft"
    with pytest.raises(Exception, match="per_env.shop"):
        parse_params({"warmup": {"per_env": {"shop": {"objectiv": "candidates"}}}})


def test_tiny_warmup_changes_the_model_and_writes_its_report(tmp_path):
    params = parse_params({"seed": 1, "warmup": {"env": "shop", "explore_episodes": 4, "noisy_expert_episodes": 1,
                                                  "advised_episodes": 4, "epochs": 2, "eval_episodes": 4,
                                                  "per_env": {"shop": {"objective": "candidates"}}}})
    untrained = load_policy(params.policy, seed=params.seed, envs=["shop"]).model.state_dict()
    report = run_warmup(params, tmp_path / "base")
    trained = load_policy(params.policy.model_copy(update={"model": str(tmp_path / "base")})).model.state_dict()
    assert any(not torch.equal(untrained[k], trained[k]) for k in untrained)
    saved = json.loads((tmp_path / "base" / "warmup.json").read_text())
    assert saved["demonstration_states"] == report["demonstration_states"] > 0
    assert len(saved["epoch_losses"]) == 2 and saved["epoch_losses"][1] < saved["epoch_losses"][0]
    assert 0 <= saved["plain_success"] <= 1 and saved["advised"]["episodes"] == 4



def test_advised_demonstrations_play_the_same_tasks_in_the_advised_environment():
    from edge.envs.registry import knowledge

    cfg = WarmupConfig(env="household", explore_episodes=4, noisy_expert_episodes=4, advised_episodes=6)
    usual = demonstrations(cfg, history_steps=1, seed=0)
    shuffled = demonstrations(cfg.model_copy(update={"advised_env": "household_shuffled"}), history_steps=1, seed=0)
    # The plain demonstrations are the default's, state for state; only the advised ones change.
    plain = [(s.instruction, s.observation, a) for s, a in usual if s.experience is None]
    assert plain == [(s.instruction, s.observation, a) for s, a in shuffled if s.experience is None]
    firsts = {s.instruction: s for s, _ in shuffled if s.experience and not s.history}
    assert firsts.keys() == {s.instruction for s, _ in usual if s.experience and not s.history}
    assert {s.experience for s in firsts.values()} != {s.experience for s, _ in usual if s.experience}
    # Each advised episode's advice names where its own task's object lies in the shuffled world.
    from edge.envs.registry import generate_tasks

    tasks = {t.instruction: t for t in generate_tasks("household_shuffled", "train", 14, 0)}
    for instruction, state in firsts.items():
        task = tasks[instruction]
        advice = knowledge("household_shuffled").oracle_advice(task)[0]
        assert advice in state.experience and task.spec["likely"][0] in advice


@pytest.mark.parametrize("advised_env,expected", [("kitchen", "warmup.advised_env: unknown environment 'kitchen'"),
                                                   ("shop", "does not play warmup.env 'household'")])
def test_an_advised_environment_that_is_not_the_same_tasks_is_refused_by_name(advised_env, expected):
    cfg = WarmupConfig(env="household", explore_episodes=2, noisy_expert_episodes=0, advised_episodes=2,
                       advised_env=advised_env)
    with pytest.raises(ValueError, match=expected):
        demonstrations(cfg, history_steps=1, seed=0)
