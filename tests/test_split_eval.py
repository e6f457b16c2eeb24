"""A finished run's final policy evaluated afterwards on another split (edge.benchmarking.split_eval)."""

import json

import pytest
import torch

from edge.benchmarking import split_eval
from edge.benchmarking.split_eval import final_evaluation
from edge.config import parse_params
from edge.policy.model import load_policy
from edge.train import stage_seed, train
from tests.test_paired_evaluation import control_params


def retrieving_params(tmp_path, method):
    """control_params with a bank every evaluation task retrieves from (any entry is similar enough)."""
    recorded = control_params(tmp_path, method).model_dump(mode="json")
    recorded["bank"] |= {"similarity_threshold": -1.0, "key_must_match": False}
    return parse_params(recorded)


@pytest.mark.parametrize("method", ["edge"])
def test_the_runs_own_split_reproduces_its_last_evaluation_task_by_task(tmp_path, method):
    run = train(retrieving_params(tmp_path, method))
    last = json.loads((run.round_dir(1) / "eval.json").read_text())["test_seen"]
    again = final_evaluation(run.folder, "test_seen", 4)
    assert again["plain"]["won_by_task"] == last["plain"]["won_by_task"]
    assert again["with_bank"]["won_by_task"] == last["with_bank"]["won_by_task"]
    assert again["retrieved_share"] == last["retrieved_share"] > 0
    assert again["plain"]["success"] == last["plain"]["success"]


def test_another_split_is_evaluated_once_then_read_from_the_cache(tmp_path, monkeypatch):
    run = train(control_params(tmp_path, "grpo"))
    before = sorted(p.name for p in run.folder.rglob("*"))
    unseen = final_evaluation(run.folder, "test_unseen", 3, cache_dir=tmp_path / "cache")
    assert unseen["plain"]["episodes"] == 3 and "with_bank" not in unseen
    assert sorted(p.name for p in run.folder.rglob("*")) == before  # nothing written into the run

    def refuse(*args, **kwargs):
        raise AssertionError("evaluated again")

    monkeypatch.setattr("edge.train.evaluate_policy", refuse)
    assert final_evaluation(run.folder, "test_unseen", 3, cache_dir=tmp_path / "cache") == unseen
    # Another size is another evaluation.
    with pytest.raises(AssertionError, match="evaluated again"):
        final_evaluation(run.folder, "test_unseen", 2, cache_dir=tmp_path / "cache")


def test_an_unfinished_run_is_refused(tmp_path):
    run = train(control_params(tmp_path, "grpo", rounds=1))
    params = json.loads((run.folder / "params.json").read_text())
    params["train"]["rounds"] = 2  # planned for two rounds, one done
    (run.folder / "params.json").write_text(json.dumps(params))
    with pytest.raises(ValueError, match="not finished"):
        split_eval.final_evaluation(run.folder, "test_unseen", 3)


def test_the_table_pairs_each_configuration_with_grpo_task_by_task():
    from benchmark_scripts import load

    table = load("split_table")

    def result(won: list[bool]) -> dict:
        return {"success": sum(won) / len(won), "won_by_task": {f"t{i}": w for i, w in enumerate(won)}}

    grpo = {0: {"plain": result([True, False, False, False])}, 1: {"plain": result([True, True, False, False])}}
    ours = {s: {"plain": result([True, True, False, False]), "with_bank": result([True, True, True, False]),
                "retention": 2 / 3, "retrieved_share": 0.5} for s in (0, 1)}
    r = table.row("e19", ours, grpo)
    assert r["minus_grpo"]["per_seed"] == {"0": 0.25, "1": 0.0}
    assert r["minus_grpo"]["per_seed_tasks"]["0"]["mean"] == pytest.approx(0.25)
    assert r["with_bank_minus_plain"]["mean"] == pytest.approx(0.25)
    text = table.markdown({"e19": r | {"machine": "m"}}, "test_unseen", 4)
    assert "| e19 | 2 | 50.0% | 75.0% |" in text and "s0 +25.0, s1 +0.0" in text


def test_the_policy_after_an_earlier_round_reproduces_that_rounds_evaluation(tmp_path, monkeypatch):
    recorded = control_params(tmp_path, "edge-oracle-bank").model_dump(mode="json")
    recorded["eval"] |= {"every": 1, "intermediate_episodes": 4}  # round 0 evaluated as the last round is
    run = train(parse_params(recorded))
    first = json.loads((run.round_dir(0) / "eval.json").read_text())["test_seen"]
    again = final_evaluation(run.folder, "test_seen", 4, cache_dir=tmp_path / "cache", after_round=0)
    assert again["plain"] == first["plain"] and again["with_bank"] == first["with_bank"]
    last = final_evaluation(run.folder, "test_seen", 4, cache_dir=tmp_path / "cache")
    assert len(list((tmp_path / "cache").iterdir())) == 2  # the two rounds are kept apart
    assert last["plain"] == json.loads((run.round_dir(1) / "eval.json").read_text())["test_seen"]["plain"]
    with pytest.raises(ValueError, match="after_round 2 is not a round the run has done"):
        final_evaluation(run.folder, "test_seen", 4, after_round=2)
    edge = train(retrieving_params(tmp_path / "edge", "edge"))
    with pytest.raises(ValueError, match="only runs that keep no bank of their own"):
        final_evaluation(edge.folder, "test_seen", 4, after_round=0)
    # An untrained policy loses every episode in both rounds: which weights and stream were asked for is checked
    # where the evaluation is called.
    asked = []

    def record(run, actor, seed, **kwargs):
        asked.append((seed, [p.detach().clone() for p in actor.policy.model.parameters()]))
        return {"test_seen": last}

    monkeypatch.setattr("edge.train.evaluate_policy", record)
    final_evaluation(run.folder, "test_seen", 4, after_round=0)
    after_0 = load_policy(run.params.policy, checkpoint=run.round_dir(0) / "checkpoint", seed=run.params.seed,
                          envs=["household"])
    assert asked[0][0] == stage_seed(run.params.seed, 0, "evaluate") != stage_seed(run.params.seed, 1, "evaluate")
    assert all(torch.equal(a, b) for a, b in zip(asked[0][1], after_0.model.parameters()))
