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


def test_summary_aggregates_over_seeds_with_paired_intervals(tmp_path):
    from edge.benchmarking.stats import over_seeds

    runs = [{"method": m, "seed": s, "test_seen_plain": v, "test_seen_base_plain": 0.1}
            for m, values in (("grpo", (0.30, 0.40, 0.50)), ("edge", (0.35, 0.48, 0.52))) for s, v in enumerate(values)]
    seeds = over_seeds(runs)
    assert seeds["grpo"]["seeds"] == [0, 1, 2] and abs(seeds["grpo"]["mean"]["mean"] - 0.40) < 1e-12
    d = seeds["edge"]["minus_grpo"]
    assert abs(d["mean"] - 0.05) < 1e-12 and d["low"] < 0.05 < d["high"] and d["n"] == 3
    assert seeds["edge"]["p"] == 0.25  # three positive differences: 2 of 8 sign flips are as extreme
    compare = tmp_path / "compare.json"
    compare.write_text(json.dumps({"runs": runs}))
    result = runner.invoke(app, ["summary", str(compare)])
    assert result.exit_code == 0, result.output
    assert "over seeds" in result.output and "+5.0 [" in result.output


def test_eval_with_a_bank_retrieves_as_its_run_did(tmp_path):
    """`edge eval --bank runs/<run>/bank` reads the bank with the run's own bank section (params.json beside
    it), so a bank of steps written once per task type shows them as training did; without the run's record,
    the project's section (--params)."""
    from edge.bank.embedder import HashEmbedder
    from edge.bank.entry import BankEntry
    from edge.bank.store import ExperienceBank
    from edge.cli import _bank_retriever
    from edge.config import BankConfig, EdgeParams
    from edge.envs.base import EVERY_SUBJECT
    from edge.envs.household import generate_tasks

    heat = next(t for t in generate_tasks("test_seen", 100, seed=0) if t.task_type == "pick_heat_then_place_in_recep")
    run = tmp_path / "run"
    bank = ExperienceBank.open(run / "bank", HashEmbedder())
    bank.add([BankEntry(id="g000001", text="try : heat the object with the microwave before you put it in place .",
                        kind="try", task_type=heat.task_type, signature=f"{heat.task_type}|*|no_transform",
                        key=EVERY_SUBJECT)])
    (run / "bank_versions.json").write_text(json.dumps({"0": bank.version()}))
    project = EdgeParams(bank=BankConfig(embedder="hash"))
    retriever, settings = _bank_retriever(run / "bank", project)
    assert retriever(heat) is None and settings == project.bank  # the spec's settings show no type steps
    recorded = project.model_copy(update={"bank": BankConfig(embedder="hash", grain="knowledge",
                                                             subjects="seen-and-type-steps",
                                                             block_follows_progress=True)})
    (run / "params.json").write_text(recorded.model_dump_json())
    retriever, settings = _bank_retriever(run / "bank", project)
    assert settings.block_follows_progress  # `edge eval --bank` shows the block as the run did
    found = retriever(heat)
    obj = heat.spec["goal"]["object"]
    assert found.text == f"try : heat the {obj} with the microwave before you put it in place ."
    assert found.entry_ids == ["g000001"]
