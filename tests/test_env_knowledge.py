"""Environments own their knowledge: the interface, discovery by entry point, and a new environment
(``tests/keysdoors``, registered the way an installed package is) that warm-starts and trains with
every method through the CLI."""

import ast
import functools
import json
import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from builtin_pins import PINS, fingerprints
from typer.testing import CliRunner

from edge.bank.store import read_snapshot
from edge.cli import app
from edge.config import WarmupConfig, parse_params
from edge.envs import registry
from edge.envs.base import Knowledge
from edge.envs.parallel import EnvPool, reset_all, step_all
from edge.policy.actor import Actor
from edge.policy.model import load_policy
from edge.rollout import rollout
from edge.warmup import demonstrations

TESTS = Path(__file__).parent
ROOT = TESTS.parent
BIN = Path(sys.executable).parent


def install_entry_points(site: Path, points: dict[str, str]) -> Path:
    """What ``pip install`` of a package declaring ``[project.entry-points."edge.envs"]`` leaves
    behind: a dist-info folder with ``entry_points.txt``, found on ``sys.path``."""
    dist = site / "keysdoors_env-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: keysdoors-env\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[edge.envs]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))
    return site


@pytest.fixture
def installed(tmp_path):
    """keysdoors (and its bare variant) installed for this process; the registry re-read."""
    site = install_entry_points(tmp_path / "site", {"keysdoors": "keysdoors", "keysdoors-bare": "keysdoors.bare"})
    sys.path.insert(0, str(site))
    registry.discover(refresh=True)
    yield site
    sys.path.remove(str(site))
    registry.discover(refresh=True)


def test_builtin_environments_produce_what_they_did_before_the_knowledge_moved():
    # Pinned before the move into the environments' folders (see builtin_pins.py): rollouts of a
    # scripted actor, the bank the template synthesizer writes from them, the oracle's advice, the
    # warm start's demonstrations and the tiny model's vocabulary, for household and shop.
    assert fingerprints() == json.loads(PINS.read_text())


def test_builtins_register_through_the_entry_point_group():
    from importlib.metadata import entry_points

    declared = {p.name: p.value for p in entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert declared == registry.BUILTIN  # pyproject.toml declares them; an install reads them
    assert registry.get_entry("household").source == "entry point of edge-rl"


def test_threads_reading_the_registry_while_it_is_read_in_never_see_it_half_filled(monkeypatch):
    # The learning benchmark loads params.yaml in a thread per job; with the entry points read slowly,
    # every thread must still see every environment (before the lock, the others saw an empty table).
    real = registry.entry_points

    def slow_entry_points(**kwargs):
        time.sleep(0.2)
        return real(**kwargs)

    monkeypatch.setattr(registry, "entry_points", slow_entry_points)
    monkeypatch.setattr(registry, "_DISCOVERED", False)
    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(lambda _: registry.env_names(), range(4)))
    assert seen == [sorted(registry.BUILTIN)] * 4


def test_an_installed_environment_is_listed_by_the_cli_and_runs_in_worker_processes(installed):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(installed), str(TESTS)]))
    listed = subprocess.run([str(BIN / "edge"), "env", "list"], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "keysdoors: keys and doors: find the right colour's key" in listed.stdout
    assert "household" in listed.stdout and "keysdoors-bare" in listed.stdout
    # A spawned worker finds it by name too (its sys.path is the parent's).
    tasks = registry.generate_tasks("keysdoors", "train", 3, seed=0)
    pool = EnvPool("keysdoors", functools.partial(registry.make_env, "keysdoors"), workers=1)
    try:
        remote = [pool.env(20) for _ in tasks]
        local = [registry.make_env("keysdoors") for _ in tasks]
        assert [r.observation for r in reset_all(remote, tasks)] == [r.observation for r in reset_all(local, tasks)]
        actions = ["go to " + t.spec["keys"][0][1] for t in tasks]
        assert [s.observation for s in step_all(remote, actions)] == [s.observation for s in step_all(local, actions)]
    finally:
        pool.close()


def _train(tmp_path, method: str, env: str, *extra: str):
    params = tmp_path / "params.yaml"
    if not params.exists():
        params.write_text(
            "seed: 2\ndata: {train_tasks: 12}\nrollout: {tasks_per_round: 4, group_size: 4, max_steps: 10}\n"
            "grpo: {epochs: 1, minibatches: 2}\neval: {episodes: 8}\n"
            "bank: {embedder: hash, similarity_threshold: 0.05}\n"
            f"train: {{runs_dir: {tmp_path / 'runs'}}}\n")
    args = ["train", "--method", method, "--env", env, "--rounds", "2", "--params", str(params), "--no-track", *extra]
    return CliRunner().invoke(app, args)


def test_a_new_environment_warm_starts_and_trains_with_grpo_edge_and_the_oracle_control(installed, tmp_path):
    runner = CliRunner()
    base = tmp_path / "base"
    result = runner.invoke(app, ["warmup", "--out", str(base), "--set", "warmup.env=keysdoors",
                                 "--set", "warmup.explore_episodes=20", "--set", "warmup.noisy_expert_episodes=20",
                                 "--set", "warmup.advised_episodes=20", "--set", "warmup.epochs=4",
                                 "--set", "warmup.eval_episodes=10"])
    assert result.exit_code == 0, result.output
    report = json.loads((base / "warmup.json").read_text())
    assert report["demonstration_states"] > 0 and "advised_success" in report  # it has an oracle
    for method in ("grpo", "edge", "edge-oracle-bank"):
        result = _train(tmp_path, method, "keysdoors", "--set", f"train.base_checkpoint={base}")
        assert result.exit_code == 0, f"{method}: {result.output}"
        assert "round 1: train plain" in result.output
    runs = tmp_path / "runs"
    oracle = pq.read_table(runs / "keysdoors-edge-oracle-bank-s2" / "round_000" / "rollouts.parquet")
    shown = set(oracle.column("experience").to_pylist()) - {None}
    assert shown and all("key" in e and "door" in e for e in shown), "the oracle control shows keysdoors' advice"
    entries = read_snapshot(runs / "keysdoors-edge-s2" / "round_001" / "bank.parquet")
    assert entries, "keysdoors' failure reader fills the bank"
    patterns = {e.signature.split("|")[2] for e in entries}
    assert patterns <= {"not_found", "not_unlocked", "not_opened"} and all(e.provenance for e in entries)
    assert all(e.key in {"red", "blue", "green", "yellow"} for e in entries)  # train's colours, the subject


def test_missing_parts_are_said_at_start_and_the_oracle_control_refuses(installed, tmp_path, caplog):
    assert not any(registry.knowledge("keysdoors-bare").has(p) for p in Knowledge.PARTS)
    with caplog.at_level(logging.WARNING):
        result = _train(tmp_path, "edge", "keysdoors-bare", "--set", "train.base_checkpoint=null")
    assert result.exit_code == 0, result.output
    assert "no failure reader (KNOWLEDGE.read_failure): no failure is read, so the bank stays empty" in caplog.text
    assert not read_snapshot(tmp_path / "runs" / "keysdoors-bare-edge-s2" / "round_001" / "bank.parquet")
    result = _train(tmp_path, "edge-oracle-bank", "keysdoors-bare", "--set", "train.base_checkpoint=null")
    assert result.exit_code == 2 and "has no oracle advice" in result.output
    assert not (tmp_path / "runs" / "keysdoors-bare-edge-oracle-bank-s2").exists()  # a corrected command starts clean
    with pytest.raises(ValueError, match="warmup.env 'keysdoors-bare': the environment has no demonstrators"):
        demonstrations(WarmupConfig(env="keysdoors-bare"), history_steps=1, seed=0)


def test_complete_blocks_need_the_task_stages_part(installed):
    from edge.bank.synthesis import missing_parts

    said = missing_parts("keysdoors", "template", block_rule="complete")
    assert any("KNOWLEDGE.task_stages" in line for line in said), said
    assert not any("task_stages" in line for line in missing_parts("keysdoors", "template"))
    assert not any("task_stages" in line for line in missing_parts("household", "template", block_rule="complete"))
    # A task type's steps once for the type need both parts; household has them.
    said = missing_parts("keysdoors", "template", subjects="seen-and-type-steps")
    assert any("KNOWLEDGE.type_step_guidance and name_subject" in line for line in said), said
    household = missing_parts("household", "template", subjects="seen-and-type-steps")
    assert not any("type_step" in line for line in household), household


def test_a_subject_missing_from_the_instruction_is_warned_about(installed, caplog):
    from helpers import played

    from edge.bank.synthesis import failures_by_signature
    from edge.envs.registry import make_env

    task = registry.generate_tasks("keysdoors", "train", 1, seed=0)[0]
    lost = played(make_env("keysdoors"), task, ["look"])
    knowledge = registry.knowledge("keysdoors")
    original = type(knowledge).read_failure
    try:
        type(knowledge).read_failure = lambda self, t: ("not_found", "key-" + t.task.spec["colour"])
        with caplog.at_level(logging.WARNING):
            failures_by_signature([lost])
    finally:
        type(knowledge).read_failure = original
    assert "does not occur in the instruction" in caplog.text


def test_length_normalised_scores_spread_an_untrained_model_over_the_actions(installed):
    # A fresh tiny model's summed log-probability favours the shortest action (one token, "look");
    # the mean per token does not. Counted over 8 tasks x 4 episodes x 10 steps.
    shortest = {}
    for score in ("sum", "mean"):
        params = parse_params({"seed": 0, "policy": {"action_score": score}})
        actor = Actor(load_policy(params.policy, seed=0, envs=["keysdoors"]))
        tasks = registry.generate_tasks("keysdoors", "train", 8, seed=0)
        steps = [s for t in rollout(actor, tasks, 4, seed=1, max_steps=10) for s in t.steps]
        shortest[score] = sum(s.decision.action in ("look", "inventory") for s in steps) / len(steps)
    assert shortest["sum"] > 0.8 and shortest["mean"] < 0.5, shortest


ENV_NAMES = ("household", "shop", "webshop", "alfworld")


def _code_words(path: Path) -> list[str]:
    """Identifiers and string constants of a module, without its comments and docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append(node.value)
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words.append(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            words.append(node.module)
    return words


def test_the_bank_guidance_and_warm_start_name_no_environment():
    files = [*sorted((ROOT / "edge" / "bank").glob("*.py")), ROOT / "edge" / "guidance.py", ROOT / "edge" / "warmup.py"]
    named = {(f.relative_to(ROOT).as_posix(), w) for f in files for w in _code_words(f)
             if any(env in w.lower() for env in ENV_NAMES)}
    assert not named
