"""The `edge` command, run the way a user runs it."""

import json

from typer.testing import CliRunner

from edge.cli import app

runner = CliRunner()


def test_env_play_json_reports_every_field():
    result = runner.invoke(app, ["env", "play", "--env", "household", "--split", "test_unseen",
                                 "--policy", "expert", "--episodes", "12", "--seed", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["success_rate"] == 1.0 and report["episodes"] == 12
    assert report["mean_reward"] == 1.0 and report["mean_steps"] > 3
    assert report["env_steps_per_second"] > 0


def test_env_play_table_and_render():
    result = runner.invoke(app, ["env", "play", "--env", "shop", "--policy", "random", "--episodes", "5",
                                 "--render"])
    assert result.exit_code == 0, result.output
    assert "WebShop [SEP] Instruction:" in result.stdout
    assert "env steps/s" in result.stdout and "success" in result.stdout


def test_env_play_bad_name_is_a_clear_error():
    result = runner.invoke(app, ["env", "play", "--env", "webshopp"])
    assert result.exit_code == 2
    assert "unknown environment 'webshopp'" in result.output and "household" in result.output


def test_data_prepare_reads_params(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(f"seed: 1\ndata:\n  envs: [household]\n  train_tasks: 3\n  test_seen_tasks: 2\n"
                      f"  test_unseen_tasks: 2\n  out_dir: {tmp_path / 'tasks'}\n")
    result = runner.invoke(app, ["data", "prepare", "--params", str(params)])
    assert result.exit_code == 0, result.output
    assert len((tmp_path / "tasks" / "household" / "train.jsonl").read_text().splitlines()) == 3
    params.write_text("data:\n  train_tasks: -1\n")
    result = runner.invoke(app, ["data", "prepare", "--params", str(params)])
    assert result.exit_code == 2 and "data.train_tasks" in result.output
