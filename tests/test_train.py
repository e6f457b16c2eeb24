"""Training rounds: stage outputs, resume, and the `edge train` / `edge eval` commands."""

import gc
import json

from typer.testing import CliRunner

from edge.cli import app
from edge.config import parse_params
from edge.train import YOUNG_GC_THRESHOLD, Run, train


def tiny_params(tmp_path, **train):
    return parse_params({
        "seed": 3,
        "data": {"train_tasks": 20},
        "rollout": {"tasks_per_round": 2, "group_size": 3, "max_steps": 5},
        "grpo": {"epochs": 1, "minibatches": 2},
        "eval": {"episodes": 4},
        "train": {"rounds": 2, "base_checkpoint": None, "runs_dir": str(tmp_path / "runs"), **train},
    })


def test_rounds_write_their_stage_outputs(tmp_path):
    default = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        run = train(tiny_params(tmp_path))
        assert gc.get_threshold()[0] == YOUNG_GC_THRESHOLD  # training relaxes the collector (see train.py)
    finally:
        gc.set_threshold(*default)
    for k in (0, 1):
        d = run.round_dir(k)
        assert (d / "rollouts.parquet").exists() and (d / "checkpoint" / "trainer_state.pt").exists()
        assert (d / "checkpoint" / "config.json").exists() and (d / "eval.json").exists()
        metrics = json.loads((d / "train_metrics.json").read_text())
        assert metrics["round"] == k and 0 <= metrics["train_success_plain"] <= 1
    assert json.loads((run.folder / "eval_base.json").read_text())["test_seen"]["plain"]["episodes"] == 4


def test_rerun_skips_and_resume_recomputes_identically(tmp_path):
    params = tiny_params(tmp_path)
    run = train(params)
    r1 = run.round_dir(1)
    first = (r1 / "rollouts.parquet").read_bytes(), (r1 / "eval.json").read_text()
    stamp = (run.round_dir(0) / "rollouts.parquet").stat().st_mtime_ns
    # Lose round 1 entirely (as if killed before it), keep round 0.
    for f in r1.rglob("*"):
        if f.is_file():
            f.unlink()
    train(params)
    assert (run.round_dir(0) / "rollouts.parquet").stat().st_mtime_ns == stamp  # complete stage skipped
    again = (r1 / "rollouts.parquet").read_bytes(), (r1 / "eval.json").read_text()
    assert json.loads(again[1])["test_seen"] == json.loads(first[1])["test_seen"]
    assert again[0] == first[0]


def test_run_folder_refuses_changed_parameters(tmp_path):
    train(tiny_params(tmp_path))
    longer = tiny_params(tmp_path, rounds=3)
    assert Run.open(longer).folder.name == "household-grpo-s3"  # more rounds extend the same run
    changed = tiny_params(tmp_path)
    changed.grpo.lr = 0.5
    try:
        Run.open(changed)
        raise AssertionError("a run folder must not be resumed with other parameters")
    except ValueError as err:
        assert "grpo" in str(err)


def test_train_and_eval_commands(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(
        "seed: 1\ndata: {train_tasks: 10}\nrollout: {tasks_per_round: 2, group_size: 2, max_steps: 4}\n"
        f"grpo: {{epochs: 1}}\neval: {{episodes: 3}}\n"
        f"train: {{base_checkpoint: null, runs_dir: {tmp_path / 'runs'}}}\n")
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--method", "grpo", "--env", "household", "--rounds", "1", "--seed", "1",
                                 "--params", str(params)])
    assert result.exit_code == 0, result.output
    assert "round 0: train plain" in result.output
    checkpoint = tmp_path / "runs" / "household-grpo-s1" / "round_000" / "checkpoint"
    result = runner.invoke(app, ["eval", "--checkpoint", str(checkpoint), "--env", "household", "--split",
                                 "test_unseen", "--episodes", "3", "--advice", "--json", "--params", str(params)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["plain"]["episodes"] == 3 and "advised" in report
    result = runner.invoke(app, ["train", "--rounds", "1", "--params", str(params), "--set", "grpo.lr=-1"])
    assert result.exit_code == 2 and "grpo.lr" in result.output

    # `edge runs ls`: the run, finished; then as a killed run would leave it.
    listed = runner.invoke(app, ["runs", "ls", "--params", str(params), "--json"])
    assert listed.exit_code == 0, listed.output
    (run,) = json.loads(listed.stdout)
    assert (run["name"], run["method"], run["seed"], run["state"]) == ("household-grpo-s1", "grpo", 1, "finished")
    assert run["rounds_done"] == run["rounds_planned"] == 1 and run["plain"] is not None
    # As a run killed inside its update leaves it: the round's manifest has not sealed the stage.
    manifest = json.loads((checkpoint.parent / "manifest.json").read_text())
    del manifest["stages"]["distill"]
    (checkpoint.parent / "manifest.json").write_text(json.dumps(manifest))
    (run,) = json.loads(runner.invoke(app, ["runs", "ls", "--params", str(params), "--json"]).stdout)
    assert run["state"] == "stopped in round 0 before distill" and run["rounds_done"] == 0
    # `edge train --dry-run` prints the effective parameters and what would happen, and does nothing.
    dry = runner.invoke(app, ["train", "--method", "edge", "--rounds", "2", "--params", str(params), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "method: edge" in dry.output and "would start" in dry.output and "household-edge-s1" in dry.output
    assert not (tmp_path / "runs" / "household-edge-s1").exists()
    shown = runner.invoke(app, ["config", "show", "--params", str(params), "--section", "grpo",
                                "--set", "grpo.lr=0.01"])
    assert shown.exit_code == 0 and "lr: 0.01" in shown.output and "minibatches:" in shown.output
    assert "rollout" not in shown.output


def test_bank_commands_refuse_bad_arguments(tmp_path):
    runner = CliRunner()
    bad_status = runner.invoke(app, ["bank", "ls", "--run", str(tmp_path), "--status", "bogus"])
    assert bad_status.exit_code == 2 and "active, merged, pruned, revised" in bad_status.output
    reversed_rounds = runner.invoke(app, ["bank", "diff", "--run", str(tmp_path), "--from-round", "5",
                                          "--to-round", "2"])
    assert reversed_rounds.exit_code == 2 and "must be before" in reversed_rounds.output


def test_kl_reference_is_the_starting_model_in_every_round(tmp_path):
    import torch

    from edge.policy.model import load_policy, save_policy

    params = tiny_params(tmp_path, rounds=2)
    params.grpo.beta = 0.05
    run = train(params)
    # Make round 1's checkpoint clearly different from the start, as training would.
    saved = run.round_dir(1) / "checkpoint"
    moved = load_policy(params.policy, checkpoint=saved)
    with torch.no_grad():
        for p in moved.model.parameters():
            p.add_(0.1)
    save_policy(moved, saved)
    Run.open(params).seal(1, "distill", ["checkpoint/edge_manifest.json", "train_metrics.json"])  # as if trained so
    start, _ = Run.open(params).policy_for(0)
    later, _ = Run.open(params).policy_for(2)
    with later.reference() as ref:
        assert all(torch.equal(a, b) for a, b in zip(ref.parameters(), start.model.parameters()))
        assert not any(torch.equal(a, b) for a, b in zip(ref.parameters(), later.model.parameters()))


def test_base_evaluation_is_shared_between_methods_and_equals_a_run_of_its_own(tmp_path, monkeypatch):
    import edge.train as train_module

    own = json.loads((train(tiny_params(tmp_path, rounds=1, method="edge", run_name="own")).folder
                      / "eval_base.json").read_text())
    cache = tmp_path / "base-evals"
    calls = []
    real = train_module.plain_evaluation
    monkeypatch.setattr(train_module, "plain_evaluation", lambda *a, **k: calls.append(1) or real(*a, **k))
    bases = {}
    for method in ("grpo", "edge", "edge-no-prune"):
        params = tiny_params(tmp_path, rounds=1, method=method)
        params.eval.base_cache_dir = cache
        bases[method] = json.loads((train(params).folder / "eval_base.json").read_text())
    # Three methods, one evaluation of the base: the round-0 evaluations are the other calls.
    assert len(calls) == 1 + 3 and len(list(cache.glob("eval-base-*.json"))) == 1
    assert bases["grpo"]["test_seen"]["plain"] == own["test_seen"]["plain"] == bases["edge"]["test_seen"]["plain"]
    assert "with_bank" not in bases["grpo"]["test_seen"]
    assert bases["edge-no-prune"]["test_seen"] == own["test_seen"]  # empty bank: with bank = plain
    # Another seed is another evaluation.
    params = tiny_params(tmp_path, rounds=1)
    params.seed, params.eval.base_cache_dir = 4, cache
    train(params)
    assert len(list(cache.glob("eval-base-*.json"))) == 2


def test_wall_time_accumulates_over_invocations_including_an_interrupted_one(tmp_path):
    import pytest

    from edge.train import STAGES

    params = tiny_params(tmp_path, rounds=1)

    def interrupted(run, k):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(params, stages={"update_bank": interrupted})
    run = train(params)
    record = json.loads((run.folder / "wall_time.json").read_text())
    assert record["invocations"] == 2 and record["seconds"] > 0
    assert STAGES["update_bank"] is not interrupted  # the replacement was for that call only
