"""benchmarks/planted_entries.py: each planted entry's fate, read from a real seeded run."""

import json
from pathlib import Path

import pytest
from benchmark_scripts import load

from edge.config import parse_params
from edge.train import train

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"


@pytest.fixture(scope="module")
def script():
    return load("planted_entries")


def seeded_run(tmp_path, distill=None, **prune):
    return train(parse_params({
        "seed": 3, "data": {"train_tasks": 40},
        "rollout": {"tasks_per_round": 6, "group_size": 4, "max_steps": 8},
        "grpo": {"epochs": 1, "minibatches": 2}, "eval": {"episodes": 4},
        "bank": {"embedder": "hash", "grain": "knowledge", "subjects": "seen-and-type-steps",
                 "similarity_threshold": -1.0, "seed_file": str(SEEDS / "household_false_steps.jsonl"),
                 "prune": prune},
        "train": {"rounds": 3, "method": "edge", "base_checkpoint": None, "runs_dir": str(tmp_path / "runs")},
        "distill": distill or {},
    }))


def test_an_entry_pruned_once_used_leaves_in_the_round_of_its_first_groups(script, tmp_path):
    # Every entry used once with utility <= 1 is "not helping": a planted entry leaves the round it is first shown.
    # Distillation off (it does not touch the bank): nothing is distilled, under a planted entry or not.
    run = seeded_run(tmp_path, distill={"coef": 0.0, "gate": "retrieved"}, min_uses=1, min_utility=1.0,
                     rules=["not_helping"])
    assert script.planted_distillation(run.folder)["total"]["states"] == 0
    fates = script.entry_fates(run.folder)
    assert set(fates) == {"g000001", "g000002", "g000003"}
    shown = {i: f for i, f in fates.items() if any(f["groups"])}
    assert shown, "no planted entry was shown in three rounds of six tasks: make the run longer"
    for fate in shown.values():
        first = next(k for k, n in enumerate(fate["groups"]) if n)
        assert (fate["left_round"], fate["reason"]) == (first, "not_helping")
        assert fate["uses"] == fate["groups"][first] and sum(fate["groups"]) == fate["groups"][first]
        assert len(fate["deltas"]) == fate["uses"]
    for fate in fates.values():
        if not any(fate["groups"]):
            assert fate["left_round"] is None and fate["delta_mean"] is None
    summary = script.fate_summary({3: fates})
    assert sum(s["left"] for s in summary.values()) == len(shown)
    assert all(s["reasons"] == ({"not_helping": 1} if s["left"] else {}) for s in summary.values())
    assert all(f["lifted"] is None for f in fates.values())  # only an internalized label is checked for a lift
    # After k rounds, the entries first shown in an earlier round are gone.
    first_shown = [next((k for k, n in enumerate(f["groups"]) if n), None) for f in fates.values()]
    assert script.still_active({3: fates}) == [sum(k is None or k >= done for k in first_shown) / 3
                                               for done in range(4)]
    assert script.still_active({3: fates})[-1] == 1 - len(shown) / 3


def test_an_entry_nothing_prunes_stays_and_blocks_the_type_s_own_entry(script, tmp_path):
    # Distilled wherever a block was shown (weight 1): the tiny run's groups rarely have Delta > 0.
    run = seeded_run(tmp_path, distill={"gate": "retrieved"}, rules=["size_cap"])
    fates = script.entry_fates(run.folder)
    assert all(f["left_round"] is None for f in fates.values())
    assert not any(f["own_entry_at_end"] for f in fates.values())  # the planted entry covers its signature
    assert sum(sum(f["groups"]) for f in fates.values()) == sum(f["uses"] for f in fates.values())
    assert script.still_active({0: fates, 1: fates}) == [1.0] * 4
    result = {"seeds": [0, 1], "configs": {"grpo": {}, "e27": {"still_active": [1.0, 1.0, 0.5, 0.5]}}}
    (figure,) = script.survival_figure(result, tmp_path, "planted")
    assert figure == tmp_path / "planted_still_active.png" and figure.read_bytes()[:4] == b"\x89PNG"
    # The distilled states rebuilt from scores and rollouts are the ones the update counted, round by round.
    distilled = script.planted_distillation(run.folder)
    counted = [json.loads((run.folder / f"round_{k:03d}" / "train_metrics.json").read_text())["distill_samples"]
               for k in range(3)]
    assert [r["states"] for r in distilled["rounds"]] == counted
    total = distilled["total"]
    assert total["planted_states"] > 0, "nothing distilled under a planted entry: make the run longer"
    assert total["groups_distilled"] <= total["groups_shown"] == sum(sum(f["groups"]) for f in fates.values())
    assert total["planted_weight"] == total["planted_states"] <= total["states"] == total["weight"]  # weight 1
    summary = script.distillation_summary({0: distilled, 1: distilled})
    assert summary["groups_shown"] == 2 * total["groups_shown"]
    assert summary["planted_weight_per_run"] == total["planted_weight"]


def test_an_internalized_label_without_the_lift_is_counted_apart(script):
    fate = dict(task_type="pick_heat", left_round=3, groups=[1, 1, 1, 1], deltas=[0.0] * 4, uses=4, utility=0.0,
                own_entry_at_end=False, own_object_entries_at_end=0)
    fates = {0: {"g1": fate | {"reason": "internalized", "lifted": False}},
             1: {"g1": fate | {"reason": "internalized", "lifted": True}},
             2: {"g1": fate | {"reason": "not_helping", "lifted": None}},
             3: {"g1": fate | {"reason": "not_helping", "lifted": False}}}
    assert script.fate_summary(fates)["pick_heat"]["reasons"] == {
        "internalized without a lift": 1, "internalized": 1, "not_helping": 1, "not_helping: level, no lift": 1}
    assert script.still_active({}) == []


def test_lift_evidence_reads_the_label_the_run_gave(script):
    from dataclasses import replace

    from edge.bank.entry import BankEntry
    from edge.bank.pruning import PruneRules

    credit = PruneRules()
    lift = replace(credit, internalized_needs="lift")
    never_lifted = BankEntry(id="g1", text="t", kind="try", task_type="t", signature="t|x|y", uses=8,
                             utility=0.1, positive_credit=0.5, history_rounds=[0, 1, 2, 3],
                             history_success_plain=[0.0] * 4, history_success_conditioned=[0.5, 0.0, 0.0, 0.0],
                             status="pruned", prune_reason="internalized")
    assert script.lift_evidence(never_lifted, credit, lift) is False
    relabelled = replace(never_lifted, prune_reason="not_helping")
    assert script.lift_evidence(relabelled, lift, lift) is False  # utility 0.1 > 0: only the relabel removes it
    assert script.lift_evidence(relabelled, credit, lift) is None  # under credit, not_helping is the utility test
    assert script.lift_evidence(replace(relabelled, utility=-0.1), lift, lift) is None
    absorbed = replace(never_lifted, history_success_plain=[0.0, 0.5, 0.5, 0.5],
                       history_success_conditioned=[0.5, 0.5, 0.5, 0.5])
    assert script.lift_evidence(absorbed, credit, lift) is True


def test_planting_costs_pair_each_planted_row_with_its_unplanted_control(script):
    def run(plain, with_bank):
        tasks = {"plain": {"t0": float(plain > 0.5), "t1": 0.0}, "with_bank": {"t0": 1.0, "t1": float(with_bank > 0.5)}}
        return {"final": {"test_seen_plain": plain, "test_seen_with_bank": with_bank},
                "final_tasks": {"test_seen": tasks}}

    seeds = [0, 1, 2]
    # Planting costs 4 points plain with distillation on (e27 - e26), 1 point with it off (e36 - e37).
    runs = {"e26": {s: run(0.50 + s / 100, 0.55) for s in seeds}, "e27": {s: run(0.46 + s / 100, 0.45) for s in seeds},
            "e37": {s: run(0.48, 0.50) for s in seeds}, "e36": {s: run(0.47, 0.49) for s in seeds},
            "e32": {s: run(0.40, 0.40) for s in seeds}}  # e31, its control, did not run: no pair
    costs = script.planting_costs(runs, seeds)
    assert list(costs["pairs"]) == ["e27", "e36"]
    assert costs["pairs"]["e27"]["control"] == "e26"
    assert costs["pairs"]["e27"]["plain"]["mean"] == pytest.approx(-0.04)
    assert costs["pairs"]["e27"]["with_bank"]["mean"] == pytest.approx(-0.10)
    assert costs["pairs"]["e36"]["plain"]["mean"] == pytest.approx(-0.01)
    assert costs["pairs"]["e36"]["minus_first"]["mean"] == pytest.approx(0.03)  # what the distillation carries
    assert "minus_first" not in costs["pairs"]["e27"]
    del runs["e26"]
    assert "minus_first" not in script.planting_costs(runs, seeds)["pairs"]["e36"]
