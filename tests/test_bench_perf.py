"""`edge bench perf --quick`: the report has every field with sane values (no timing thresholds)."""

import json
import math

import pytest
from typer.testing import CliRunner

from edge.benchmarking.bank_cost import bank_cost_of_run
from edge.benchmarking.round_profile import STAGE_ORDER
from edge.benchmarking.timers import CallTimer, ForwardTimer, percentiles_ms, timing_attribute
from edge.cli import app


def positive(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def share(value) -> bool:
    return isinstance(value, int | float) and 0.0 <= value <= 1.0


def test_quick_perf_report(tmp_path):
    out = tmp_path / "results"
    work = tmp_path / "work"
    result = CliRunner().invoke(app, ["bench", "perf", "--quick", "--no-track", "--out-dir", str(out),
                                      "--work-dir", str(work), "--set", "train.base_checkpoint=null"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "perf.json").read_text())
    markdown = (out / "perf.md").read_text()
    for heading in ("Environment steps per second", "Rollout", "GRPO update", "Time per stage",
                    "Orchestration overhead", "Memory", "Bank retrieval latency", "Cost of the bank per round"):
        assert f"## {heading}" in markdown

    assert {r["env"] for r in report["environments"]} == {"household", "shop"}
    for row in report["environments"]:
        assert row["steps"] > 0 and positive(row["env_steps_per_second"])
        assert positive(row["end_to_end_steps_per_second"])

    rounds = report["rounds"]
    assert [r["round"] for r in rounds["direct"]] == [0, 1]
    for record in [*rounds["direct"], rounds["prefect"]]:
        assert set(record["stages"]) == set(STAGE_ORDER) and positive(record["total_seconds"])
        assert sum(record["stages"].values()) <= record["total_seconds"] + 1e-6
        rollout = record["rollout"]
        assert rollout["actions"] > 0 and positive(rollout["actions_per_second"])
        assert share(rollout["forward_share"]) and rollout["forward_seconds"] > 0
        assert rollout["forward_passes"] >= rollout["policy_calls"] > 0
        assert rollout["forward_tokens"] >= rollout["real_tokens"] > 0 and share(rollout["padding_share"])
        assert rollout["wall_seconds"] <= record["stages"]["collect"]
        update = record["update"]
        assert update["tokens"] >= 0 and update["tokens_per_second"] >= 0
    assert rounds["direct"][1]["evaluated"] and rounds["prefect"]["evaluated"]
    assert rounds["identical_rollouts"] is True  # every leg did the same work
    # the quick preset's two pairs, alternating which leg goes first; the overhead is their median
    assert [p["prefect_first"] for p in rounds["pairs"]] == [False, True]
    ratios = sorted(p["ratio"] for p in rounds["pairs"])
    assert rounds["round_overhead_ratio"] == pytest.approx((ratios[0] + ratios[1]) / 2)
    assert positive(rounds["empty_task_run"]["p50_ms"])
    assert rounds["empty_task_run"]["p50_ms"] <= rounds["empty_task_run"]["p99_ms"]
    assert rounds["ephemeral_server_startup_seconds"] >= 0 or rounds["empty_flow_run_seconds"] > 0

    memory = report["memory"]
    assert positive(memory["peak_rss_mb_after_rounds"]) and memory["peak_rss_mb_total"] >= memory[
        "peak_rss_mb_after_rounds"]

    cells = {(r["entries"], r["index"]) for r in report["retrieval"]}
    assert cells == {(n, index) for n in (200, 1_000) for index in ("none", "ivf_flat", "in_memory")}
    for row in report["retrieval"]:
        latency = row["latency"]
        assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"]
        assert row["recall_at_k"] is None or share(row["recall_at_k"])
        assert row["disk_bytes"] > 0
        if row["index"] == "in_memory":  # exact search: it finds what the flat scan finds
            assert row["recall_at_k"] == 1.0
    assert 0 < report["minilm_query"]["latency"]["p50_ms"] <= report["minilm_query"]["latency"]["p99_ms"]

    for cost in report["bank_cost"]:
        assert all(v >= 0 for v in cost["seconds"].values())
        assert all(share(v) for v in cost["share_of_round"].values())
        assert cost["bank_seconds"] <= cost["round_seconds"]
        assert 0 <= cost["experience_tokens"] <= cost["prompt_tokens"] and share(cost["experience_token_share"])
        assert cost["bank_total_entries"] >= cost["bank_active_entries"] and cost["bank_folder_bytes"] > 0

    aims = {a["aim"]: a for a in report["against_aims"]}
    assert len(aims) == 5 and all(a["met"] in (True, False, None) for a in aims.values())

    # The per-round table of a finished run (`--bank-run`), from the files the stages wrote.
    run_rows = bank_cost_of_run(work / "runs" / "direct-0" / "household-edge-s0")
    assert [r["round"] for r in run_rows] == [0, 1]
    for row in run_rows:
        assert row["round_seconds"] > 0 and share(row["bank_share"])
        assert 0 <= row["experience_tokens"] <= row["prompt_tokens"]


def test_timers_observe_without_changing_behaviour():
    import torch

    class Thing:
        def double(self, x):
            return 2 * x

    thing, timer = Thing(), CallTimer()
    with timing_attribute(Thing, "double", timer):
        assert thing.double(3) == 6
    assert timer.calls == 1 and timer.seconds >= 0
    assert "double" in vars(Thing) and thing.double.__func__ is Thing.double  # the class is restored
    assert thing.double(2) == 4 and timer.calls == 1

    layer = torch.nn.Linear(4, 4)
    with ForwardTimer() as forward:
        forward.attach([layer])
        layer(torch.ones(2, 4))
    layer(torch.ones(2, 4))  # hooks are gone after the block
    assert forward.calls == 1 and forward.seconds > 0

    stats = percentiles_ms([0.001, 0.002, 0.003])
    assert stats["p50_ms"] == 2.0 and stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"] == 3.0
