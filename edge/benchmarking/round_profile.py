"""EDGE rounds profiled stage by stage: called directly, then the last round again in alternating pairs,
directly and through the Prefect tasks of ``flows/edge_training.py``, so the difference between the two
kinds of leg is orchestration."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from edge.benchmarking.timers import (
    CallTimer,
    ForwardTimer,
    folder_bytes,
    peak_rss_mb,
    percentiles_ms,
    replaced,
    timing_attribute,
)

STAGE_ORDER = ("collect", "score", "update_bank", "distill", "evaluate")
"""The stages of one round, named as in ``edge.train.STAGES``."""


class StageProbes:
    """Timers installed around what the stages of ``edge.train`` call, for one round.

    During ``collect``: the rollout, the policy's ``act``, prompt building and the forward pass (hooks
    on the actor the stage builds). During the update (``distill``): the distillation teacher, the
    policy update and its forward passes. They replace names in ``edge.train`` (and methods of
    ``Actor`` and ``PromptBuilder``) for the duration of the stage only, in both legs alike, so the
    project's code runs unchanged and the two legs stay comparable."""

    def __init__(self) -> None:
        self.rollout, self.act, self.prompts = CallTimer(), CallTimer(), CallTimer()
        self.forward = ForwardTimer()
        self.teacher, self.update = CallTimer(), CallTimer()
        self.update_forward = ForwardTimer()

    @staticmethod
    def _hooking(actor_class: type, timer: ForwardTimer) -> Callable:
        """A stand-in for the ``Actor`` class that hooks the forward timer onto each actor built."""

        def build(policy, *args, **kwargs):
            actor = actor_class(policy, *args, **kwargs)
            timer.attach([actor.backbone, actor.lm_head], policy.device)
            return actor

        return build

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        import edge.train as train_module
        from edge.policy.actor import Actor
        from edge.policy.prompt import PromptBuilder

        with contextlib.ExitStack() as stack:
            if name == "collect":
                stack.enter_context(self.forward)
                stack.enter_context(replaced(train_module, "Actor", self._hooking(Actor, self.forward)))
                stack.enter_context(timing_attribute(train_module, "rollout", self.rollout))
                stack.enter_context(timing_attribute(Actor, "act", self.act))
                stack.enter_context(timing_attribute(PromptBuilder, "prompt_ids", self.prompts))
                stack.enter_context(timing_attribute(PromptBuilder, "action_ids", self.prompts))
            elif name == "distill":
                stack.enter_context(self.update_forward)
                stack.enter_context(replaced(train_module, "Actor", self._hooking(Actor, self.update_forward)))
                stack.enter_context(timing_attribute(train_module, "distill_samples", self.teacher))
                stack.enter_context(timing_attribute(train_module, "policy_update", self.update))
            yield


def run_round(run, k: int, stages: dict[str, Callable]) -> dict:
    """Round ``k`` of ``run`` with ``stages`` (the functions of ``edge.train`` or their Prefect tasks),
    every stage timed, in the order of ``edge.train.train``."""
    probes = StageProbes()
    times = {}
    round_started = time.perf_counter()
    for name in STAGE_ORDER:
        started = time.perf_counter()
        with probes.stage(name):
            stages[name](run, k)
        times[name] = time.perf_counter() - started
    total = time.perf_counter() - round_started
    folder = run.round_dir(k)
    bank = run.folder / "bank"
    return {"round": k, "stages": times, "total_seconds": total, "evaluated": (folder / "eval.json").exists(),
            "bank_folder_bytes": folder_bytes(bank) if bank.exists() else 0,
            "rollout": rollout_profile(probes, folder), "update": update_profile(probes, folder),
            "folder": str(folder)}


def rollout_profile(probes: StageProbes, folder: Path) -> dict:
    """Where the collect stage's rollout spent its time; actions and tokens from the rollouts written."""
    import pyarrow.parquet as pq

    steps = pq.read_table(folder / "rollouts.parquet",
                          columns=["traj_id", "prompt_ids", "candidate_ids", "response_ids", "conditioned"])
    rows = steps.to_pylist()
    real_tokens = sum(len(r["prompt_ids"]) + sum(len(c) for c in (r["candidate_ids"] or []))
                      + len(r["response_ids"] or []) for r in rows)
    wall = probes.rollout.seconds
    forward = probes.forward
    return {
        "trajectories": len({r["traj_id"] for r in rows}), "actions": len(rows),
        "conditioned_actions": sum(r["conditioned"] for r in rows), "policy_calls": probes.act.calls,
        "wall_seconds": wall, "actions_per_second": len(rows) / wall if wall else 0.0,
        "forward_seconds": forward.seconds, "forward_share": forward.seconds / wall if wall else 0.0,
        "forward_passes": forward.passes, "prompt_building_seconds": probes.prompts.seconds,
        "packing_and_sampling_seconds": probes.act.seconds - forward.seconds - probes.prompts.seconds,
        "env_and_loop_seconds": wall - probes.act.seconds,
        "forward_tokens": forward.tokens, "real_tokens": real_tokens,
        "padding_share": 1 - real_tokens / forward.tokens if forward.tokens else 0.0,
    }


def update_profile(probes: StageProbes, folder: Path) -> dict:
    """Training tokens per second of the policy update (all epochs; as ``train_metrics.json`` counts them)."""
    metrics = json.loads((folder / "train_metrics.json").read_text())
    seconds = probes.update.seconds
    return {"samples": metrics["samples"], "distill_samples": metrics["distill_samples"],
            "tokens": metrics["tokens"], "policy_update_seconds": seconds,
            "tokens_per_second": metrics["tokens"] / seconds if seconds else 0.0,
            "teacher_seconds": probes.teacher.seconds, "forward_seconds": probes.update_forward.seconds,
            "update_stage_peak_memory_mb": metrics.get("peak_memory_mb")}


def prefect_children_rss_mb() -> float:
    """Resident memory of this process's children now (Prefect's ephemeral server runs as one)."""
    import psutil

    total = 0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return total / 2**20


def profile_rounds(params, work: Path, prefect: bool, empty_tasks: int, pairs: int = 3) -> dict:
    """EDGE rounds called directly; then the last round again, ``pairs`` times directly and ``pairs``
    times through the Prefect tasks of ``flows/edge_training.py`` (one flow run each), alternating which
    leg goes first, every leg from its own copy of the run folder as it was before that round.

    The earlier rounds fill the bank, so the measured round can retrieve, condition and distil (whether
    it did is in its record: ``conditioned_actions``, ``distill_samples``; the report says so). Every
    leg starts from a freshly opened run folder (as a resumed run does) and its work is seeded by
    (seed, round, stage), so all legs do identical work and write identical rollouts: the difference
    between them is orchestration plus the machine's noise, which a single pair showed to be +-15% of a
    round on 2 cores; the median of alternating pairs is what the report calls the overhead."""
    import torch

    from edge.config import with_overrides
    from edge.train import STAGES, Run, relax_garbage_collection, write_json

    def leg(name: str):
        return with_overrides(params, [f"train.runs_dir={work / name}"])

    relax_garbage_collection()  # as edge.train.train does
    torch.manual_seed(params.seed)
    run = Run.open(leg("earlier"))
    if run.settings.stores_bank:
        run.bank()  # as edge.train.train does: the empty table is version -1
        run.record_bank_version(-1)
    last = params.train.rounds - 1
    earlier = [run_round(run, k, STAGES) for k in range(last)]

    def copy_before_last(name: str):
        """Parameters of a copy of the run folder as it was before the measured round."""
        leg_params = leg(name)
        target = Path(leg_params.train.runs_dir) / run.folder.name
        shutil.copytree(run.folder, target)
        write_json(target / "params.json", leg_params.model_dump(mode="json"))
        Run(leg_params, target).seal(None, "open", ["params.json"])  # the copy's own record of it
        return leg_params

    def direct_leg(i: int) -> dict:
        return run_round(Run.open(copy_before_last(f"direct-{i}")), last, STAGES)

    if not prefect:
        direct = direct_leg(0)
        return {"method": params.train.method, "rounds": params.train.rounds, "direct": [*earlier, direct],
                "peak_rss_mb_after_direct_rounds": peak_rss_mb()}
    rss_after_direct_rounds = peak_rss_mb()  # before Prefect's client and server exist

    from prefect import flow, task

    from flows.edge_training import PREFECT_STAGES

    @task(name="bench-empty-task", persist_result=False)
    def empty_task() -> None:
        return None

    @flow(name="bench-empty-flow", persist_result=False)
    def empty_flow() -> None:
        return None

    @flow(name="bench-empty-tasks", persist_result=False)
    def empty_tasks_flow(n: int) -> list[float]:
        seconds = []
        for _ in range(n):
            started = time.perf_counter()
            empty_task()
            seconds.append(time.perf_counter() - started)
        return seconds

    @flow(name="bench-perf-round", persist_result=False, validate_parameters=False)
    def round_flow(params_dict: dict, k: int) -> dict:
        from edge.config import parse_params

        return run_round(Run.open(parse_params(params_dict)), k, PREFECT_STAGES)

    # The server starts before any measured leg, so both kinds of leg share a machine with it running.
    started = time.perf_counter()
    empty_flow()  # the first flow run of the process starts the ephemeral API server
    first_flow = time.perf_counter() - started
    started = time.perf_counter()
    empty_flow()
    empty = time.perf_counter() - started
    task_seconds = empty_tasks_flow(empty_tasks)

    def prefect_leg(i: int) -> tuple[dict, float]:
        leg_params = copy_before_last(f"prefect-{i}")
        started = time.perf_counter()
        record = round_flow(leg_params.model_dump(mode="json"), last)
        return record, time.perf_counter() - started

    directs, prefects, flow_walls = [], [], []
    for i in range(pairs):
        if i % 2 == 0:
            directs.append(direct_leg(i))
            record, wall = prefect_leg(i)
        else:
            record, wall = prefect_leg(i)
            directs.append(direct_leg(i))
        prefects.append(record)
        flow_walls.append(wall)
    legs = list(zip(directs, prefects))

    def median_over_pairs(value: Callable[[dict, dict], float]) -> float:
        return float(np.median([value(d, f) for d, f in legs]))

    def ratio(d: dict, f: dict) -> float:
        return (f["total_seconds"] - d["total_seconds"]) / d["total_seconds"]

    return {
        "method": params.train.method, "rounds": params.train.rounds, "direct": [*earlier, directs[0]],
        "peak_rss_mb_after_direct_rounds": rss_after_direct_rounds,
        "prefect": prefects[0],
        "pairs": [{"direct_seconds": d["total_seconds"], "prefect_seconds": f["total_seconds"], "ratio": ratio(d, f),
                   "prefect_first": i % 2 == 1} for i, (d, f) in enumerate(legs)],
        "prefect_flow_wall_seconds": float(np.median(flow_walls)),
        "flow_run_overhead_seconds": float(np.median([w - f["total_seconds"] for w, f in zip(flow_walls, prefects)])),
        "ephemeral_server_startup_seconds": first_flow - empty,
        "empty_flow_run_seconds": empty,
        "empty_task_run": percentiles_ms(task_seconds),
        "round_overhead_seconds": median_over_pairs(lambda d, f: f["total_seconds"] - d["total_seconds"]),
        "round_overhead_ratio": median_over_pairs(ratio),
        "stage_overhead_seconds": {
            name: median_over_pairs(lambda d, f, name=name: f["stages"][name] - d["stages"][name])
            for name in STAGE_ORDER},
        "estimated_task_overhead_ratio": (len(STAGE_ORDER) * float(np.median(task_seconds))
                                          / float(np.median([d["total_seconds"] for d in directs]))),
        "identical_rollouts": all(_same_rollouts(Path(directs[0]["folder"]), Path(x["folder"]))
                                  for x in [*directs[1:], *prefects]),
        "prefect_server_rss_mb": prefect_children_rss_mb(),
        "peak_rss_mb_after_prefect_round": peak_rss_mb(),
    }


def _same_rollouts(a: Path, b: Path) -> bool:
    import pyarrow.parquet as pq

    return pq.read_table(a / "rollouts.parquet").equals(pq.read_table(b / "rollouts.parquet"))
