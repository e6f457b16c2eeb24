"""benchmarks/kind_coverage.py: which training tasks count as the scaffold's, and how evaluation tasks are
split by whether their object kind was among them."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from benchmark_scripts import load


@pytest.fixture()
def coverage():
    return load("kind_coverage")


def task_json(task_id: str, kind: str) -> str:
    return json.dumps({"task_id": task_id, "spec": {"goal": {"object": kind, "type": "pick_and_place_simple"}}})


def write_round(folder, k: int, kinds: list[str], conditioned: bool) -> None:
    (folder / f"round_{k:03d}").mkdir(exist_ok=True)
    # Each task's group has several members (rows), the first plain, the others conditioned unless handed off:
    # the task counts once.
    ids = [f"t{k}-{i}" for i, _ in enumerate(kinds) for _ in range(3)]
    jsons = [task_json(f"t{k}-{i}", kind) for i, kind in enumerate(kinds) for _ in range(3)]
    flags = [conditioned and m > 0 for _ in kinds for m in range(3)]
    pq.write_table(pa.table({"group_id": ids, "task_json": jsons, "conditioned": flags}),
                   folder / f"round_{k:03d}" / "rollouts.parquet")


def test_only_the_rounds_before_the_hand_off_count_and_each_task_once(coverage, tmp_path):
    rounds = [["apple", "apple", "mug"], ["mug", "pen"], ["watch"]]  # round 2 is after the hand-off
    for k, kinds in enumerate(rounds):
        write_round(tmp_path, k, kinds, conditioned=k < 2)
    assert coverage.trained_kinds(tmp_path) == {"apple": 2, "mug": 2, "pen": 1}
    write_round(tmp_path, 2, rounds[2], conditioned=True)  # the scaffold kept on
    assert coverage.trained_kinds(tmp_path)["watch"] == 1


def test_tasks_are_bucketed_by_exposure_and_seeds_contrast_trained_with_untrained(coverage):
    kind_of = {"a": "apple", "b": "apple", "c": "mug", "d": "pen", "e": "watch"}
    trained = {"apple": 1, "mug": 2, "pen": 5}
    plain = {"a": True, "b": False, "c": True, "d": True, "e": False}
    grpo = {"a": False, "b": False, "c": True, "d": False, "e": True}
    advised = {"a": True, "b": True, "c": True, "d": True, "e": True}
    per = coverage.seed_buckets(kind_of, trained, plain, grpo, advised)
    assert per["0"] == {"gain": [-1], "advice": [1]}
    assert per["1"] == {"gain": [1, 0], "advice": [0, 1]}
    assert per["2"]["gain"] == [0] and per["3+"]["gain"] == [1]
    other = coverage.seed_buckets(kind_of, {}, plain, grpo, advised)  # nothing trained: all untrained
    summary = coverage.summarise({0: per, 1: other})
    assert summary["buckets"]["0"]["tasks"] == 1 + 5
    assert summary["buckets"]["0"]["gain"] == pytest.approx((-1 + 1 + 0 + 0 + 1 - 1) / 6)
    # Seed 0: trained gains [1, 0, 0, 1] (mean 0.5) minus untrained [-1]; seed 1 has no trained kind.
    assert summary["trained_minus_untrained"] == {0: pytest.approx(1.5)}
    assert summary["advice_trained_minus_untrained"] == {0: pytest.approx(0.25 - 1.0)}  # [0, 1, 0, 0] - [1]
