"""The performance profile of EDGE and the cost of its experience bank (`edge bench perf`).

One invocation measures, in one process and against the project's own code paths:

- environment steps per second for every built-in environment (time inside ``reset``/``step``);
- rollout actions per second on a realistic round (``tasks_per_round`` x ``group_size`` from the
  parameters) and the share of rollout wall time spent inside the model's forward pass, timed by
  module hooks on the actor's backbone and output layer: everything else (prompt building, packing
  rows, sampling, environments, bookkeeping) is overhead that a faster loop could remove;
- training tokens per second of the GRPO update on those rollouts;
- time per stage of EDGE rounds (collect, score, update-bank, update, evaluate) called directly, and
  the same rounds through Prefect tasks in one flow run, from the same start, so that the ratio of
  the two is the orchestration overhead; the ephemeral server's startup is reported on its own;
- peak resident memory of this process (``ru_maxrss``) after those rounds, and of Prefect's server;
- bank retrieval latency (p50, p99) at several table sizes, without and with a LanceDB IVF_FLAT index,
  plus the MiniLM query embedding that the real bank adds in front of every search;
- the cost of the bank per round: retrieval, synthesis, pruning, credit, the distillation teacher,
  the extra prompt tokens of the experience block and the bank's size on disk, against the round.

The numbers depend on the machine and on its load: the report records both (CPU count, load average
before and after). Nothing here is tuned toward the issue's aims; they are reported beside the values.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import random
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

STAGE_ORDER = ("collect", "score", "update_bank", "distill", "evaluate")
"""The stages of one round, named as in ``edge.train.STAGES``."""

AIMS = {
    "orchestration_overhead": 0.05,
    "rollout_forward_share": 0.70,
    "retrieval_p50_ms_at_100k": 10.0,
}
"""What issue 7 asks for; reported against, never tuned toward."""


# ----- options ---------------------------------------------------------------------------------
@dataclass
class PerfOptions:
    """What to measure and how much of it. ``quick`` is for tests: tiny sizes, the hash embedder."""

    params_path: Path = Path("params.yaml")
    overrides: list[str] = field(default_factory=list)
    """``section.key=value`` applied after the preset's own overrides."""
    out_dir: Path | None = Path("benchmarks/results")
    """Where perf.md and perf.json go (None: write nothing)."""
    quick: bool = False
    env_episodes: int = 200
    rounds: int = 2
    """EDGE rounds per leg; the last one has a non-empty bank and an evaluation."""
    bank_sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    queries: int = 100
    """Retrieval queries per (size, index) cell."""
    minilm_queries: int = 50
    empty_tasks: int = 20
    """Empty Prefect task runs timed to get the fixed cost of one task run."""
    prefect: bool = True
    track: bool = True
    """Log the report to MLflow (experiment ``bench-perf``)."""
    work_dir: Path | None = None
    """Scratch folder for runs and banks (default: a temporary folder, removed afterwards)."""
    bank_run: Path | None = None
    """A finished EDGE run folder: also tabulate the cost of the bank in each of its rounds."""

    @classmethod
    def preset(cls, quick: bool = False, **changes: Any) -> PerfOptions:
        """The default sizes, or the quick ones (seconds, for tests); ``changes`` win over both."""
        if quick:
            base = cls(quick=True, env_episodes=10, bank_sizes=(200, 1_000), queries=20, minilm_queries=3,
                       empty_tasks=5)
        else:
            base = cls()
        return _replace(base, **changes)

    def preset_overrides(self) -> list[str]:
        """Parameter overrides of the preset: the quick one shrinks the round and uses the hash embedder."""
        if not self.quick:
            return []
        return ["data.train_tasks=20", "rollout.tasks_per_round=2", "rollout.group_size=3", "rollout.max_steps=6",
                "eval.episodes=2", "bank.embedder=hash", "grpo.epochs=1"]


def _replace(options: PerfOptions, **changes: Any) -> PerfOptions:
    data = {**asdict(options), **{k: v for k, v in changes.items() if v is not None}}
    return PerfOptions(**data)


# ----- timers ----------------------------------------------------------------------------------
class CallTimer:
    """Accumulated wall time and count of calls to the functions it wraps."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.calls += 1

        return timed


@contextlib.contextmanager
def timing_attribute(owner: Any, name: str, timer: CallTimer) -> Iterator[CallTimer]:
    """Replace ``owner.name`` by a timed wrapper for the duration of the block (an instance's method,
    a module's function), so the benchmark observes the project's code without changing it."""
    own = name in vars(owner)
    original = getattr(owner, name)
    setattr(owner, name, timer.wrap(original))
    try:
        yield timer
    finally:
        if own:
            setattr(owner, name, original)
        else:
            delattr(owner, name)


class ForwardTimer:
    """Wall time inside forward calls of the modules attached, via hooks: the actor is not edited.

    Only the outermost call is timed, so nested hooked modules are never counted twice. The input
    size of every call that gets ``input_ids`` is added up: the tokens the model actually processed,
    padding included. On an accelerator the hooks synchronise, or the time would land elsewhere.
    Used as a context manager: leaving it removes every hook attached."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.passes = 0
        """Calls that received ``input_ids`` (one per micro-batch through the backbone)."""
        self.tokens = 0
        self._depth = 0
        self._started = 0.0
        self._handles: list = []
        self._sync: Callable[[], None] = lambda: None

    def attach(self, modules: list, device=None) -> None:
        import torch

        if device is not None and torch.device(device).type == "cuda":
            self._sync = torch.cuda.synchronize
        for module in modules:
            self._handles.append(module.register_forward_pre_hook(self._before, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._after, with_kwargs=True, always_call=True))

    def _before(self, module, args, kwargs) -> None:
        if self._depth == 0:
            self._sync()
            self._started = time.perf_counter()
        self._depth += 1
        ids = kwargs.get("input_ids")
        if ids is not None:
            self.passes += 1
            self.tokens += int(ids.numel())

    def _after(self, module, args, kwargs, output) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._sync()
            self.seconds += time.perf_counter() - self._started
            self.calls += 1

    def __enter__(self) -> ForwardTimer:
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    """p50, p99, mean and max of latencies given in seconds, in milliseconds."""
    values = np.asarray(seconds, dtype=float) * 1000.0
    return {"p50_ms": float(np.percentile(values, 50)), "p99_ms": float(np.percentile(values, 99)),
            "mean_ms": float(values.mean()), "max_ms": float(values.max()), "n": int(values.size)}


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


# ----- environments ----------------------------------------------------------------------------
def measure_env(env_name: str, agent_name: str, episodes: int, seed: int) -> dict:
    """Steps per second inside the environment (``reset`` + ``step``) and end to end with the agent."""
    from edge.envs.play import play_episode
    from edge.envs.registry import generate_tasks, make_agent, make_env

    tasks = generate_tasks(env_name, "train", episodes, seed)
    env, agent = make_env(env_name), make_agent(env_name, agent_name, seed)
    play_episode(env, agent, tasks[0])  # imports, search index and caches outside the clock
    started = time.perf_counter()
    results = [play_episode(env, agent, task) for task in tasks]
    wall = time.perf_counter() - started
    steps = sum(r.steps for r in results)
    env_seconds = sum(r.env_seconds for r in results)
    return {"env": env_name, "agent": agent_name, "episodes": episodes, "steps": steps,
            "env_steps_per_second": steps / env_seconds, "end_to_end_steps_per_second": steps / wall,
            "success_rate": sum(r.won for r in results) / episodes}


# ----- rounds: stages direct and through Prefect, with probes -----------------------------------
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


@contextlib.contextmanager
def replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    """``owner.name = value`` for the duration of the block."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


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


def profile_rounds(params, work: Path, prefect: bool, empty_tasks: int) -> dict:
    """EDGE rounds called directly; then the last round once more through the Prefect tasks of
    ``flows/edge_training.py`` in one flow run, from a copy of the run folder as it was before that round.

    The earlier rounds fill the bank, so the measured round retrieves, conditions and distils. Both
    legs of the last round start from a freshly opened run folder (as a resumed run does) and their
    work is seeded by (seed, round, stage), so they do identical work and write identical rollouts:
    the difference between them is orchestration."""
    import torch

    from edge.config import with_overrides
    from edge.train import STAGES, Run, write_json

    def leg(name: str):
        return with_overrides(params, [f"train.runs_dir={work / name}"])

    torch.manual_seed(params.seed)
    direct_params = leg("direct")
    run = Run.open(direct_params)
    if run.settings.use_bank:
        run.bank()  # as edge.train.train does: the empty table is version -1
        run.record_bank_version(-1)
    last = params.train.rounds - 1
    earlier = [run_round(run, k, STAGES) for k in range(last)]
    prefect_params = leg("prefect")
    if prefect:
        target = Path(prefect_params.train.runs_dir) / run.folder.name
        shutil.copytree(run.folder, target)
        write_json(target / "params.json", prefect_params.model_dump(mode="json"))
    direct = run_round(Run.open(direct_params), last, STAGES)
    result: dict[str, Any] = {"method": params.train.method, "rounds": params.train.rounds,
                              "direct": [*earlier, direct], "peak_rss_mb_after_direct_rounds": peak_rss_mb()}
    if not prefect:
        return result

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

    started = time.perf_counter()
    empty_flow()  # the first flow run of the process starts the ephemeral API server
    first_flow = time.perf_counter() - started
    started = time.perf_counter()
    empty_flow()
    empty = time.perf_counter() - started
    task_seconds = empty_tasks_flow(empty_tasks)

    started = time.perf_counter()
    through_prefect = round_flow(prefect_params.model_dump(mode="json"), last)
    flow_wall = time.perf_counter() - started
    overhead = through_prefect["total_seconds"] - direct["total_seconds"]
    result |= {
        "prefect": through_prefect,
        "prefect_flow_wall_seconds": flow_wall,
        "flow_run_overhead_seconds": flow_wall - through_prefect["total_seconds"],
        "ephemeral_server_startup_seconds": first_flow - empty,
        "empty_flow_run_seconds": empty,
        "empty_task_run": percentiles_ms(task_seconds),
        "round_overhead_seconds": overhead,
        "round_overhead_ratio": overhead / direct["total_seconds"],
        "stage_overhead_seconds": {name: through_prefect["stages"][name] - direct["stages"][name]
                                   for name in STAGE_ORDER},
        "estimated_task_overhead_ratio": (len(STAGE_ORDER) * float(np.median(task_seconds))
                                          / direct["total_seconds"]),
        "identical_rollouts": _same_rollouts(Path(direct["folder"]), Path(through_prefect["folder"])),
        "prefect_server_rss_mb": prefect_children_rss_mb(),
        "peak_rss_mb_after_prefect_round": peak_rss_mb(),
    }
    return result


def _same_rollouts(a: Path, b: Path) -> bool:
    import pyarrow.parquet as pq

    return pq.read_table(a / "rollouts.parquet").equals(pq.read_table(b / "rollouts.parquet"))


# ----- cost of the bank --------------------------------------------------------------------------
def bank_cost(round_record: dict) -> dict:
    """What the bank cost in one round, from the files the stages wrote and the probes' timers."""
    import pyarrow.parquet as pq

    folder = Path(round_record["folder"])
    collect = json.loads((folder / "collect.json").read_text())
    metrics = json.loads((folder / "train_metrics.json").read_text())
    changes_file = folder / "bank_changes.json"
    changes = json.loads(changes_file.read_text()) if changes_file.exists() else None
    steps = pq.read_table(folder / "rollouts.parquet", columns=["prompt_ids", "conditioned"]).to_pylist()
    prompt_tokens = sum(len(s["prompt_ids"]) for s in steps)
    conditioned_steps = sum(s["conditioned"] for s in steps)
    total = round_record["total_seconds"]
    seconds = {
        "retrieval": collect["retrieval_seconds"],
        "credit": changes["seconds"]["credit"] if changes else 0.0,
        "synthesis": changes["seconds"]["synthesis"] if changes else 0.0,
        "prune": changes["seconds"]["prune"] if changes else 0.0,
        "update_bank_stage": round_record["stages"]["update_bank"],
        "distill_teacher": round_record["update"]["teacher_seconds"],
    }
    return {
        "round": round_record["round"],
        "round_seconds": total,
        "seconds": seconds,
        "share_of_round": {k: v / total for k, v in seconds.items()},
        "bank_seconds": seconds["retrieval"] + seconds["update_bank_stage"] + seconds["distill_teacher"],
        "experience_tokens": metrics["experience_tokens"],
        "prompt_tokens": prompt_tokens,
        "experience_token_share": metrics["experience_tokens"] / prompt_tokens if prompt_tokens else 0.0,
        "conditioned_steps": conditioned_steps,
        "steps": len(steps),
        "experience_tokens_per_conditioned_step": (metrics["experience_tokens"] / conditioned_steps
                                                   if conditioned_steps else 0.0),
        "bank_active_entries": changes["size_active"] if changes else 0,
        "bank_total_entries": changes["size_total"] if changes else 0,
        "bank_folder_bytes": round_record["bank_folder_bytes"],
        "snapshot_bytes": changes["snapshot_bytes"] if changes else 0,
    }


def bank_cost_of_run(run_folder: Path) -> list[dict]:
    """The cost of the bank in every round of a finished training run, from the files its stages wrote
    (``collect.json``, ``bank_changes.json``, ``train_metrics.json``, ``eval.json``, the rollouts).

    The round's total is the sum of the recorded stage times (collect, update-bank, update, evaluate;
    the score stage records none and takes well under a second)."""
    import pyarrow.parquet as pq

    rows = []
    for folder in sorted(Path(run_folder).glob("round_*")):
        files = {name: folder / f"{name}.json" for name in ("collect", "bank_changes", "train_metrics", "eval")}
        if not (files["train_metrics"].exists() and files["collect"].exists()):
            continue
        collect = json.loads(files["collect"].read_text())
        metrics = json.loads(files["train_metrics"].read_text())
        changes = json.loads(files["bank_changes"].read_text()) if files["bank_changes"].exists() else None
        evaluation = json.loads(files["eval"].read_text()) if files["eval"].exists() else {}
        bank_seconds = changes["seconds"] if changes else {"credit": 0.0, "synthesis": 0.0, "prune": 0.0, "total": 0.0}
        total = (collect["collect_seconds"] + bank_seconds["total"] + metrics["update_seconds"]
                 + evaluation.get("eval_seconds", 0.0))
        steps = pq.read_table(folder / "rollouts.parquet", columns=["prompt_ids", "conditioned"]).to_pylist()
        prompt_tokens = sum(len(s["prompt_ids"]) for s in steps)
        rows.append({
            "round": metrics["round"], "round_seconds": total, "retrieval_seconds": collect["retrieval_seconds"],
            "credit_seconds": bank_seconds["credit"], "synthesis_seconds": bank_seconds["synthesis"],
            "prune_seconds": bank_seconds["prune"], "update_bank_seconds": bank_seconds["total"],
            "bank_share": (collect["retrieval_seconds"] + bank_seconds["total"]) / total if total else 0.0,
            "experience_tokens": metrics["experience_tokens"], "prompt_tokens": prompt_tokens,
            "conditioned_steps": sum(s["conditioned"] for s in steps), "distill_samples": metrics["distill_samples"],
            "bank_active_entries": changes["size_active"] if changes else 0,
            "snapshot_bytes": changes["snapshot_bytes"] if changes else 0,
        })
    return rows


# ----- retrieval at scale ----------------------------------------------------------------------
def synthetic_bank_table(n: int, words: list[str], task_types: list[str], seed: int, embedder):
    """``n`` bank rows whose keys are three words of the environment's instructions, embedded by
    ``embedder``: queries share words with many keys, as real ones do. 90% active, 5% for any type."""
    import pyarrow as pa

    from edge.bank.store import ANY_TASK_TYPE, bank_schema

    rng = random.Random(seed)
    keys = [" ".join(rng.sample(words, 3)) for _ in range(n)]
    vectors = np.concatenate([embedder.embed(keys[i:i + 4096]) for i in range(0, n, 4096)])
    types = [ANY_TASK_TYPE if rng.random() < 0.05 else rng.choice(task_types) for _ in range(n)]
    status = ["active" if rng.random() < 0.9 else "pruned" for _ in range(n)]
    schema = bank_schema(embedder.dim, embedder.name)
    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    columns = {
        "id": [f"g{i + 1:06d}" for i in range(n)], "text": [f"try the {k} first" for k in keys],
        "kind": ["try"] * n, "task_type": types, "signature": [f"{t}|{k}" for t, k in zip(types, keys)],
        "key": keys, "vector": pa.FixedSizeListArray.from_arrays(flat, embedder.dim),
        "utility": [0.0] * n, "uses": [0] * n, "positive_credit": [0.0] * n, "created_round": [0] * n,
        "last_used_round": [0] * n, "status": status, "prune_reason": [None] * n, "status_round": [None] * n,
        "provenance": [[] for _ in range(n)], "synthesizer": ["synthetic"] * n,
        "history_rounds": [[] for _ in range(n)], "history_utility": [[] for _ in range(n)],
        "history_success_plain": [[] for _ in range(n)], "history_success_conditioned": [[] for _ in range(n)],
    }
    return pa.Table.from_pydict(columns, schema=schema)


def tie_aware_recall(exact: list[float], approximate: list[float], eps: float = 1e-6) -> float:
    """Share of the exact top-k that the approximate search matched, by similarity rather than id:
    many synthetic keys tie, and which of several equally similar entries comes back is arbitrary."""
    if not exact:
        return 1.0
    kth = min(exact)
    return min(sum(s >= kth - eps for s in approximate), len(exact)) / len(exact)


def measure_retrieval(sizes: tuple[int, ...], queries: int, work: Path, params, seed: int) -> list[dict]:
    """Latency of ``ExperienceBank.retrieve`` as ``retrieve_experience`` calls it (4 x top_k candidates,
    active rows of the task's type, prefiltered): LanceDB flat, LanceDB with an IVF_FLAT cosine index,
    and the in-memory copy of the active vectors that training uses by default (``index_seconds``
    is then the time to build that copy, once per table version).

    The hash embedder embeds keys and queries, so the search is what is timed (MiniLM's query
    embedding is measured separately). The similarity threshold is applied in Python after the search,
    so passing -1 changes no latency and lets recall@k of the index be measured against flat search.
    IVF_FLAT because it is valid at every size here (PQ wants many rows per code, HNSW took minutes to
    build 100k rows on 2 cores) and keeps exact distances inside the partitions it probes."""
    import lancedb
    from lancedb.index import IvfFlat

    from edge.bank.embedder import HashEmbedder
    from edge.bank.store import ExperienceBank
    from edge.envs.registry import generate_tasks
    from edge.text import split_words

    env = params.train.env
    pool = generate_tasks(env, "train", 500, seed)
    words = sorted({w for t in pool for w in split_words(t.instruction)})
    task_types = sorted({t.task_type for t in pool})
    probe = generate_tasks(env, "test_seen", queries, seed)
    k = 4 * params.bank.top_k
    rows = []
    for n in sizes:
        folder = work / f"bank_{n}"
        embedder = HashEmbedder()
        started = time.perf_counter()
        table = synthetic_bank_table(n, words, task_types, seed, embedder)
        lancedb.connect(folder).create_table("bank", data=table)
        build = time.perf_counter() - started
        lance = ExperienceBank.open(folder, embedder, in_memory=False)
        memory = ExperienceBank.open(folder, embedder, in_memory=True)
        for index in ("none", "ivf_flat", "in_memory"):
            bank = memory if index == "in_memory" else lance
            started = time.perf_counter()
            if index == "ivf_flat":
                # Cosine, like the queries; LanceDB picks the number of partitions from the row count.
                lance._tbl.create_index("vector", config=IvfFlat(distance_type="cosine"))
            elif index == "in_memory":
                memory.retrieve(probe[0].instruction, k, -1.0, probe[0].task_type)  # builds the copy
            index_seconds = time.perf_counter() - started if index != "none" else 0.0
            for task in probe[:3]:  # open files and caches outside the clock
                bank.retrieve(task.instruction, k, -1.0, task.task_type)
            latencies, found = [], []
            for task in probe:
                embedder.embed([task.instruction])  # cached now: the timed call measures the search
                started = time.perf_counter()
                hits = bank.retrieve(task.instruction, k, -1.0, task.task_type)
                latencies.append(time.perf_counter() - started)
                found.append([score for _, score in hits])
            rows.append({"entries": n, "index": index, "build_seconds": build, "index_seconds": index_seconds,
                         "latency": percentiles_ms(latencies), "sims": found,
                         "disk_bytes": folder_bytes(folder)})
        flat = rows[-3]
        for other in rows[-2:]:
            recalls = [tie_aware_recall(a, b) for a, b in zip(flat["sims"], other["sims"]) if a]
            other["recall_at_k"] = float(np.mean(recalls)) if recalls else None
        flat["recall_at_k"] = 1.0
    for row in rows:
        del row["sims"]
    return rows


def measure_minilm(queries: int, params, seed: int) -> dict:
    """Query embedding by the real MiniLM embedder: first load, then one uncached text per call."""
    from edge.bank.embedder import MiniLMEmbedder
    from edge.envs.registry import generate_tasks

    texts = [t.instruction for t in generate_tasks(params.train.env, "test_unseen", queries + 1, seed)]
    embedder = MiniLMEmbedder()
    started = time.perf_counter()
    embedder.embed([texts[0]])  # the model loads once per process (or was loaded by the rounds)
    first = time.perf_counter() - started
    embedder.embed(["warm up", "go to fridge 1", "put a clean apple in the fridge"])  # first shapes are slow
    latencies = []
    for text in dict.fromkeys(texts[1:]):  # distinct texts, so the cache never answers
        started = time.perf_counter()
        embedder.embed([text])
        latencies.append(time.perf_counter() - started)
    return {"first_call_seconds": first, "latency": percentiles_ms(latencies)}


# ----- the whole benchmark ---------------------------------------------------------------------
def machine() -> dict:
    import torch

    return {"platform": platform.platform(), "python": platform.python_version(), "processor": platform.processor()
            or platform.machine(), "cpus": os.cpu_count(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "load_average": list(os.getloadavg())}


def run_perf(options: PerfOptions, progress: Callable[[str], None] = print) -> dict:
    """Measure everything, write perf.json and perf.md (if ``out_dir``), log to MLflow (if ``track``)."""
    from edge.config import load_params, with_overrides

    started = time.perf_counter()
    params = with_overrides(load_params(options.params_path), options.preset_overrides() + list(options.overrides))
    params = with_overrides(params, ["train.method=edge", f"train.rounds={options.rounds}"])
    base = params.train.base_checkpoint
    if base is not None and not Path(base).is_dir():
        progress(f"no base checkpoint at {base}: using an untrained tiny policy (run `edge warmup` for the real one)")
        params = with_overrides(params, ["train.base_checkpoint=null"])
    seed = params.seed
    report: dict[str, Any] = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"), "quick": options.quick,
        "machine": machine(), "aims": AIMS,
        "policy": {"checkpoint": str(params.train.base_checkpoint) if params.train.base_checkpoint else None,
                   "model": params.policy.model, "mode": params.policy.mode},
        "params": {"env": params.train.env, "tasks_per_round": params.rollout.tasks_per_round,
                   "group_size": params.rollout.group_size, "eval_episodes": params.eval.episodes,
                   "eval_every": params.eval.every, "embedder": params.bank.embedder,
                   "grpo_epochs": params.grpo.epochs, "overrides": options.preset_overrides() + options.overrides},
    }
    scratch = options.work_dir or Path(tempfile.mkdtemp(prefix="edge-bench-perf-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        progress("environments ...")
        report["environments"] = [measure_env(env, agent, options.env_episodes, seed)
                                  for env in params.data.envs for agent in ("random", "expert")]

        progress(f"{options.rounds} EDGE rounds called directly"
                 + (", and the last again through Prefect ..." if options.prefect else " ..."))
        rounds = profile_rounds(params, scratch / "runs", options.prefect, options.empty_tasks)
        report["rounds"] = rounds
        report["bank_cost"] = [bank_cost(r) for r in rounds["direct"]]
        report["memory"] = {"peak_rss_mb_after_rounds": peak_rss_mb(),
                            "prefect_server_rss_mb": rounds.get("prefect_server_rss_mb"),
                            "measured": "ru_maxrss of the benchmark process after the EDGE rounds (the components "
                                        "of `edge train` in one process: policy, optimizer, bank, MiniLM, Prefect "
                                        "client)"}

        progress("retrieval latency " + ", ".join(f"{n:,}" for n in options.bank_sizes) + " entries ...")
        report["retrieval"] = measure_retrieval(options.bank_sizes, options.queries, scratch, params, seed)
        report["minilm_query"] = measure_minilm(options.minilm_queries, params, seed)
        if options.bank_run is not None:
            report["bank_cost_of_run"] = {"run": str(options.bank_run), "rounds": bank_cost_of_run(options.bank_run),
                                          "bank_folder_bytes": folder_bytes(Path(options.bank_run) / "bank")}
        report["memory"]["peak_rss_mb_total"] = peak_rss_mb()
    finally:
        if options.work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    report["machine"]["load_average_after"] = list(os.getloadavg())
    report["wall_seconds"] = time.perf_counter() - started
    report["against_aims"] = against_aims(report)
    for row in [*rounds["direct"], rounds.get("prefect")]:
        if row:
            row.pop("folder", None)  # a scratch path, gone by now
    if options.out_dir is not None:
        write_report(report, Path(options.out_dir))
    if options.track:
        log_to_mlflow(report, options.out_dir)
    return report


def against_aims(report: dict) -> list[dict]:
    """Each aim of the issue beside the measured value; ``met`` is None when it was not measured."""
    rows = []
    rounds = report["rounds"]
    ratio = rounds.get("round_overhead_ratio")
    rows.append({"aim": "orchestration overhead < 5% of a round", "measured": ratio,
                 "met": None if ratio is None else ratio < AIMS["orchestration_overhead"]})
    share = rounds["direct"][-1]["rollout"]["forward_share"]
    rows.append({"aim": ">= 70% of rollout time in the model's forward pass", "measured": share,
                 "met": share >= AIMS["rollout_forward_share"]})
    largest = max(r["entries"] for r in report["retrieval"])
    for row in report["retrieval"]:
        if row["entries"] == largest:
            p50 = row["latency"]["p50_ms"]
            rows.append({"aim": f"retrieval p50 < 10 ms at 100k entries (measured at {largest:,}, index "
                                f"{row['index']})", "measured": p50,
                         "met": p50 < AIMS["retrieval_p50_ms_at_100k"] if largest >= 100_000 else None})
    return rows


# ----- output ----------------------------------------------------------------------------------
def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def render_markdown(report: dict) -> str:
    """The report as Markdown tables, in the order of issue 7's item 3, then item 2."""
    m, p = report["machine"], report["params"]
    command = "edge bench perf" + (" --quick" if report["quick"] else "")
    out = [
        "# Performance profile and cost of the bank",
        "",
        f"`{command}` on {m['platform']}, {m['cpus']} CPUs ({m['processor']}), Python {m['python']}, torch "
        f"{m['torch']} ({m['torch_threads']} threads); {report['created']}; took {report['wall_seconds']:.0f} s. "
        f"Load average before {m['load_average'][0]:.1f}, after {m['load_average_after'][0]:.1f} (1 min): a loaded "
        "machine inflates every time below.",
        "",
        f"Policy: {report['policy']['model']} ({report['policy']['mode']} mode), checkpoint "
        f"`{report['policy']['checkpoint'] or 'none (untrained)'}`. Round: {p['tasks_per_round']} tasks x "
        f"{p['group_size']} trajectories on `{p['env']}`, {p['eval_episodes']} evaluation episodes (plain and with "
        f"bank; params evaluate every {p['eval_every']} rounds), embedder `{p['embedder']}`, {p['grpo_epochs']} "
        "GRPO epochs.",
        "",
        "## Against the aims of issue 7",
        "",
    ]
    out += _table(["aim", "measured", "met"],
                  [[a["aim"], _pct(a["measured"]) if a["measured"] is not None and a["measured"] <= 1
                    and "ms" not in a["aim"] else _f(a["measured"]) + (" ms" if "ms" in a["aim"] else ""),
                    {True: "yes", False: "no", None: "not measured"}[a["met"]]] for a in report["against_aims"]])

    out += ["## Environment steps per second", ""]
    out += _table(["env", "agent", "episodes", "steps", "env steps/s (inside reset/step)", "end-to-end steps/s"],
                  [[r["env"], r["agent"], str(r["episodes"]), str(r["steps"]), _f(r["env_steps_per_second"], 0),
                    _f(r["end_to_end_steps_per_second"], 0)] for r in report["environments"]])

    rd = report["rounds"]
    legs = [(f"round {x['round']}", x) for x in rd["direct"]]
    if "prefect" in rd:
        legs.append((f"round {rd['prefect']['round']} via Prefect", rd["prefect"]))
    out += ["## Rollout (inside the collect stage)", "",
            "Forward time from hooks on the actor's backbone and output layer; the rest of the rollout is "
            "overhead: prompt building, packing rows and masks, sampling, environments, the loop itself. "
            "Round 0 starts with an empty bank (all plain); later rounds condition part of each group.", ""]
    rows = []
    for label, x in legs:
        r = x["rollout"]
        wall = r["wall_seconds"] or float("nan")
        rows.append([label, f"{r['actions']:,} ({r['conditioned_actions']:,})", _f(wall),
                     _f(r["actions_per_second"], 0), _pct(r["forward_share"]),
                     _pct(r["prompt_building_seconds"] / wall), _pct(r["packing_and_sampling_seconds"] / wall),
                     _pct(r["env_and_loop_seconds"] / wall),
                     f"{r['forward_passes']} / {r['policy_calls']}", _pct(r["padding_share"])])
    out += _table(["", "actions (conditioned)", "rollout s", "actions/s", "forward pass", "prompt building",
                   "packing + sampling", "envs + loop", "forward passes / policy calls", "padding"], rows)

    out += ["## GRPO update (inside the update stage)", "",
            "Tokens as `train_metrics.json` counts them (prompt and candidates of every sample, times epochs), over "
            "the time of `policy_update`; the distillation teacher's pass over the plain states is timed apart.", ""]
    out += _table(["", "samples (+ distill)", "tokens", "policy update s", "tokens/s", "teacher s"],
                  [[label, f"{x['update']['samples']:,} ({x['update']['distill_samples']:,})",
                    f"{x['update']['tokens']:,}", _f(x["update"]["policy_update_seconds"]),
                    _f(x["update"]["tokens_per_second"], 0), _f(x["update"]["teacher_seconds"])] for label, x in legs])

    out += ["## Time per stage", ""]
    rows = [[name] + [_f(x["stages"][name]) if name != "evaluate" or x["evaluated"] else "skipped"
                      for _, x in legs] for name in STAGE_ORDER]
    rows.append(["**round**"] + [_f(x["total_seconds"]) for _, x in legs])
    out += _table(["seconds", *[label for label, _ in legs]], rows)
    out += [f"Evaluation runs in the last round ({p['eval_episodes']} episodes plain and as many with the bank); a "
            f"training run evaluates every {p['eval_every']} rounds and after the last.", ""]

    out += ["## Orchestration overhead (Prefect)", ""]
    if "prefect" in rd:
        d, f = rd["direct"][-1], rd["prefect"]
        out += _table(["", "value"], [
            [f"round {d['round']} direct / through Prefect (s)",
             f"{d['total_seconds']:.2f} / {f['total_seconds']:.2f}"],
            ["**overhead of the round (ratio)**", _pct(rd["round_overhead_ratio"])],
            ["by stage (s)", ", ".join(f"{k} {v:+.2f}" for k, v in rd["stage_overhead_seconds"].items())],
            ["one empty task run (p50 / p99 ms)",
             f"{rd['empty_task_run']['p50_ms']:.1f} / {rd['empty_task_run']['p99_ms']:.1f}"],
            ["5 empty task runs as a share of the direct round", _pct(rd["estimated_task_overhead_ratio"])],
            ["flow run around the round, once per training (s)", _f(rd["flow_run_overhead_seconds"])],
            ["empty flow run (s)", _f(rd["empty_flow_run_seconds"])],
            ["ephemeral server startup, once per process (s)", _f(rd["ephemeral_server_startup_seconds"])],
            ["identical rollouts in both legs", str(rd["identical_rollouts"])],
        ])
        out += ["Both legs run the same round from the same copy of the run folder in this process (direct first). "
                "The whole-round ratio carries the machine's noise (on a loaded machine it can even come out "
                "negative); the empty-task line is the fixed cost Prefect adds per stage.", ""]
    else:
        out += ["Not measured (`--no-prefect`).", ""]

    mem = report["memory"]
    out += ["## Memory", ""]
    out += _table(["", "MB"], [
        ["peak RSS of the benchmark process after the EDGE rounds", _f(mem["peak_rss_mb_after_rounds"], 0)],
        ["peak RSS of the benchmark process at the end (after the retrieval banks)", _f(mem["peak_rss_mb_total"], 0)],
        ["Prefect ephemeral server (child process RSS)", _f(mem["prefect_server_rss_mb"], 0)],
    ])

    out += ["## Bank retrieval latency", "",
            "`ExperienceBank.retrieve` as training calls it (top 4 x top_k, active rows of the task's type, "
            "prefiltered), synthetic entries embedded by the hash embedder (384-d), queries from `test_seen`. "
            "`none`: a LanceDB flat scan; `ivf_flat`: LanceDB with an IVF_FLAT index; `in_memory`: the copy of the "
            "active vectors that training searches by default (`bank.in_memory_search`; its build time is the "
            "index column, paid once per table version).", ""]
    out += _table(["entries", "index", "p50 ms", "p99 ms", "recall@k vs flat", "index build s", "disk MB"],
                  [[f"{x['entries']:,}", x["index"], _f(x["latency"]["p50_ms"]), _f(x["latency"]["p99_ms"]),
                    _f(x["recall_at_k"]), _f(x["index_seconds"]), _f(x["disk_bytes"] / 2**20, 1)]
                   for x in report["retrieval"]])
    q = report["minilm_query"]
    out += [f"MiniLM query embedding (the real embedder adds it before every search): p50 "
            f"{q['latency']['p50_ms']:.1f} ms, p99 {q['latency']['p99_ms']:.1f} ms; first call "
            f"{q['first_call_seconds']:.1f} s.", ""]

    out += ["## Cost of the bank per round", "",
            "From the EDGE rounds above (direct leg): the stages' own timing files plus timers on the "
            "distillation teacher.", ""]
    costs = report["bank_cost"]
    header = ["", *[f"round {c['round']}" for c in costs]]

    def line(label: str, key: str) -> list[str]:
        return [label, *[f"{c['seconds'][key]:.3f} s ({_pct(c['share_of_round'][key])})" for c in costs]]

    out += _table(header, [
        line("retrieval (collect)", "retrieval"),
        line("credit", "credit"),
        line("synthesis", "synthesis"),
        line("pruning", "prune"),
        line("update-bank stage (all of it)", "update_bank_stage"),
        line("distillation teacher pass", "distill_teacher"),
        ["**bank total** (retrieval + update-bank + teacher)",
         *[f"{c['bank_seconds']:.2f} s ({_pct(c['bank_seconds'] / c['round_seconds'])})" for c in costs]],
        ["round total", *[f"{c['round_seconds']:.2f} s" for c in costs]],
        ["experience tokens (share of prompt tokens)",
         *[f"{c['experience_tokens']:,} ({_pct(c['experience_token_share'])})" for c in costs]],
        ["experience tokens per conditioned step", *[_f(c["experience_tokens_per_conditioned_step"], 1)
                                                     for c in costs]],
        ["active / total entries", *[f"{c['bank_active_entries']} / {c['bank_total_entries']}" for c in costs]],
        ["bank on disk (LanceDB folder, all versions)", *[f"{c['bank_folder_bytes'] / 1024:,.0f} KiB"
                                                          for c in costs]],
        ["Parquet snapshot", *[f"{c['snapshot_bytes'] / 1024:,.0f} KiB" for c in costs]],
    ])
    out += ["The with-bank half of each evaluation (retrieval plus a second set of episodes) is also a cost "
            "of the bank; it is inside the evaluate stage above. A round whose tasks retrieved nothing shows no "
            "experience tokens and no distillation: `--bank-run` tabulates a whole training run.", ""]
    if "bank_cost_of_run" in report:
        run = report["bank_cost_of_run"]
        out += [f"### Over the rounds of `{run['run']}`", "",
                f"From the run's own timing files; its bank folder holds {run['bank_folder_bytes'] / 1024:,.0f} KiB "
                "(every version).", ""]
        out += _table(["round", "round s", "retrieval s", "synthesis s", "pruning s", "update-bank s", "bank share",
                       "conditioned steps", "experience tokens (share)", "distill samples", "active entries",
                       "snapshot KiB"],
                      [[str(r["round"]), _f(r["round_seconds"], 1), _f(r["retrieval_seconds"], 3),
                        _f(r["synthesis_seconds"], 3), _f(r["prune_seconds"], 3), _f(r["update_bank_seconds"], 3),
                        _pct(r["bank_share"]), str(r["conditioned_steps"]),
                        f"{r['experience_tokens']:,} ({_pct(r['experience_tokens'] / max(r['prompt_tokens'], 1))})",
                        str(r["distill_samples"]), str(r["bank_active_entries"]), _f(r["snapshot_bytes"] / 1024, 0)]
                       for r in run["rounds"]])
    return "\n".join(out)


def write_report(report: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / "perf.json", out_dir / "perf.md"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    md_path.write_text(render_markdown(report) + "\n")
    return json_path, md_path


def numeric_leaves(data: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a nested report, keyed by its path (lists by index): MLflow metrics."""
    out: dict[str, float] = {}
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, int | float) and value == value:  # NaN is skipped
            out[name] = float(value)
        elif isinstance(value, dict | list):
            out |= numeric_leaves(value, f"{name}.")
    return out


def log_to_mlflow(report: dict, out_dir: Path | None) -> str:
    """One run in experiment ``bench-perf`` of the project's MLflow store: every number, and the files."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    from edge.tracking import PROJECT, git_commit, tracking_uri

    mlflow.set_tracking_uri(tracking_uri())
    client = mlflow.tracking.MlflowClient()
    name = "bench-perf"
    experiment = client.get_experiment_by_name(name)
    experiment_id = (experiment.experiment_id if experiment else
                     client.create_experiment(name, artifact_location=(PROJECT / "mlartifacts" / name).as_uri()))
    run = client.create_run(experiment_id, run_name="perf-quick" if report["quick"] else "perf",
                            tags={"git_commit": git_commit(), "quick": str(report["quick"])})
    run_id = run.info.run_id
    for key, value in report["params"].items():
        client.log_param(run_id, key, str(value)[:6000])
    skip = ("machine.load_average", "aims.")
    metrics = [mlflow.entities.Metric(key, value, int(time.time() * 1000), 0)
               for key, value in numeric_leaves(report).items() if not key.startswith(skip)]
    for start in range(0, len(metrics), 500):
        client.log_batch(run_id, metrics=metrics[start:start + 500])
    if out_dir is not None:
        for path in (Path(out_dir) / "perf.md", Path(out_dir) / "perf.json"):
            client.log_artifact(run_id, str(path))
    client.set_terminated(run_id)
    return run_id
