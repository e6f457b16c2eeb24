"""benchmarks/handoff.py: which runs it pairs, and the training episodes it reads round by round."""

import json
from pathlib import Path

import pytest
from benchmark_scripts import load


@pytest.fixture()
def handoff():
    return load("handoff")


def run_with_rounds(folder: Path, plain: list[float], conditioned: list[float | None], rho: float = 0.5) -> Path:
    handed = folder.parent.name == "handed"
    folder.mkdir(parents=True)
    (folder / "params.json").write_text(json.dumps({
        "train": {"method": "grpo" if folder.parent.name == "grpo" else "edge-oracle-bank"},
        "bank": {"rho_schedule": "handoff" if handed else "constant", "handoff_round": 1}}))
    for k, (p, c) in enumerate(zip(plain, conditioned)):
        (folder / f"round_{k:03d}").mkdir()
        (folder / f"round_{k:03d}" / "train_metrics.json").write_text(
            json.dumps({"round": k, "train_success_plain": p, "train_success_conditioned": c,
                        "collect_seconds": 50.0, "update_seconds": 10.0, "rho": rho if k == 0 else 0.0}))
    return folder


def test_the_sweep_rows_hand_off_where_the_script_says(handoff):
    for row in ("o26", "e24"):
        overrides = handoff.sweep.CONFIGS[row][1]
        assert "bank.rho_schedule=handoff" in overrides
        assert f"bank.handoff_round={handoff.HANDOFF_ROUND}" in overrides
    # o26 is o23 with the schedule, nothing else.
    assert handoff.sweep.CONFIGS["o26"][1][:-2] == handoff.sweep.CONFIGS["o23"][1]
    assert handoff.sweep.CONFIGS["e24"][1][:-2] == handoff.sweep.CONFIGS["e22"][1]


def test_each_handed_off_series_is_paired_with_grpo_and_with_the_series_it_hands_off(handoff, tmp_path, monkeypatch):
    finals = {"grpo": 0.40, "scaffolded": 0.50, "handed": 0.55, "unfinished": 0.9}
    folders = {name: {s: run_with_rounds(tmp_path / name / str(s), [0.1 + s / 10, 0.3],
                                         [None, None] if name == "grpo" else [0.4, None if name == "handed" else 0.5])
                      for s in (0, 1)} for name in finals}
    monkeypatch.setattr(handoff, "WORLDS", {"household": {
        "GRPO": (folders["grpo"].get, None), "scaffold": (folders["scaffolded"].get, None),
        "other, unfinished": (folders["unfinished"].get, None),
        "scaffold handed off": (folders["handed"].get, "scaffold")}})

    def fake_run(folder: Path, splits):
        name = folder.parent.name
        tasks = {"plain": {"t0": True, "t1": name != "grpo"}, "with_bank": {"t0": True, "t1": name == "scaffolded"}}
        with_bank = None if name == "grpo" else finals[name] + 0.1
        return {"final": {"test_seen_plain": finals[name], "test_seen_with_bank": with_bank},
                "final_tasks": {"test_seen": tasks}}

    monkeypatch.setattr(handoff, "read_run", fake_run)
    asked = []

    def fake_after_round(folder: Path, k: int):  # at the hand-off the scaffold led GRPO by 0.2
        asked.append((folder.parent.name, k))
        run = fake_run(folder, None)
        run["final"]["test_seen_plain"] = {"grpo": 0.2, "handed": 0.4}[folder.parent.name]
        return run

    monkeypatch.setattr(handoff, "after_round", fake_after_round)
    monkeypatch.setattr(handoff.shared, "finished", lambda folder: "unfinished" not in str(folder))
    rows = handoff.report([0, 1])["household"]
    assert list(rows) == ["GRPO", "scaffold", "scaffold handed off"]  # the unfinished series is left out
    assert "minus_grpo" not in rows["GRPO"] and "with_bank" not in rows["GRPO"]
    assert rows["scaffold"]["minus_grpo"]["mean"] == pytest.approx(0.10)
    assert "minus_scaffolded" not in rows["scaffold"]
    handed = rows["scaffold handed off"]
    assert handed["minus_scaffolded"]["mean"] == pytest.approx(0.05)
    assert handed["with_bank_minus_scaffolded"]["mean"] == pytest.approx(0.05)
    # Where it stood at the hand-off: its policy and GRPO's after round 0 (handoff_round 1), paired.
    assert sorted(asked) == [("grpo", 0), ("grpo", 0), ("handed", 0), ("handed", 0)]
    assert handed["at_handoff"]["after_round"] == 0 and handed["at_handoff"]["minus_grpo"]["mean"] == pytest.approx(0.2)
    assert rows["scaffold"].get("at_handoff") is None
    # Round by round, the mean over seeds; the conditioned members' only where every seed had some.
    assert [r["plain"] for r in handed["rounds"]] == pytest.approx([0.15, 0.3])
    assert [r["conditioned"] for r in handed["rounds"]] == [pytest.approx(0.4), None]
    assert [r["conditioned"] for r in rows["GRPO"]["rounds"]] == [None, None]
    assert handed["seconds_a_round"] == {"scaffolded": pytest.approx(60.0), "plain": pytest.approx(60.0)}
    assert rows["GRPO"]["seconds_a_round"]["scaffolded"] is None
    table = handoff.markdown({"seeds": [0, 1], "machine": "test", "command": "x", "worlds": {"household": rows}})
    assert "| scaffold handed off | 15.0% (40.0%) | 30.0% |" in table
    assert "| scaffold handed off | 0 | 40.0% / 65.0% | 20.0% | +20.0 [+20.0, +20.0] (p 0.500) |" in table


def test_a_round_without_plain_members_has_no_plain_success(handoff, tmp_path):
    every = run_with_rounds(tmp_path / "every" / "0", [0.0, 0.3], [0.6, None], rho=1.0)
    assert [r["plain"] for r in handoff.round_metrics(every)] == [None, 0.3]
    half = run_with_rounds(tmp_path / "half" / "0", [0.0, 0.3], [0.6, None])
    assert [r["plain"] for r in handoff.round_metrics(half)] == [0.0, 0.3]
