"""bank.bootstrap: a bank whose first entries are written from the warm start's plain demonstrations."""

import json

import pytest

from edge.bank.embedder import HashEmbedder
from edge.bank.seeding import bootstrap_bank
from edge.bank.store import ExperienceBank
from edge.bank.synthesis import round_evidence
from edge.config import BankConfig, WarmupConfig, parse_params
from edge.rollout import read_rollouts
from edge.train import BOOTSTRAP_RECORD, Run, train
from edge.warmup import demonstration_plan, demonstration_trajectories, demonstrations, demonstrators

SMALL = {"explore_episodes": 12, "noisy_expert_episodes": 8, "advised_episodes": 6}


def test_the_trajectories_replay_the_warm_start_s_plain_demonstrations():
    cfg = WarmupConfig(**SMALL)
    plan = demonstration_plan(cfg, 5, demonstrators(cfg))
    assert [kind for kind, _, _ in plan] == ["explorer"] * 12 + ["competent"] * 8 + ["advised"] * 6
    trajectories = demonstration_trajectories(cfg, 5)
    assert len(trajectories) == 20 and all(not t.conditioned and t.experience is None for t in trajectories)
    assert [t.task.task_id for t in trajectories] == [task.task_id for _, task, _ in plan[:20]]
    # The warm start clones the same episodes: its (state, action) pairs begin with the kept trajectories'
    # steps, explorer then competent, and go on with the advised ones (the household keeps the explorer's
    # lost episodes too).
    pairs = demonstrations(cfg, history_steps=0, seed=5)
    keep = demonstrators(cfg).keep_explorer_failures
    kept = [s for i, t in enumerate(trajectories) if t.won or (i < 12 and keep) for s in t.steps]
    assert len(pairs) > len(kept) > 0
    assert [(s.observation, a) for s, a in pairs[:len(kept)]] == [(s.observation, s.decision.action) for s in kept]
    assert all(s.experience is None for s, _ in pairs[:len(kept)]) and pairs[len(kept)][0].experience is not None
    assert any(t.won for t in trajectories[12:])  # the competent agent wins: evidence of where objects are taken


def test_bootstrap_writes_the_entries_a_round_would_from_the_same_episodes(tmp_path):
    cfg = BankConfig(embedder="hash", grain="knowledge", subjects="seen-and-type-steps", evidence="accumulated",
                     revise=True)
    trajectories = demonstration_trajectories(WarmupConfig(**SMALL), 5)
    bank = ExperienceBank.open(tmp_path / "bank", HashEmbedder())
    step = bootstrap_bank(bank, trajectories, cfg)
    active = bank.all("active")
    assert step["episodes"] == 20 and step["won"] == sum(t.won for t in trajectories)
    assert len(active) > 0 and {e["id"] for e in step["added"]} == {e.id for e in active}
    assert all(e.created_round == 0 for e in active)
    # What objects' places were written from: the sightings and the competent agent's takes.
    evidence = step["evidence"]["household"]
    assert evidence["seen"] and evidence["taken"] and evidence["won_steps"]
    with pytest.raises(ValueError, match="bootstrapped once"):
        bootstrap_bank(bank, trajectories, cfg)


def tiny_bootstrapped(tmp_path, **bank):
    return parse_params({
        "seed": 3, "data": {"train_tasks": 20}, "warmup": SMALL,
        "rollout": {"tasks_per_round": 4, "group_size": 4, "max_steps": 8},
        "grpo": {"epochs": 1, "minibatches": 2}, "eval": {"episodes": 4},
        "bank": {"embedder": "hash", "grain": "knowledge", "subjects": "seen-and-type-steps", "evidence": "accumulated",
                 "similarity_threshold": -1.0, "bootstrap": "demonstrations", **bank},
        "train": {"rounds": 1, "method": "edge", "base_checkpoint": None, "runs_dir": str(tmp_path / "runs")},
    })


def test_a_bootstrapped_run_shows_the_written_entries_in_round_0_and_accumulates_on_their_evidence(tmp_path):
    run = train(tiny_bootstrapped(tmp_path))
    record = json.loads((run.folder / BOOTSTRAP_RECORD).read_text())
    first = run.bank().checkout(run.bank_versions()[-1])  # the bank round 0 collected with
    assert record["added"] and sorted(e.id for e in first) == sorted(e["id"] for e in record["added"])
    rollouts = read_rollouts(run.round_dir(0) / "rollouts.parquet")
    shown = [t for t in rollouts if t.conditioned]
    assert shown and all(t.experience and set(t.experience.entry_ids) <= {e.id for e in first} for t in shown)
    # Round 0's evidence is the demonstrations' with its own rollouts' added, not its rollouts' alone.
    evidence = run.read_json(0, "evidence.json")
    assert evidence == round_evidence(rollouts, record["evidence"]) != round_evidence(rollouts, {})
    assert evidence["household"]["taken"]
    run.close()


def test_bootstrap_is_refused_beside_a_seed_file_or_for_another_environment(tmp_path):
    with pytest.raises(ValueError, match="bank.seed_file .* and bank.bootstrap .* both"):
        BankConfig(seed_file="data/seeds/household_true_steps.jsonl", bootstrap="demonstrations")
    params = tiny_bootstrapped(tmp_path)
    params = params.model_copy(update={"warmup": params.warmup.model_copy(update={"env": "shop"})})
    with pytest.raises(ValueError, match="warmup.env's demonstrations \\('shop'\\), not train.env's"):
        Run.check(params)
