"""benchmarks/shared_settings.py: which runs each setting reads, and what it pairs with what."""

from pathlib import Path

import pytest
from benchmark_scripts import load

from edge.envs.base import Task
from edge.policy.actor import Decision
from edge.rollout import StepRecord, Trajectory


@pytest.fixture(scope="module")
def shared():
    return load("shared_settings")


def test_the_reference_is_the_benchmark_and_the_sweeps_own_runs_and_the_others_their_own_folders(shared):
    assert shared.run_folder("reference", "grpo", 2) == Path("benchmarks/runs/household-grpo-s2")
    assert shared.run_folder("reference", "edge-oracle-bank", 0) == Path(
        "benchmarks/sweep/internalization/o23/household-edge-oracle-bank-s0")
    assert shared.run_folder("history3", "grpo", 4) == Path("benchmarks/sweep/history3/runs/household-grpo-s4")


def test_a_settings_runs_differ_from_the_benchmarks_only_in_the_setting_and_o23s_update(shared):
    cfg = shared.bench_config("history3", ["grpo", "edge-oracle-bank"], [0, 1], jobs=2)
    assert cfg.extra == ["policy.history_steps=3", "bank.conditioned_pg=own-and-plain", "distill.anchor=1.0",
                         "distill.states=both"]
    assert shared.bench_config("follow", ["grpo"], [0], jobs=2).extra[0] == "bank.block_follows_progress=true"
    edge = shared.bench_config("follow", ["edge"], [0], jobs=2)  # e22's bank, its own report
    assert edge.extra[1:] == shared.sweep.CONFIGS["e22"][1] and edge.name == "learning_follow_edge"
    with pytest.raises(ValueError):
        shared.bench_config("follow", ["grpo", "edge"], [0], jobs=2)
    assert shared.run_folder("reference", "edge", 1) == Path("benchmarks/sweep/internalization/e22/household-edge-s1")
    assert cfg.runs_dir == Path("benchmarks/sweep/history3/runs") and cfg.splits == ["test_seen"]
    assert cfg.budget == 1.0 and cfg.eval_episodes == 400


def test_report_pairs_each_method_with_grpo_of_its_setting_and_with_itself_in_the_reference(shared, monkeypatch):
    # Success = history/10 + (0.1 for the oracle) + seed/100, so every difference is known exactly.
    def fake_run(folder: Path, splits):
        h = 1 if "history" not in str(folder) else int(str(folder).split("history")[1][0])
        oracle = "oracle" in folder.name
        seed = int(folder.name.rsplit("-s", 1)[1])
        plain = h / 10 + (0.1 if oracle else 0.0) + seed / 100
        tasks = {"plain": {"t0": True, "t1": False}, "with_bank": {"t0": True, "t1": True}}
        return {"final": {"test_seen_plain": plain, "test_seen_with_bank": plain + 0.05,
                          "test_seen_retention": plain / (plain + 0.05)},
                "final_tasks": {"test_seen": tasks}, "curve": [{"test_seen_plain": h / 20}]}

    monkeypatch.setattr(shared, "read_run", fake_run)
    monkeypatch.setattr(shared, "finished", lambda folder: True)
    rows = shared.report(["reference", "history3"], [0, 1], ["grpo", "edge-oracle-bank"])
    h3, ref = rows["history3"], rows["reference"]
    assert h3["grpo"]["mean"] == pytest.approx(0.305)
    assert h3["grpo_minus_reference"]["per_seed"] == pytest.approx({"0": 0.2, "1": 0.2})
    assert h3["warm_start_minus_reference"]["mean"] == pytest.approx(0.1)
    assert h3["oracle_minus_grpo"]["per_seed"] == pytest.approx({"0": 0.1, "1": 0.1})
    assert h3["oracle_with_bank_minus_grpo"]["mean"] == pytest.approx(0.15)
    assert h3["oracle_minus_reference"]["mean"] == pytest.approx(0.2)
    assert "grpo_minus_reference" not in ref and ref["oracle_minus_grpo"]["mean"] == pytest.approx(0.1)
    table = shared.markdown({"seeds": [0, 1], "machine": "test", "command": "x", "rows": rows})
    assert "| history3 | 15.0% | 30.5% | +20.0 [+20.0, +20.0]" in table
    assert "| history3 | oracle (o23) | 40.5% | 45.5% |" in table
    assert "- ``follow`` (``bank.block_follows_progress``)" in table  # each setting is described
    # A setting whose oracle control has not finished every seed gets GRPO's row only.
    monkeypatch.setattr(shared, "finished", lambda folder: "history3" not in str(folder))
    rows = shared.report(["reference", "history3"], [0, 1], ["grpo", "edge-oracle-bank"])
    assert "oracle_plain" not in rows["history3"] and rows["history3"]["grpo_minus_reference"]
    table = shared.markdown({"seeds": [0, 1], "machine": "test", "command": "x", "rows": rows})
    assert "| history3 | oracle" not in table and "| reference | oracle (o23) |" in table


def trajectory(goal_type: str, actions: list[str]) -> Trajectory:
    task = Task("household", "train", "t0", goal_type, "put a watch in tvstand.",
                {"goal": {"object": "watch", "tool": None, "target": "tvstand", "type": goal_type}})
    steps = [StepRecord(f"obs {i}", [], Decision(a, [], None, 0, None, [0.0])) for i, a in enumerate(actions)]
    return Trajectory("t0/m0", task, "t0", 0, False, None, steps)


def test_moves_after_take_count_from_the_take_to_the_first_put_and_only_for_placing_types(shared):
    actions = ["go to drawer 1", "take watch 1 from drawer 1", "go to sofa 1", "examine sofa 1", "go to tvstand 1",
               "put watch 1 in/on tvstand 1", "go to sofa 1"]
    assert shared.moves_after_take(trajectory("pick_and_place_simple", actions)) == [(1, False), (3, True)]
    assert shared.moves_after_take(trajectory("pick_and_place_simple", actions[:1])) == []  # never taken
    assert shared.moves_after_take(trajectory("look_at_obj_in_light", actions)) == []


def test_the_expert_axis_holds_the_settings_that_change_only_the_competent_demonstrations(shared, tmp_path,
                                                                                            monkeypatch):
    assert shared.expert_episodes("experts") == 150 and shared.expert_episodes("experts300") == 300
    assert shared.expert_episodes("reference") == shared.load_params().warmup.noisy_expert_episodes
    assert shared.expert_episodes("follow") is None and shared.expert_episodes("history2") is None

    def row(warm, grpo, oracle=None):
        out = {"warm_start": {"mean": warm}, "grpo": {"mean": grpo}}
        if oracle is not None:
            out |= {"oracle_plain": {"mean": oracle}, "oracle_with_bank": {"mean": oracle + 0.1}}
        return out

    result = {"seeds": [0, 1], "rows": {"reference": row(0.1, 0.4, 0.5), "follow": row(0.2, 0.6, 0.5),
                                        "experts": row(0.3, 0.6)}}
    assert shared.expert_figure(result, tmp_path / "experts.png").stat().st_size > 0
    drawn = {}
    monkeypatch.setattr(shared, "curves_plot", lambda curves, path, *a, **k: drawn.update(curves) or path)
    shared.expert_figure(result, tmp_path / "again.png")
    reference = shared.expert_episodes("reference")
    assert drawn["GRPO"] == [(reference, 0.4, None), (150, 0.6, None)]  # follow changes more than the demos
    assert drawn["oracle control (o23)"] == [(reference, 0.5, pytest.approx(0.6))]
    # With one point on the axis there is nothing to draw.
    assert shared.expert_figure({"seeds": [0], "rows": {"follow": row(0.2, 0.6)}}, tmp_path / "none.png") is None


def test_another_split_evaluates_each_final_policy_and_pairs_it_as_on_the_runs_own(shared, monkeypatch):
    asked = []

    def fake_evaluation(folder: Path, split: str, episodes: int, cache_dir: Path) -> dict:
        asked.append((folder, split, episodes, cache_dir))
        seed = int(folder.name.rsplit("-s", 1)[1])
        plain = 0.3 + seed / 100 + (0.1 if "oracle" in folder.name else 0.0) + (0.2 if "experts" in str(folder) else 0)
        result = {"plain": {"success": plain, "score": plain, "won_by_task": {"t0": True}}}
        if "oracle" in folder.name:
            result |= {"with_bank": {"success": plain + 0.1, "score": plain + 0.1, "won_by_task": {"t0": True}},
                       "retention": plain / (plain + 0.1)}
        return result

    monkeypatch.setattr(shared, "final_evaluation", fake_evaluation)
    monkeypatch.setattr(shared, "finished", lambda folder: True)
    rows = shared.report(["reference", "experts"], [0, 1], ["grpo", "edge-oracle-bank"], "test_unseen")
    assert {(split, episodes) for _, split, episodes, _ in asked} == {("test_unseen", 400)}
    # The reference's runs are read from the sweep's own cache of evaluations, a setting's from its own.
    caches = {folder: cache for folder, _, _, cache in asked}
    assert caches[Path("benchmarks/runs/household-grpo-s0")] == Path("benchmarks/sweep/internalization/split-evals")
    experts_run = Path("benchmarks/sweep/experts/runs/household-grpo-s1")
    assert caches[experts_run] == Path("benchmarks/sweep/experts/split-evals")
    experts = rows["experts"]
    assert experts["grpo"]["mean"] == pytest.approx(0.505) and "warm_start" not in experts
    assert experts["grpo_minus_reference"]["per_seed"] == pytest.approx({"0": 0.2, "1": 0.2})
    assert experts["oracle_minus_grpo"]["mean"] == pytest.approx(0.1)
    assert experts["oracle_with_bank_minus_grpo"]["mean"] == pytest.approx(0.2)
    table = shared.markdown({"seeds": [0, 1], "machine": "test", "command": "x",
                             "rows": {}, "other_splits": {"test_unseen": rows}})
    assert "On test_unseen" in table and "| experts | 50.5% | +20.0 [+20.0, +20.0] (p 0.500) | 60.5% / 70.5% |" in table


def test_a_world_that_changed_trains_on_the_moved_household_from_another_settings_warm_starts(shared, monkeypatch):
    from edge.benchmarking.learning import base_folder

    cfg = shared.bench_config("moved150", ["grpo", "edge-oracle-bank"], [0, 3], jobs=2)
    assert cfg.envs == ["household_moved"] and cfg.warm_start_env == "household"
    assert cfg.extra[0] == "warmup.noisy_expert_episodes=150"  # the warm start's own setting, for its identity
    # The warm starts are experts' (made in the usual household); the reference's are the sweep's.
    assert base_folder(cfg, "household_moved", 3) == Path("benchmarks/sweep/experts/runs/base-household-s3")
    moved = shared.bench_config("moved", ["edge"], [1], jobs=2)
    assert base_folder(moved, "household_moved", 1) == Path("benchmarks/sweep/bases/base-household-s1")
    assert shared.run_folder("moved150", "grpo", 2) == Path("benchmarks/sweep/moved150/runs/household_moved-grpo-s2")
    assert shared.bench_config("experts", ["grpo"], [0], jobs=2).warm_start_env is None
    assert shared.expert_episodes("moved150") is None  # another world: not a point on the experts axis
    reading = shared.bench_config("moved_reading150", ["grpo"], [2], jobs=2)  # warm starts that read the advice
    assert base_folder(reading, "household_moved", 2) == Path("benchmarks/sweep/reading150/runs/base-household-s2")
    assert "warmup.advised_env=household_shuffled" in reading.extra and shared.expert_episodes("reading150") is None
    # The scaffold handed off: the same warm starts, its own oracle and EDGE runs, and GRPO's runs of moved_reading150
    # (it does not read the field).
    handoff = shared.bench_config("moved_reading150_handoff", ["edge-oracle-bank"], [2], jobs=2)
    assert base_folder(handoff, "household_moved", 2) == base_folder(reading, "household_moved", 2)
    assert "bank.rho_schedule=handoff" in handoff.extra and handoff.envs == ["household_moved"]
    assert shared.run_folder("moved_reading150_handoff", "grpo", 2) == shared.run_folder("moved_reading150", "grpo", 2)
    assert shared.run_folder("moved_reading150_handoff", "edge-oracle-bank", 2) == Path(
        "benchmarks/sweep/moved_reading150_handoff/runs/household_moved-edge-oracle-bank-s2")

    # Paired with GRPO of its own world only: its tasks are not the reference's.
    def fake_run(folder: Path, splits):
        plain = 0.5 if "moved" in str(folder) else 0.3
        plain += 0.1 if "oracle" in folder.name else 0.0
        tasks = {"plain": {"t0": True}, "with_bank": {"t0": True}}
        return {"final": {"test_seen_plain": plain, "test_seen_with_bank": plain, "test_seen_retention": 1.0},
                "final_tasks": {"test_seen": tasks}, "curve": [{"test_seen_plain": 0.2}]}

    monkeypatch.setattr(shared, "read_run", fake_run)
    monkeypatch.setattr(shared, "finished", lambda folder: True)
    monkeypatch.setattr(shared, "heading_to_target", lambda folders: {})
    rows = shared.report(["reference", "moved150"], [0, 1], ["grpo", "edge-oracle-bank"])
    assert rows["moved150"]["oracle_minus_grpo"]["mean"] == pytest.approx(0.1)
    assert "grpo_minus_reference" not in rows["moved150"] and "oracle_minus_reference" not in rows["moved150"]
