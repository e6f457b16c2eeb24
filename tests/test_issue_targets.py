"""benchmarks/issue_targets.py reads the issues' targets off the sweep's tables: what it says is met follows
from the figures, rows compared with different GRPO runs are refused, and a missing row names its file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import issue_targets  # noqa: E402

SEEDS = [0, 1, 2, 3, 4]


def sweep_row(plain, with_advice, grpo):
    """A row as benchmarks/internalization_sweep.py writes it (the fields the targets read)."""
    return {"seeds": SEEDS, "plain": {str(s): p for s, p in zip(SEEDS, plain)},
            "with_advice": {str(s): w for s, w in zip(SEEDS, with_advice)},
            "retention": {str(s): p / w for s, p, w in zip(SEEDS, plain, with_advice)},
            "grpo": {str(s): g for s, g in zip(SEEDS, grpo)}}


def split_row(plain, with_bank, grpo):
    """A row as benchmarks/split_table.py writes it: GRPO's success only inside the paired difference."""
    return {"seeds": SEEDS, "plain": {str(s): p for s, p in zip(SEEDS, plain)},
            "with_bank": {str(s): w for s, w in zip(SEEDS, with_bank)},
            "retention": {str(s): p / w for s, p, w in zip(SEEDS, plain, with_bank)},
            "minus_grpo": {"per_seed": {str(s): p - g for s, p, g in zip(SEEDS, plain, grpo)}}}


GRPO = [0.40, 0.42, 0.44, 0.46, 0.48]


def write_tables(folder: Path, edge_plain, edge_with, oracle_plain, oracle_with, oracle_grpo=GRPO):
    (folder / "internalization.json").write_text(json.dumps({
        "eX": sweep_row(edge_plain, edge_with, GRPO), "oX": sweep_row(oracle_plain, oracle_with, oracle_grpo)}))
    (folder / "split_test_unseen.json").write_text(json.dumps({
        "eX": split_row(edge_plain, edge_with, GRPO), "oX": split_row(oracle_plain, oracle_with, oracle_grpo)}))


def targets(tmp_path, monkeypatch, *figures, **kwargs):
    write_tables(tmp_path, *figures, **kwargs)
    monkeypatch.setattr(issue_targets, "RESULTS", tmp_path)
    found = issue_targets.tables("eX", "oX", ["test_seen", "test_unseen"])
    return {split: issue_targets.split_targets(e, o, split) for split, (e, o) in found.items()}


def test_targets_met_when_the_figures_clear_them(tmp_path, monkeypatch):
    # EDGE +9 to +11 over GRPO on every seed (interval above zero), the oracle +12 to +14; EDGE keeps 98%.
    edge = [g + d for g, d in zip(GRPO, [0.09, 0.10, 0.11, 0.10, 0.09])]
    oracle = [g + d for g, d in zip(GRPO, [0.12, 0.13, 0.14, 0.13, 0.12])]
    result = targets(tmp_path, monkeypatch, edge, [p / 0.98 for p in edge], oracle, [p / 0.92 for p in oracle])
    for split in ("test_seen", "test_unseen"):
        r = result[split]
        assert r["edge"]["minus_grpo"]["mean"] == pytest.approx(0.098)
        assert r["edge"]["share_of_oracle_gain"] == pytest.approx(0.098 / 0.128)
        assert r["edge"]["retention"] == pytest.approx(0.98)
        assert all(r["met"].values()), r["met"]
    assert "issue 14: with the advice ≥ 52.0%" in result["test_seen"]["met"]
    assert "issue 14: with the advice ≥ 52.0%" not in result["test_unseen"]["met"]
    assert "oracle_all_seeds" not in result["test_seen"]  # the rows have the same seeds


def test_an_oracle_row_with_more_seeds_is_read_on_the_shared_ones_and_also_whole(tmp_path, monkeypatch):
    edge = [g + 0.05 for g in GRPO]
    oracle = [g + 0.10 for g in GRPO]
    write_tables(tmp_path, edge, edge, oracle, oracle)
    table = json.loads((tmp_path / "internalization.json").read_text())
    table["oX"]["seeds"].append(5)  # a sixth seed, 20 points ahead, only in the oracle's row
    for field, value in (("plain", 0.70), ("with_advice", 0.70), ("retention", 1.0), ("grpo", 0.50)):
        table["oX"][field]["5"] = value
    (tmp_path / "internalization.json").write_text(json.dumps(table))
    monkeypatch.setattr(issue_targets, "RESULTS", tmp_path)
    (e, o), = issue_targets.tables("eX", "oX", ["test_seen"]).values()
    r = issue_targets.split_targets(e, o, "test_seen")
    assert r["seeds"] == SEEDS
    assert r["oracle"]["minus_grpo"]["mean"] == pytest.approx(0.10)
    assert r["oracle_all_seeds"]["seeds"] == [*SEEDS, 5]
    assert r["oracle_all_seeds"]["minus_grpo"]["mean"] == pytest.approx((5 * 0.10 + 0.20) / 6)


def test_targets_not_met_say_which(tmp_path, monkeypatch):
    # EDGE +8 on average but one seed far below (interval crosses zero); retention 90%; the oracle only +5.
    edge = [g + d for g, d in zip(GRPO, [0.25, 0.10, 0.05, -0.04, 0.04])]
    oracle = [g + 0.05 for g in GRPO]
    met = targets(tmp_path, monkeypatch, edge, [p / 0.90 for p in edge], oracle, [p / 0.95 for p in oracle])
    met = met["test_seen"]["met"]
    assert not met["issue 16: EDGE − GRPO ≥ +8, interval above 0"]
    assert not met["issue 16: retention ≥ 96%"]
    assert met["issue 16: ≥ 70% of the oracle control's gain"]  # 8 of 5 points: more than the oracle's gain
    assert met["issue 16: with its bank above GRPO's plain"]
    assert not met["issue 14: oracle − GRPO ≥ +10, interval above 0"]
    assert met["issue 14: retention ≥ 90%"]


def test_rows_against_different_grpo_runs_are_refused(tmp_path, monkeypatch):
    other_grpo = [*GRPO[:4], 0.55]  # seed 4's GRPO run made again elsewhere
    with pytest.raises(SystemExit, match="different GRPO runs"):
        targets(tmp_path, monkeypatch, GRPO, GRPO, GRPO, GRPO, oracle_grpo=other_grpo)


def test_a_missing_row_names_the_table(tmp_path, monkeypatch):
    write_tables(tmp_path, GRPO, GRPO, GRPO, GRPO)
    monkeypatch.setattr(issue_targets, "RESULTS", tmp_path)
    with pytest.raises(SystemExit, match=r"internalization\.json: no row 'e99'"):
        issue_targets.tables("e99", "oX", ["test_seen"])
    with pytest.raises(SystemExit, match=r"split_test_train\.json: not found"):
        issue_targets.tables("eX", "oX", ["test_train"])
