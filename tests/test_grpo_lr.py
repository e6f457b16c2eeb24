"""benchmarks/grpo_lr.py: which series it pairs, and that each pair is ours minus theirs by seed and task."""

import json

import pytest
from benchmark_scripts import load


@pytest.fixture()
def grpo_lr():
    return load("grpo_lr")


def run(plain: float, won: list[bool], lr: float, with_advice: float | None = None) -> dict:
    final = {"test_seen_plain": plain} | ({"test_seen_with_bank": with_advice} if with_advice is not None else {})
    return {"final": final, "final_tasks": {"test_seen": {"plain": {f"t{i}": w for i, w in enumerate(won)}}}, "lr": lr}


def test_the_rate_and_the_leads_are_paired_by_seed(grpo_lr):
    seeds = [0, 1]
    series = {
        "GRPO": {0: run(0.25, [False, True, False, False], 1e-3), 1: run(0.5, [True, True, False, False], 1e-3)},
        "oracle (o26)": {0: run(0.5, [True, True, False, False], 1e-3, 0.75),
                         1: run(0.5, [True, False, True, False], 1e-3, 0.5)},
        "GRPO, lr 0.002": {0: run(0.5, [True, True, False, False], 2e-3),
                           1: run(0.75, [True, True, True, False], 2e-3)},
        "oracle (o26), lr 0.002": {0: run(0.5, [True, False, True, False], 2e-3, 1.0),
                                   1: run(1.0, [True] * 4, 2e-3, 1.0)},
    }
    out = grpo_lr.compare(series, seeds)
    assert out["series"]["GRPO"] == {"lr": [1e-3], "plain": pytest.approx(0.375), "with_advice": None}
    assert out["series"]["oracle (o26), lr 0.002"]["with_advice"] == pytest.approx(1.0)
    pairs = {(p["ours"], p["theirs"]): p["plain"] for p in out["pairs"]}
    assert list(pairs) == [("oracle (o26)", "GRPO"), ("GRPO, lr 0.002", "GRPO"),
                           ("oracle (o26), lr 0.002", "GRPO, lr 0.002"), ("oracle (o26), lr 0.002", "oracle (o26)")]
    # A rate at which only GRPO ran: its effect on GRPO, and no lead.
    assert grpo_lr.pairs_of(["GRPO", "oracle (o26)", "GRPO, lr 0.0005"]) == [("oracle (o26)", "GRPO"),
                                                                           ("GRPO, lr 0.0005", "GRPO")]
    rate = pairs[("GRPO, lr 0.002", "GRPO")]
    assert rate["per_seed"] == {"0": pytest.approx(0.25), "1": pytest.approx(0.25)}
    assert rate["mean"] == pytest.approx(0.25)
    # Within a seed the tasks are paired: seed 0's oracle at the new rate wins t2, loses t1, against GRPO's t0, t1.
    lead = pairs[("oracle (o26), lr 0.002", "GRPO, lr 0.002")]
    assert lead["per_seed_tasks"]["0"]["mean"] == pytest.approx(0.0)
    assert lead["per_seed"]["1"] == pytest.approx(0.25)


def test_a_run_that_differs_in_more_than_the_rate_is_refused_naming_the_field(grpo_lr, tmp_path):
    def params(folder, **changes):
        base = {"seed": 0, "train": {"method": "grpo", "runs_dir": "a", "run_name": "x"}, "grpo": {"lr": 1e-3},
                "bank": {"rho": 0.5}, "distill": {"coef": 1.0}, "rollout": {"group_size": 8}}
        for key, value in changes.items():
            section, field = key.split("__")
            base[section] = base[section] | {field: value}
        folder.mkdir()
        (folder / "params.json").write_text(json.dumps(base))
        return folder

    def check(run, reference):
        grpo_lr.check_only_the_rate_differs(run, grpo_lr.recorded(run), reference, grpo_lr.recorded(reference))

    reference = params(tmp_path / "ref")
    # The rate, the folder and fields GRPO never reads may differ.
    check(params(tmp_path / "ok", grpo__lr=2e-3, train__runs_dir="b", bank__rho=0.25), reference)
    with pytest.raises(ValueError, match=r"differs from .* in more than grpo.lr: rollout.group_size \(4 against 8\)"):
        check(params(tmp_path / "bad", grpo__lr=2e-3, rollout__group_size=4), reference)
    oracle = params(tmp_path / "oracle_ref", train__method="edge-oracle-bank")
    with pytest.raises(ValueError, match="bank.rho"):
        check(params(tmp_path / "oracle", train__method="edge-oracle-bank", bank__rho=0.25), oracle)
