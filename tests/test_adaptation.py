"""benchmarks/adaptation.py: which policies start the runs on the moved household, and what it pairs."""

import json
from pathlib import Path

import pytest
from benchmark_scripts import load


@pytest.fixture()
def adaptation():
    return load("adaptation")


def finished_run(folder: Path, rounds: int = 2) -> Path:
    for k in range(rounds):
        (folder / f"round_{k:03d}" / "checkpoint").mkdir(parents=True)
        (folder / f"round_{k:03d}" / "checkpoint" / "edge_manifest.json").write_text("{}")
    return folder


def test_each_start_is_a_link_to_its_source_runs_final_checkpoint(adaptation, tmp_path, monkeypatch):
    sources = {start: finished_run(tmp_path / "experts" / start) for start in adaptation.STARTS}
    monkeypatch.setattr(adaptation, "ROOT", tmp_path / "adaptation")
    monkeypatch.setattr(adaptation.shared, "run_folder", lambda setting, method, seed: sources[method])
    monkeypatch.setattr(adaptation.shared, "finished", lambda folder: folder != sources["edge"])
    adaptation.link_warm_starts("grpo", [0, 1])
    link = tmp_path / "adaptation" / "grpo" / "bases" / "base-household_moved-s1"
    assert link.resolve() == (sources["grpo"] / "round_001" / "checkpoint").resolve()
    adaptation.link_warm_starts("grpo", [0, 1])  # again: nothing to do
    cfg = adaptation.bench_config("grpo", [0, 1], jobs=2)
    from edge.benchmarking.learning import base_checkpoint, base_folder

    assert base_folder(cfg, "household_moved", 1) == link  # where the benchmark looks, the link is
    # ... and it counts as built: no warm start is trained into (or over) the source's checkpoint.
    assert base_checkpoint(cfg, "household_moved", 1, launch=lambda *a: pytest.fail("built a warm start")) == link
    assert cfg.methods == ["grpo"] and cfg.envs == ["household_moved"]
    assert cfg.extra == ["warmup.noisy_expert_episodes=150"]
    with pytest.raises(ValueError, match="has not finished"):
        adaptation.link_warm_starts("edge", [0])
    # A link to another checkpoint is not silently replaced.
    monkeypatch.setattr(adaptation.shared, "run_folder", lambda setting, method, seed: sources["edge-oracle-bank"])
    monkeypatch.setattr(adaptation.shared, "finished", lambda folder: True)
    with pytest.raises(ValueError, match="remove it to start again"):
        adaptation.link_warm_starts("grpo", [0])


def test_report_pairs_each_start_with_grpos_before_during_and_after(adaptation, tmp_path, monkeypatch):
    # Moved-world success = 0.2 before, 0.4 after round 3, 0.6 at the end, +0.1 for the oracle's start at
    # every point and -0.05 for EDGE's at the end; on the usual household 0.6, 0.65 and 0.62.
    offset = {"grpo": 0.0, "edge-oracle-bank": 0.1, "edge": 0.0}
    usual = {"grpo": 0.6, "edge-oracle-bank": 0.65, "edge": 0.62}

    def start_of(folder: Path) -> str:
        return next(s for s in ("edge-oracle-bank", "edge", "grpo") if f"/{s}/" in f"/{folder}/")

    def fake_run(folder: Path, splits):
        if "experts" in str(folder):
            return {"final": {"test_seen_plain": usual[start_of(folder)]}, "final_tasks": {}}
        o = offset[start_of(folder)]
        end = 0.6 + o - (0.05 if start_of(folder) == "edge" else 0.0)
        return {"curve": [{"round": -1, "test_seen_plain": 0.2 + o}, {"round": 3, "test_seen_plain": 0.4 + o},
                          {"round": 7, "test_seen_plain": end}],
                "final": {"test_seen_plain": end}, "final_tasks": {"test_seen": {"plain": {"t0": True}}}}

    monkeypatch.setattr(adaptation, "ROOT", tmp_path)
    monkeypatch.setattr(adaptation, "read_run", fake_run)
    monkeypatch.setattr(adaptation.shared, "read_run", fake_run)
    monkeypatch.setattr(adaptation.shared, "run_folder", lambda setting, method, seed: tmp_path / "experts" / method)
    monkeypatch.setattr(adaptation, "first_searches", lambda folders: {"0": {"usual": 0.5, "moved": 0.1}})
    for start in adaptation.STARTS:
        for seed in (0, 1):
            folder = adaptation.run_folder(start, seed)
            folder.mkdir(parents=True)
            (folder / "eval_base.json").write_text(json.dumps({"test_seen": {"plain": {"won_by_task": {"t0": False}}}}))
    rows = adaptation.report([0, 1])
    oracle, edge = rows["edge-oracle-bank"], rows["edge"]
    assert oracle["usual_final_minus_grpo"]["mean"] == pytest.approx(0.05)
    assert oracle["before_minus_grpo"]["mean"] == pytest.approx(0.1)
    assert oracle["after_round_minus_grpo"]["per_seed"] == pytest.approx({"0": 0.1, "1": 0.1})
    assert edge["final_minus_grpo"]["mean"] == pytest.approx(-0.05) and "per_seed_tasks" in edge["final_minus_grpo"]
    assert rows["grpo"]["before"]["mean"] == pytest.approx(0.2) and "final_minus_grpo" not in rows["grpo"]
    assert rows["grpo"]["curve"]["0"] == [(0, 0.2), (4, 0.4), (8, 0.6)]  # rounds done at each evaluation
    result = {"seeds": [0, 1], "machine": "test", "command": "x", "rows": rows}
    table = adaptation.markdown(result)
    assert "| oracle control (o23) | 65.0% | 30.0% | 50.0% | 70.0% |" in table
    assert "| EDGE (e22) | +2.0 [+2.0, +2.0] (p 0.500) | +0.0" in table
    assert "| GRPO from GRPO's final policy | 50% / 10% | – | – |" in table
    drawn = {}
    monkeypatch.setattr(adaptation, "curves_plot", lambda curves, path, *a, **k: drawn.update(curves) or path)
    adaptation.figure(result, tmp_path / "adaptation.png")
    assert drawn["from GRPO"] == [(0, pytest.approx(0.2), None), (4, pytest.approx(0.4), None),
                                  (8, pytest.approx(0.6), None)]


def test_first_searches_count_where_plain_episodes_look_first_in_each_world(adaptation, monkeypatch):
    from edge.envs.household.world import kind_of, likely_kinds
    from edge.envs.registry import generate_tasks
    from edge.policy.actor import Decision
    from edge.rollout import StepRecord, Trajectory

    task = generate_tasks("household_moved", "train", 1, 0)[0]
    obj, present = task.spec["goal"]["object"], [kind_of(r) for r in task.spec["receptacles"]]
    usual = next(r for r in task.spec["receptacles"] if kind_of(r) in likely_kinds(obj, "usual"))
    moved = next(r for r in task.spec["receptacles"] if kind_of(r) in likely_kinds(obj, "moved"))
    neither = next(r for r in task.spec["receptacles"]
                   if not {kind_of(r)} & (set(likely_kinds(obj, "usual")) | set(likely_kinds(obj, "moved"))))
    assert present

    def episode(actions: list[str], conditioned: bool = False) -> Trajectory:
        steps = [StepRecord("obs", [], Decision(a, [], None, 0, None, [0.0])) for a in actions]
        return Trajectory("t/m", task, "t", 0, conditioned, None, steps)

    rounds = {"round_000": [episode(["look", f"go to {usual}", f"go to {moved}"]), episode([f"go to {moved}"]),
                            episode([f"go to {neither}"]), episode(["look"]),  # never moved: not counted
                            episode([f"go to {moved}"], conditioned=True)],  # the scaffold's: not counted
              "round_003": [episode([f"go to {moved}"])]}
    monkeypatch.setattr(adaptation, "read_rollouts", lambda path, text_only: rounds.get(path.parent.name, []))
    searches = adaptation.first_searches([Path("run")], rounds=(0, 3, 7))
    assert searches["0"] == {"usual": pytest.approx(1 / 3), "moved": pytest.approx(1 / 3), "episodes": 3}
    assert searches["3"] == {"usual": 0.0, "moved": 1.0, "episodes": 1} and searches["7"] == {}


def test_bank_places_read_where_the_final_banks_find_entries_send_the_agent(adaptation, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from edge.envs.household.world import likely_kinds

    usual, moved = likely_kinds("apple", "usual"), likely_kinds("apple", "moved")
    rows = [(f"try : look for apple in {usual[0]} , {moved[0]} , {moved[1]} .", "active"),
            (f"try : look for apple in {usual[0]} .", "pruned"),  # no longer in the bank
            ("try : look for desklamp in desk .", "active"),  # a lamp's place: not an object kind's
            ("try : heat the apple with the microwave before you put it in place .", "active")]
    for k, table in ((0, rows[1:2]), (1, rows)):  # only the last round's bank counts
        (tmp_path / f"round_{k:03d}").mkdir()
        pq.write_table(pa.table({"text": [t for t, _ in table], "status": [s for _, s in table]}),
                       tmp_path / f"round_{k:03d}" / "bank.parquet")
    assert adaptation.bank_places(tmp_path) == {"usual": 1, "moved": 2, "places": 3, "entries": 1}
