"""The learning benchmark: its statistics on hand-made numbers, and one tiny end-to-end run."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edge.benchmarking.learning import paired_difference
from edge.benchmarking.stats import bootstrap_mean, paired_permutation_p, smallest_p, t_interval_mean
from edge.cli import app


def test_bootstrap_interval_brackets_the_mean_and_collapses_on_constant_values():
    values = [0.1, 0.3, 0.2, 0.6, 0.4]
    est = bootstrap_mean(values)
    assert est.mean == pytest.approx(0.32)
    assert min(values) <= est.low < est.mean < est.high <= max(values)
    assert bootstrap_mean(values) == est  # a fixed random stream: the same interval every time
    flat = bootstrap_mean([0.25] * 4)
    assert (flat.low, flat.mean, flat.high) == (0.25, 0.25, 0.25)


def test_t_interval_by_hand_and_wider_than_the_bootstrap_with_few_seeds():
    # mean 0.2, sd 0.1, n = 3: t(0.975, 2) = 4.3027 -> half width 4.3027 * 0.1 / sqrt(3) = 0.24842
    est = t_interval_mean([0.1, 0.2, 0.3])
    assert est.method == "student-t" and est.mean == pytest.approx(0.2)
    assert (est.low, est.high) == pytest.approx((0.2 - 0.24842, 0.2 + 0.24842), abs=1e-5)
    # Three differences of one sign: the percentile bootstrap excludes zero, the t interval does not.
    diffs = [0.05, 0.1, 0.15]
    assert bootstrap_mean(diffs).low > 0 and t_interval_mean(diffs).low < 0


def test_paired_difference_counts_only_nonzero_differences_towards_the_smallest_p():
    # Seed 0's difference is exactly zero: it cannot flip, so four pairs decide (2/16, not 2/32).
    result = paired_difference([0.3, 0.5, 0.6, 0.7, 0.4], [0.3, 0.2, 0.3, 0.3, 0.1], [0, 1, 2, 3, 4])
    assert result["smallest_possible_p"] == pytest.approx(2 / 16)
    assert result["p_value"] == pytest.approx(2 / 16)
    assert result["method"] == "student-t" and result["per_seed"]["0"] == 0.0


def test_paired_permutation_p_values_by_hand():
    # Five pairs, all differences positive: only "all +" and "all -" are as extreme -> 2/32.
    assert paired_permutation_p([0.5, 0.6, 0.7, 0.4, 0.5], [0.1, 0.2, 0.3, 0.2, 0.1]) == pytest.approx(2 / 32)
    assert smallest_p(5) == pytest.approx(2 / 32)
    # Differences +0.1 and -0.1 cancel: every sign pattern is at least as extreme -> p = 1.
    assert paired_permutation_p([0.2, 0.1], [0.1, 0.2]) == 1.0
    # Differences 0.3, 0.1, 0.1: |sum| >= 0.5 only for all + or all - -> 2/8.
    assert paired_permutation_p([0.4, 0.2, 0.2], [0.1, 0.1, 0.1]) == pytest.approx(2 / 8)
    with pytest.raises(ValueError, match="equally long"):
        paired_permutation_p([0.1], [0.1, 0.2])


def test_bench_learning_end_to_end_at_toy_scale(tmp_path):
    tiny = ["warmup.explore_episodes=2", "warmup.noisy_expert_episodes=1", "warmup.advised_episodes=2",
            "warmup.epochs=1", "warmup.eval_episodes=0", "rollout.tasks_per_round=2", "rollout.group_size=2",
            "rollout.max_steps=6", "grpo.epochs=1", "bank.embedder=hash", "bank.similarity_threshold=0.05"]
    args = ["bench", "learning", "--env", "household", "--method", "grpo", "--method", "edge",
            "--method", "edge-oracle-bank",
            "--seed", "0", "--seed", "1", "--budget", "0.125", "--eval-episodes", "3", "--eval-every", "1",
            "--jobs", "2", "--runs-dir", str(tmp_path / "runs"), "--out-dir", str(tmp_path / "results"),
            "--name", "toy", "--no-track", *sum((["--set", s] for s in tiny), [])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "results" / "toy.json").read_text())
    assert report["rounds"] == 1  # 8 rounds x 0.125
    runs = report["runs"]["household"]
    assert set(runs) == {"grpo", "edge", "edge-oracle-bank"} and set(runs["edge"]) == {"0", "1"}
    # each seed warm-started its own base (its own seed), and every method of the seed started from it
    assert sorted(p.name for p in (tmp_path / "runs").glob("base-household-s*")) == ["base-household-s0",
                                                                                     "base-household-s1"]
    for method in runs:
        for seed in ("0", "1"):
            params = json.loads((tmp_path / "runs" / f"household-{method}-s{seed}" / "params.json").read_text())
            assert params["train"]["base_checkpoint"].endswith(f"base-household-s{seed}")
    for by_seed in runs.values():
        for run in by_seed.values():
            # the base, then round 0 after its 2 x 2 episodes of at most 6 steps
            assert [p["round"] for p in run["curve"]] == [-1, 0]
            steps = [p["env_steps"] for p in run["curve"]]
            assert steps[0] == 0 < steps[1] <= 2 * 2 * 6
    # one base evaluation per seed, shared by both methods; every run's own time is recorded
    assert len(list((tmp_path / "runs" / "base-evals").glob("eval-base-*.json"))) == 2
    for seed in ("0", "1"):
        assert {k: v for k, v in runs["edge"][seed]["curve"][0].items() if "plain" in k} == {
            k: v for k, v in runs["grpo"][seed]["curve"][0].items() if "plain" in k}
    assert all(r["run_seconds"] > 0 for by_seed in runs.values() for r in by_seed.values())
    table = report["table"]["household"]
    for split in ("test_seen", "test_unseen"):
        edge = table["edge"][split]
        assert {"plain", "with_bank", "minus_grpo", "scaffold_minus_grpo_plain", "plain_score",
                "score_minus_grpo"} <= set(edge)
        # retention is undefined (and left out) when no seed succeeded with the bank
        assert ("retention" in edge) == any(runs["edge"][s]["final"][f"{split}_with_bank"] > 0 for s in ("0", "1"))
        assert "with_bank" not in table["grpo"][split] and "minus_grpo" not in table["grpo"][split]
        # with bank - plain, paired task by task within each seed (3 tasks), then over seeds
        for method in ("edge", "edge-oracle-bank"):
            within = table[method][split]["with_bank_minus_plain"]
            assert set(within["per_seed_tasks"]) == {"0", "1"}
            for seed, est in within["per_seed_tasks"].items():
                assert est["n"] == 3 and est["mean"] == pytest.approx(within["per_seed"][seed])
        assert set(edge["minus_grpo"]["per_seed_tasks"]) == {"0", "1"}
        gain = table["grpo"][split]["plain_minus_base"]
        gains = [runs["grpo"][s]["final"][f"{split}_plain"] - runs["grpo"][s]["curve"][0][f"{split}_plain"]
                 for s in ("0", "1")]
        assert gain["mean"] == pytest.approx(sum(gains) / 2)
        diffs = [runs["edge"][s]["final"][f"{split}_plain"] - runs["grpo"][s]["final"][f"{split}_plain"]
                 for s in ("0", "1")]
        assert edge["minus_grpo"]["mean"] == pytest.approx(sum(diffs) / 2)
    markdown = (tmp_path / "results" / "toy.md").read_text()
    assert "## household / test_unseen" in markdown and "| edge |" in markdown
    assert "the runs took" in markdown and "The warm start's part in the spread" in markdown
    # the bank's part in training, read back from the runs' own records
    assert "grpo" not in report["bank_activity"]["household"]
    activity = report["bank_activity"]["household"]["edge"]
    hit_rates = [json.loads((tmp_path / "runs" / f"household-edge-s{s}" / "round_000" / "scores.json").read_text())[
        "summary"]["retrieval_hit_rate"] for s in (0, 1)]
    assert activity["hit_rate"] == pytest.approx(sum(hit_rates) / 2)
    assert 0 <= activity["distilled_share"] <= 1 and "household: the bank during training" in markdown
    # the oracle control retrieves for every group and keeps no bank
    oracle = report["bank_activity"]["household"]["edge-oracle-bank"]
    assert oracle["hit_rate"] == 1.0 and oracle["final_size_active"] is None
    assert "### household / edge-oracle-bank: the scaffold round by round" in markdown
    assert (tmp_path / "results" / "toy_household_test_seen.png").stat().st_size > 0
    # --report-only trains nothing and rebuilds the same tables from the finished runs ...
    again = CliRunner().invoke(app, [*args, "--report-only"])
    assert again.exit_code == 0, again.output
    rebuilt = json.loads((tmp_path / "results" / "toy.json").read_text())
    # (it keeps the wall time of the invocation that trained them)
    assert rebuilt["table"] == report["table"] and rebuilt["wall_minutes"] == report["wall_minutes"]
    # ... and names the run that is missing when asked for a seed never trained.
    missing = CliRunner().invoke(app, [*args, "--seed", "7", "--report-only"])
    assert missing.exit_code == 2 and "household-grpo-s7 has not finished" in missing.output.replace("\n", "")


def test_a_failing_run_names_its_log(tmp_path):
    from edge.benchmarking.learning import LearningBenchConfig, train_one

    cfg = LearningBenchConfig(runs_dir=tmp_path / "runs", extra=["rollout.group_size=1"])  # invalid: G >= 2
    with pytest.raises(RuntimeError, match=r"household-grpo-s0 failed .*household-grpo-s0\.log"):
        train_one(cfg, "household", "grpo", 0, tmp_path / "base", 1, tmp_path / "logs")
    assert "group_size" in (tmp_path / "logs" / "household-grpo-s0.log").read_text()


def test_a_failed_run_stops_the_queue(tmp_path):
    from edge.benchmarking.learning import LearningBenchConfig, run_benchmark

    cfg = LearningBenchConfig(envs=["household"], methods=["grpo"], seeds=[0, 1, 2], jobs=1, eval_episodes=0,
                              runs_dir=tmp_path / "runs", out_dir=tmp_path / "results")  # 0 episodes: invalid
    for seed in (0, 1, 2):  # one warm start per seed; none needs building to fail
        (tmp_path / "runs" / f"base-household-s{seed}").mkdir(parents=True)
        (tmp_path / "runs" / f"base-household-s{seed}" / "warmup.json").write_text("{}")
    with pytest.raises(RuntimeError, match="household-grpo-s0 failed"):
        run_benchmark(cfg, track=False)
    assert sorted(p.name for p in (tmp_path / "runs" / "logs").iterdir()) == ["household-grpo-s0.log"]


def test_warm_starts_are_built_jobs_at_a_time_each_with_its_log(tmp_path, monkeypatch):
    import threading
    import time

    from edge.benchmarking import learning

    running, most = [0], [0]
    lock = threading.Lock()

    def fake_warmup(arguments, log_path):  # stands in for `edge warmup` in a subprocess
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.3)
        out = Path(arguments[arguments.index("--out") + 1])
        out.mkdir(parents=True)
        (out / "warmup.json").write_text("{}")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(" ".join(arguments))
        with lock:
            running[0] -= 1
        return 0

    monkeypatch.setattr(learning, "run_locally", fake_warmup)

    def on_the_console(*args, **kwargs):
        raise AssertionError("a warm start was built on the console, one at a time, although jobs is 2")

    monkeypatch.setattr(learning.subprocess, "run", on_the_console)
    cfg = learning.LearningBenchConfig(envs=["household"], seeds=[0, 1, 2], jobs=2, runs_dir=tmp_path / "runs")
    (tmp_path / "runs" / "base-household-s2").mkdir(parents=True)  # already built: not built again
    (tmp_path / "runs" / "base-household-s2" / "warmup.json").write_text("{}")
    bases = learning.warm_starts(cfg)
    assert bases == {("household", s): tmp_path / "runs" / f"base-household-s{s}" for s in (0, 1, 2)}
    assert most[0] == 2
    logs = sorted(p.name for p in (tmp_path / "runs" / "logs").iterdir())
    assert logs == ["base-household-s0.log", "base-household-s1.log"]
    assert "seed=1" in (tmp_path / "runs" / "logs" / "base-household-s1.log").read_text()
