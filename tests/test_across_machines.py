"""benchmarks/across_machines.py: a configuration made on two machines, pooled replicate by replicate."""

import pytest
from benchmark_scripts import load


@pytest.fixture(scope="module")
def across():
    return load("across_machines")


def seen_row(machine: str, plain: list[float], grpo: list[float]) -> dict:
    """An internalization.json row: per-seed plain, GRPO's plain and the advice's success."""
    seeds = [str(s) for s in range(len(plain))]
    diffs = [p - g for p, g in zip(plain, grpo)]
    return {"machine": machine, "plain": dict(zip(seeds, plain)), "grpo": dict(zip(seeds, grpo)),
            "with_advice": {s: 0.8 for s in seeds},
            "minus_grpo": {"mean": sum(diffs) / len(diffs), "low": -1.0, "high": 1.0,
                           "per_seed": dict(zip(seeds, diffs))}}


def test_each_machine_stays_paired_and_the_pool_counts_every_replicate(across):
    rows = {"o17": seen_row("A", [0.5, 0.6, 0.4], [0.4, 0.5, 0.45]),
            "o17@b": seen_row("B", [0.55, 0.5], [0.5, 0.52]),
            "e22": seen_row("A", [0.5, 0.5], [0.4, 0.4]),  # one machine only: nothing to pool
            "o0-x2": seen_row("B", [0.5], [0.4])}
    report = across.pooled(rows, "test_seen")
    assert list(report) == ["o17"]
    o17 = report["o17"]
    assert o17["replicates"] == 5 and list(o17["rows"]) == ["o17", "o17@b"]
    diffs = [0.1, 0.1, -0.05, 0.05, -0.02]
    assert o17["minus_grpo"]["mean"] == pytest.approx(sum(diffs) / 5)
    assert list(o17["minus_grpo"]["per_seed"]) == ["o17:s0", "o17:s1", "o17:s2", "o17@b:s0", "o17@b:s1"]
    assert o17["with_bank"] == pytest.approx(0.8) and o17["retention"] == pytest.approx(
        sum(p / 0.8 for p in (0.5, 0.6, 0.4, 0.55, 0.5)) / 5)
    assert "| o17 |" in across.markdown({"test_seen": report})


def test_a_split_row_gives_grpo_back_from_its_paired_difference(across):
    row = seen_row("A", [0.5, 0.3], [0.4, 0.35])
    del row["grpo"]
    row["with_bank"] = row.pop("with_advice")
    assert [(s, round(g, 6)) for s, _, g, _ in across.replicates(row, "test_unseen")] == [("0", 0.4), ("1", 0.35)]


def test_the_figure_shows_every_replicate_in_points_by_machine_under_the_pooled_interval(across, tmp_path,
                                                                                         monkeypatch):
    rows = {"o17": seen_row("x86_64 AMD EPYC, 2 cores", [0.5, 0.6], [0.4, 0.5]),
            "o17@b": seen_row("x86_64 Intel Xeon, 2 cores", [0.55], [0.5])}
    report = across.pooled(rows, "test_seen")
    drawn = {}
    monkeypatch.setattr(across, "replicates_plot", lambda by_machine, pooled, path, title: drawn.update(
        by_machine=by_machine, pooled=pooled) or path)
    across.figure(report, "test_seen", tmp_path / "f.png")
    assert drawn["by_machine"] == {"o17": {"AMD EPYC": pytest.approx([10.0, 10.0]), "Intel Xeon": pytest.approx([5.0])}}
    mean, low, high = drawn["pooled"]["o17"]
    assert mean == pytest.approx(100 * report["o17"]["minus_grpo"]["mean"]) and low < mean < high
    monkeypatch.undo()
    path = across.figure(report, "test_seen", tmp_path / "f.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
