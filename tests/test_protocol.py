"""The environment protocol, the registry, task files and configuration errors."""

import json

import pytest

from edge.config import ConfigError, load_params, parse_params
from edge.data import prepare_tasks, task_path
from edge.envs.base import SPLITS, Task, TextEnv, read_tasks, write_tasks
from edge.envs.registry import env_names, generate_tasks, make_agent, make_env


@pytest.mark.parametrize("name", ["household", "shop"])
def test_builtin_envs_follow_the_protocol(name):
    env = make_env(name)
    assert isinstance(env, TextEnv) and env.name == name and env.max_steps > 0
    task = generate_tasks(name, "train", 1, seed=0)[0]
    first = env.reset(task)
    assert first.instruction == task.instruction and first.task_type == task.task_type
    assert first.admissible_actions and all(isinstance(a, str) for a in first.admissible_actions)
    out = env.step("this is not an action")
    assert out.info.invalid_action and out.reward == 0 and not out.done
    out = env.step(first.admissible_actions[0])
    assert not out.info.invalid_action and out.info.steps == 2
    assert out.info.admissible_actions


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match=r"valid names: .*household, household_moved, household_shuffled, shop"):
        make_env("alfred")
    with pytest.raises(ValueError, match="valid splits: train, test_seen, test_unseen"):
        generate_tasks("household", "valid", 3, seed=0)
    with pytest.raises(ValueError, match="valid agents"):
        make_agent("household", "oracle", seed=0)
    assert set(env_names()) >= {"household", "shop"}


def test_task_files_round_trip_and_bad_lines_name_file_and_line(tmp_path):
    tasks = generate_tasks("household", "test_seen", 5, seed=0)
    path = tmp_path / "t.jsonl"
    assert write_tasks(tasks, path) == 5
    assert read_tasks(path) == tasks
    path.write_text(tasks[0].to_json() + "\n{not json\n")
    with pytest.raises(ValueError, match=r"t.jsonl:2: not valid JSON"):
        read_tasks(path)
    path.write_text(json.dumps({"env": "household", "split": "train"}) + "\n")
    with pytest.raises(ValueError, match=r"t.jsonl:1: task record lacks field\(s\) \['task_id'"):
        read_tasks(path)
    with pytest.raises(FileNotFoundError, match="edge data prepare"):
        read_tasks(tmp_path / "missing.jsonl")
    bad_split = json.loads(tasks[0].to_json()) | {"split": "dev"}
    with pytest.raises(ValueError, match="split 'dev'"):
        Task.from_dict(bad_split)


def test_prepare_writes_every_split_deterministically(tmp_path):
    cfg = parse_params({"seed": 3, "data": {"envs": ["household", "shop"], "train_tasks": 4,
                                            "test_seen_tasks": 2, "test_unseen_tasks": 2,
                                            "out_dir": str(tmp_path / "a")}})
    counts = prepare_tasks(cfg.data, cfg.seed)
    assert counts == {e: {"train": 4, "test_seen": 2, "test_unseen": 2} for e in ("household", "shop")}
    first = {s: task_path(cfg.data.out_dir, "shop", s).read_bytes() for s in SPLITS}
    cfg.data.out_dir = tmp_path / "b"
    prepare_tasks(cfg.data, cfg.seed)
    assert first == {s: task_path(cfg.data.out_dir, "shop", s).read_bytes() for s in SPLITS}


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"data\.train_tasks: Input should be greater than or equal to 1"):
        parse_params({"data": {"train_tasks": 0}})
    with pytest.raises(ConfigError, match=r"data\.tasks_train: Extra inputs are not permitted"):
        parse_params({"data": {"tasks_train": 5}})
    with pytest.raises(ConfigError, match=r"data\.envs: Value error, unknown environment"):
        parse_params({"data": {"envs": ["househould"]}})
    bad = tmp_path / "params.yaml"
    bad.write_text("seed: [1\n")
    with pytest.raises(ConfigError, match="params.yaml: not valid YAML"):
        load_params(bad)
    with pytest.raises(ConfigError, match="file not found"):
        load_params(tmp_path / "nope.yaml")


def test_project_params_file_is_valid():
    from pathlib import Path

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    assert params.data.envs == ["household", "shop"]
