"""Training runs as rounds of stages, each writing its outputs atomically into the run folder.

    runs/<run>/round_<k>/rollouts.parquet     collect: G trajectories for each of N train tasks
                        /scores.json          score: marginal contribution Delta(x), c(x) per group
                        /evidence.json        update_bank: what guidance is written from (bank.evidence)
                        /bank_changes.json    update_bank: credit, added / merged / revised / pruned (+ reasons)
                        /bank.parquet         update_bank: snapshot of the bank after this round
                        /checkpoint/          distill (policy update): save_pretrained + trainer_state.pt
                        /train_metrics.json   distill: losses, success, timings
                        /eval.json            evaluate: held-out success with and without the bank
                        /manifest.json        every stage: sizes and hashes of what it wrote, written last
    runs/<run>/bank/                          the LanceDB bank; bank_versions.json maps round -> version
    runs/<run>/bank_seed.json                 what bank.seed_file put in the bank before round 0 (if set)
    runs/<run>/bank_bootstrap.json            with bank.bootstrap: the entries written from the demonstrations
    runs/<run>/params.json, manifest.json     the run's identity (parameters) and its own stages' record

A stage is complete when its round's manifest records it (``edge/files.py``), so re-running a run skips
finished work and resumes at the first stage not sealed; every file is checked against the manifest
before it is read. Randomness is derived from (seed, round, stage), so a resumed run draws exactly what
an uninterrupted one would. One process writes a run folder at a time (a lock held for the command).
The functions here are what the CLI, the Prefect flow and DVC call; they take plain values and paths.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import random
import resource
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from filelock import FileLock

from edge.algorithms.contribution import (
    GroupContribution,
    conditioned_pg_filter,
    group_contributions,
    scaffold_lead,
    scheduled_rho,
    summary,
    with_credit_rule,
)
from edge.algorithms.distill import (
    advice_shift,
    attach,
    distill_only_update,
    distill_samples,
    in_plain_context,
    make_distill_loss,
    replayed,
    scheduled_coef,
)
from edge.algorithms.grpo import Shard, UpdateConfig, grpo_samples, policy_update
from edge.config import EdgeParams, ignored_settings, method_settings, run_folder_name, run_params
from edge.envs.base import Task
from edge.envs.registry import env_names, generate_tasks
from edge.evaluate import evaluate, retention
from edge.files import (
    IntegrityError,
    acquire_run_lock,
    atomic_folder,
    fault_point,
    is_sealed,
    params_hash,
    read_json,
    release_run_lock,
    seal,
    seal_folder,
    verify,
    verify_folder,
    write_json,
)
from edge.policy.actor import Actor
from edge.policy.model import Policy, load_policy, save_policy
from edge.rollout import (
    Experience,
    Trajectory,
    episode_seed,
    read_rollouts,
    rollout,
    rollout_guided_where_plain_failed,
    write_rollouts,
)

log = logging.getLogger(__name__)

STAGE_SALT = {"collect": 1, "update": 2, "evaluate": 3}
ORACLE_ENTRY = "oracle"
"""The entry id recorded for the oracle control's advice (there is no bank entry behind it)."""
SEED_RECORD = "bank_seed.json"
"""The run's record of what ``bank.seed_file`` put in the bank: the file, its SHA-256, the entries' ids."""
BOOTSTRAP_RECORD = "bank_bootstrap.json"
"""The run's record of ``bank.bootstrap``: the empty table's version, then what was written and its evidence."""


def stage_seed(seed: int, round_index: int, stage: str) -> int:
    return (seed * 1_000_003 + round_index * 101 + STAGE_SALT[stage]) % (2**63)


def peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class Run:
    """A run folder plus what is loaded in memory (the policy of the last completed round)."""

    params: EdgeParams
    folder: Path
    _policy: Policy | None = None
    _policy_round: int | None = None
    _optimizer: torch.optim.Optimizer | None = None
    _bank: object = None
    _eval_tasks: dict = field(default_factory=dict)
    _locked: bool = False

    @property
    def settings(self):
        return method_settings(self.params)

    @property
    def params_sha256(self) -> str:
        """The run's identity, recorded in every manifest it writes (``train.rounds`` excluded)."""
        return params_hash(self.params.model_dump(mode="json"))

    # ----- the run's files, sealed and verified (edge/files.py) ------------------------------------
    def sealed(self, k: int | None, stage: str) -> bool:
        """Whether ``stage`` of round ``k`` (``None``: the run folder's own stages) is complete."""
        return is_sealed(self.folder if k is None else self.round_dir(k), stage)

    def seal(self, k: int | None, stage: str, files: list[str], details: dict | None = None) -> None:
        """Record ``stage`` complete with the ``files`` it wrote (the last write of every stage)."""
        seal(self.folder if k is None else self.round_dir(k), stage, files, self.params_sha256, details)

    def read_json(self, k: int | None, name: str):
        """A JSON file a stage wrote, after checking it against the manifest."""
        return read_json(verify(self.folder if k is None else self.round_dir(k), name))

    def rollouts(self, k: int) -> list[Trajectory]:
        """Round ``k``'s trajectories, checked against the manifest and for complete groups."""
        path = verify(self.round_dir(k), "rollouts.parquet")
        return read_rollouts(path, group_size=self.params.rollout.group_size)

    def close(self) -> None:
        """Give back this ``Run.open``'s hold on the run folder's lock."""
        if self._locked:
            release_run_lock(self.folder)
            self._locked = False

    def bank(self):
        """The run's experience bank (LanceDB), opened once."""
        if self._bank is None:
            from edge.bank.embedder import make_embedder
            from edge.bank.store import ExperienceBank

            cfg = self.params.bank
            self._bank = ExperienceBank.open(self.folder / "bank", make_embedder(cfg.embedder),
                                             in_memory=cfg.in_memory_search)
            recorded = self.bank_versions()
            if recorded and self._bank.version() < max(recorded.values()):
                raise IntegrityError(f"{self.folder / 'bank'}: the table is at version {self._bank.version()}, older "
                                     f"than the version {max(recorded.values())} the run recorded (bank_versions.json);"
                                     " a version manifest under bank.lance/_versions is missing")
        return self._bank

    def seed_bank(self) -> None:
        """Write ``bank.seed_file``'s entries into the new, empty bank, once (``bank.bootstrap``:
        ``bootstrap_bank`` instead). What goes in is recorded in ``bank_seed.json`` before the insert, so a
        crash before or after it resumes to the same bank (the ids are the bank's first, the same every
        time); a bank that holds entries is not seeded again."""
        if self.params.bank.bootstrap != "none":
            return self.bootstrap_bank()
        from edge.bank.seeding import file_sha256, seed_bank

        path = self.params.bank.seed_file
        if path is None or len(self.bank()):
            return
        seed_bank(self.bank(), path, self.params.bank.max_chars,
                  before_insert=lambda added: write_json(self.folder / SEED_RECORD, {
                      "file": str(path), "sha256": file_sha256(path), "entries": added}))
        fault_point("bank:seeded")  # a kill before version -1 is recorded: the resumed run must not seed again

    def bootstrap_bank(self) -> None:
        """``bank.bootstrap: demonstrations``: write the new bank's first entries from the warm start's plain
        demonstrations. The empty table's version is recorded first, so a crash midway restores it and
        writes the same entries again (the demonstrations and the writer are deterministic)."""
        from edge.bank.seeding import bootstrap_bank
        from edge.warmup import demonstration_trajectories

        bank, path = self.bank(), self.folder / BOOTSTRAP_RECORD
        if path.exists():
            empty = read_json(path)["empty_version"]
            bank.restore(empty)
        else:
            empty = bank.version()
            write_json(path, {"empty_version": empty})
        trajectories = demonstration_trajectories(self.params.warmup.for_env(), self.params.seed)
        step = bootstrap_bank(bank, trajectories, self.params.bank)
        fault_point("bank:bootstrapped")  # a kill before version -1 is recorded: the resumed run writes them again
        write_json(path, {"empty_version": empty, **step})

    def bootstrap_evidence(self) -> dict | None:
        """The evidence the bank's first entries were written from (``bank.bootstrap``), else None."""
        path = self.folder / BOOTSTRAP_RECORD
        return read_json(path).get("evidence") if self.params.bank.bootstrap != "none" and path.exists() else None

    def bank_versions(self) -> dict[int, int]:
        path = self.folder / "bank_versions.json"
        if not path.exists():
            return {}
        return {int(k): v for k, v in read_json(path).items()}

    def record_bank_version(self, k: int) -> None:
        versions = self.bank_versions()
        versions[k] = self.bank().version()
        write_json(self.folder / "bank_versions.json", {str(r): v for r, v in sorted(versions.items())})

    def experience_for(self, task: Task, stream: int = 0) -> Experience | None:
        """E(x): the top-k active entries similar enough to the task, or None. Controls: the
        environment's true advice (``edge-oracle-bank``; its false advice under ``bank.oracle_advice:
        misleading``), or as many entries as retrieval found drawn at
        random from the active bank, from a stream of (``stream``, task id) (``edge-random-bank``)."""
        from edge.guidance import experience_block, oracle_says

        source = self.settings.experience
        if source == "oracle":
            return Experience(experience_block(oracle_says(task, self.params.bank.oracle_advice)), [ORACLE_ENTRY])
        from edge.bank.retrieval import random_entries, retrieve_for_task, type_steps_for

        cfg = self.params.bank
        found = retrieve_for_task(self.bank(), task, cfg)
        if found and source == "random":
            how = type_steps_for(task, cfg)  # an entry about a whole task type is named for this task
            found = random_entries(self.bank(), len(found[1]), random.Random(episode_seed(stream, task.task_id, 0)),
                                   cfg.max_chars, name=how.name if how else None)
        return Experience(*found) if found else None

    def step_retriever(self):
        """With ``bank.per_step``, the per-step re-retrieval the rollout calls; else None."""
        cfg = self.params.bank
        if not (self.settings.use_bank and self.settings.experience == "bank" and cfg.per_step):
            return None
        from edge.bank.retrieval import retrieve_for_task

        def retrieve(task: Task, observation: str) -> Experience | None:
            found = retrieve_for_task(self.bank(), task, cfg, query=f"{task.instruction} {observation}")
            return Experience(*found) if found else None

        return retrieve

    @staticmethod
    def check(params: EdgeParams) -> None:
        """Refuse, before anything is created, a run whose environment, oracle or starting checkpoint is
        not there. ``open`` calls it; the CLI calls it before starting Prefect, so a user error is one
        line instead of a failed flow run with Prefect's traceback."""
        cfg = params.train
        settings = method_settings(params)
        if cfg.env not in env_names():
            raise ValueError(f"train.env: unknown environment {cfg.env!r}; valid names: {env_names()}")
        ignored = ignored_settings(params)
        if ignored:
            log.warning("train.method %s does not read %s (set away from the defaults): they change nothing in "
                        "this run", cfg.method, ", ".join(ignored))
        if settings.experience == "oracle":
            from edge.guidance import require_oracle

            require_oracle(cfg.env, params.bank.oracle_advice)
            if params.bank.credit == "utility":
                raise ValueError("bank.credit: utility reads the entries' utilities, and edge-oracle-bank keeps no "
                                 "bank; use gap, margin or soft")
        elif settings.stores_bank:
            from edge.bank.synthesis import missing_parts

            for line in missing_parts(cfg.env, params.bank.synthesizer, params.bank.subjects,
                                      params.bank.block_rule):
                log.warning("environment %r: %s", cfg.env, line)
            seeded = Path(cfg.runs_dir) / run_folder_name(params) / SEED_RECORD
            if params.bank.bootstrap != "none" and params.warmup.env != cfg.env:
                raise ValueError(f"bank.bootstrap: {params.bank.bootstrap} writes the bank from warmup.env's "
                                 f"demonstrations ({params.warmup.env!r}), not train.env's ({cfg.env!r}); set "
                                 "warmup.env to the environment trained on, or bank.bootstrap: none")
            if params.bank.seed_file and not seeded.exists():  # a seeded run resumes without the file
                from edge.bank.seeding import check_seed_file

                check_seed_file(params.bank)
        if cfg.base_checkpoint:
            base = Path(cfg.base_checkpoint)
            if not base.is_dir():
                raise FileNotFoundError(f"train.base_checkpoint: {base} does not exist: run `edge warmup` first "
                                        "(or set train.base_checkpoint: null)")
            verify_folder(base)

    @classmethod
    def open(cls, params: EdgeParams) -> Run:
        """Validate (``check``), then create or reopen the run folder and hold its lock until ``close()``.

        Nothing is created before the parameters, the environment and the starting checkpoint have been
        checked, so a corrected command starts clean. The folder's ``params.json`` is the run's identity:
        a different one is refused, a missing one is refused once the run has results."""
        cls.check(params)
        folder = Path(params.train.runs_dir) / run_folder_name(params)
        folder.mkdir(parents=True, exist_ok=True)
        acquire_run_lock(folder)
        run = cls(params, folder, _locked=True)
        try:
            run._check_identity()
        except BaseException:
            run.close()
            raise
        return run

    def _has_results(self) -> bool:
        return (self.folder / "eval_base.json").exists() or any(self.folder.glob("round_*"))

    def _check_identity(self) -> None:
        """Write ``params.json`` for a new run; for an existing one, refuse other parameters."""
        saved = self.folder / "params.json"
        current = self.params.model_dump(mode="json")
        if saved.exists() and not (self.folder / "manifest.json").exists() and self._has_results():
            raise IntegrityError(f"{self.folder}: written by an older EDGE (results but no manifest.json); "
                                 "finish it with that version or start another train.run_name")
        if not saved.exists():
            if self._has_results():
                raise IntegrityError(f"{saved}: missing, but the run has results; its parameters are unknown "
                                     "(restore the file, or delete the folder to start again)")
            write_json(saved, current)
            self.seal(None, "open", ["params.json"])
            return
        if self.sealed(None, "open"):
            verify(self.folder, "params.json")
        try:
            # Through the schema, so a field added since the run started compares at its default.
            previous = run_params(read_json(saved)).model_dump(mode="json")
        except ValueError as err:
            raise IntegrityError(f"{saved}: not this version's parameters ({str(err).splitlines()[0]})") from None
        # More (or fewer) rounds extends (or stops early) the same run, and a folder moved elsewhere (another
        # train.runs_dir) is still the same run; anything else is another run.
        for name in ("rounds", "runs_dir"):
            previous["train"][name] = current["train"][name]
        if previous == current:
            return
        if not self._has_results():  # a start that failed before any stage: the corrected command takes over
            log.info("run folder %s had no results yet: starting it again with the new parameters", self.folder)
            (self.folder / "manifest.json").unlink(missing_ok=True)
            write_json(saved, current)
            self.seal(None, "open", ["params.json"])
            return
        changed = sorted(k for k in current if previous.get(k) != current[k])
        raise ValueError(f"run folder {self.folder} was started with different parameters (sections "
                         f"{changed}); use another train.run_name or delete the folder")

    def round_dir(self, k: int) -> Path:
        return self.folder / f"round_{k:03d}"

    def checkpoint(self, k: int) -> Path | None:
        """Checkpoint that round ``k`` starts from: round k-1's, or the base for round 0."""
        if k == 0:
            base = self.params.train.base_checkpoint
            return Path(base) if base else None
        return self.round_dir(k - 1) / "checkpoint"

    def policy_for(self, k: int) -> tuple[Policy, torch.optim.Optimizer]:
        """The policy (and its optimizer) as of the start of round ``k``, loaded once."""
        if self._policy is None or self._policy_round != k:
            path = self.checkpoint(k)
            if path is not None and not path.exists():
                raise FileNotFoundError(f"checkpoint {path} is missing: run `edge warmup` first "
                                        "(or set train.base_checkpoint: null)")
            if k > 0:  # the round's own record of its checkpoint, then the checkpoint's files (load_policy)
                verify(self.round_dir(k - 1), "checkpoint/edge_manifest.json")
            policy = load_policy(self.params.policy, checkpoint=path, seed=self.params.seed,
                                 envs=[self.params.train.env])
            g = self.params.grpo
            optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad],
                                          lr=g.lr, weight_decay=g.weight_decay)
            if (g.beta > 0 or self.params.distill.teacher == "base") and not policy.uses_lora:
                # The KL anchor (and the fixed distillation teacher) is the run's starting point (the
                # warm-started base), not last round.
                base = load_policy(self.params.policy, checkpoint=self.checkpoint(0), seed=self.params.seed,
                                   envs=[self.params.train.env])
                policy._reference = base.model.eval().requires_grad_(False)
            state_file = path / "trainer_state.pt" if path else None
            if k > 0 and state_file and state_file.exists():
                state = torch.load(state_file, weights_only=False)
                optimizer.load_state_dict(state["optimizer"])
            self._policy, self._optimizer, self._policy_round = policy, optimizer, k
        return self._policy, self._optimizer

    def round_tasks(self, k: int) -> list[Task]:
        cfg = self.params
        pool = generate_tasks(cfg.train.env, "train", cfg.data.train_tasks, cfg.seed)
        rng = random.Random(stage_seed(cfg.seed, k, "collect"))
        return rng.sample(pool, min(cfg.rollout.tasks_per_round, len(pool)))

    def eval_tasks(self, split: str, episodes: int | None = None) -> list[Task]:
        """The first ``episodes`` (default ``eval.episodes``) evaluation tasks of ``split``.

        The same tasks for every round and method: comparisons are paired. Made once per process
        (plain and with-bank evaluation both need them; ALFWorld and WebShop read files to make them);
        fewer episodes are a prefix of the same list."""
        key = (split, self.params.eval.episodes)
        if key not in self._eval_tasks:
            self._eval_tasks[key] = generate_tasks(self.params.train.env, split, self.params.eval.episodes,
                                                   self.params.seed)
        return self._eval_tasks[key][:episodes]


# ----- stages --------------------------------------------------------------------------------
def conditioned_share(run: Run, k: int) -> float:
    """rho for round k: the method's; 0 from ``bank.handoff_round`` on under ``rho_schedule: handoff``; or
    withdrawn by ``rho_schedule: withdraw`` as the plain members catch up with the conditioned ones in rounds
    0..k-1 (read from their sealed ``scores.json``)."""
    cfg = run.params.bank
    if cfg.rho_schedule == "constant":
        return run.settings.rho
    if cfg.rho_schedule == "handoff":
        return run.settings.rho if k < cfg.handoff_round else 0.0
    leads = [scaffold_lead(run.read_json(j, "scores.json")["groups"]) for j in range(k)]
    return scheduled_rho(run.settings.rho, cfg.rho_min, leads)


def collect_stage(run: Run, k: int) -> Path:
    out = run.round_dir(k) / "rollouts.parquet"
    if run.sealed(k, "collect"):
        return out
    started = time.perf_counter()
    policy, _ = run.policy_for(k)
    cfg = run.params.rollout
    tasks = run.round_tasks(k)
    experiences, conditioned, schedule, retrieval_seconds = None, 0, {}, 0.0
    if run.settings.use_bank:
        rho = conditioned_share(run, k)  # before the retrieval clock: it reads earlier rounds' scores
        conditioned = round(rho * cfg.group_size)
        if run.params.bank.rho_schedule != "constant":
            schedule["rho"] = rho
        if conditioned > 0:  # a scaffold handed off retrieves nothing: its rounds are GRPO's
            retrieval_started = time.perf_counter()
            stream = stage_seed(run.params.seed, k, "collect")
            experiences = {t.task_id: e for t in tasks if (e := run.experience_for(t, stream)) is not None}
            retrieval_seconds = time.perf_counter() - retrieval_started
    collect = rollout
    if experiences and run.params.bank.condition_when == "plain_failed":  # retrieved only where members condition
        deciders = (cfg.group_size - conditioned) // 2 if run.params.bank.decided_by == "half_plain" else None
        collect = partial(rollout_guided_where_plain_failed, deciders=deciders)
    trajectories = collect(Actor(policy), tasks, cfg.group_size, stage_seed(run.params.seed, k, "collect"),
                           experiences=experiences,
                           conditioned_per_group=conditioned, retrieve_step=run.step_retriever(),
                           follow_progress=run.params.bank.block_follows_progress, max_steps=cfg.max_steps)
    # Timings go to disk before the completion marker, so a resumed run still reports them.
    write_json(run.round_dir(k) / "collect.json", {"collect_seconds": time.perf_counter() - started,
                                                  "retrieval_seconds": retrieval_seconds} | schedule)
    write_rollouts(trajectories, out)
    counts = {"rows": sum(len(t.steps) for t in trajectories), "trajectories": len(trajectories),
              "groups": len({t.group_id for t in trajectories})}
    run.seal(k, "collect", ["collect.json", "rollouts.parquet"], {"rollouts.parquet": counts})
    return out


def score_stage(run: Run, k: int) -> Path:
    """Delta(x) and c(x) for every group that was split (EDGE); an empty list for GRPO."""
    out = run.round_dir(k) / "scores.json"
    if run.sealed(k, "score"):
        return out
    trajectories = run.rollouts(k)
    cfg = run.params.bank
    contributions = group_contributions(trajectories, unselected_plain=cfg.decided_by == "half_plain")
    if cfg.credit != "gap":
        utilities = None
        if cfg.credit == "utility":  # the entries as round k-1 left them (this stage runs before update_bank)
            version = run.bank_versions().get(k - 1)
            utilities = {e.id: e.utility for e in run.bank().checkout(version)} if version is not None else {}
        contributions = with_credit_rule(contributions, cfg.credit, cfg.credit_margin, cfg.credit_sharpness,
                                         utilities, cfg.eta)
    groups = len({t.group_id for t in trajectories})
    write_json(out, {"round": k, "summary": summary(contributions, groups),
                     "groups": [c.to_dict() for c in contributions]})
    run.seal(k, "score", ["scores.json"])
    return out


def read_contributions(run: Run, k: int) -> list[GroupContribution]:
    data = run.read_json(k, "scores.json")
    return [GroupContribution(**g) for g in data["groups"]]


def update_bank_stage(run: Run, k: int) -> Path | None:
    """Credit the entries this round's groups saw, synthesize guidance for new failure modes, prune.

    Idempotent: the live table is first restored to the version recorded after round k-1, so a
    re-run after a crash in the middle of this stage neither duplicates nor loses entries. Nothing for
    methods without a stored bank (GRPO, the oracle control)."""
    if not run.settings.stores_bank:
        return None
    out = run.round_dir(k) / "bank_changes.json"
    if run.sealed(k, "update_bank"):
        return out
    from edge.bank.coevolve import co_evolve

    started = time.perf_counter()
    bank = run.bank()
    versions = run.bank_versions()
    if k - 1 in versions and bank.version() != versions[k - 1]:
        bank.restore(versions[k - 1])
    trajectories = run.rollouts(k)
    previous = run.read_json(k - 1, "evidence.json") if k > 0 else run.bootstrap_evidence()
    step = co_evolve(bank, trajectories, read_contributions(run, k), k, run.params.bank,
                     synthesize_new=k == 0 or run.settings.synthesize_after_first_round, prune=run.settings.prune,
                     evidence=previous)
    write_json(run.round_dir(k) / "evidence.json", step["evidence"])  # before bank_changes.json: it ends the stage
    run.record_bank_version(k)
    snapshot = bank.snapshot(run.round_dir(k) / "bank.parquet")
    changes = {
        "round": k, "version": bank.version(), "size_active": len(bank.all("active")), "size_total": len(bank.all()),
        **{key: step[key] for key in ("credited", "added", "merged", "revised", "pruned", "pruned_by_reason",
                                      "synthesis")},
        "snapshot_bytes": snapshot.stat().st_size,
        "seconds": step["seconds"] | {"total": time.perf_counter() - started},
    }
    write_json(out, changes)
    run.seal(k, "update_bank", ["evidence.json", "bank.parquet", "bank_changes.json"])
    return out


def update_stage(run: Run, k: int, shard: Shard | None = None) -> Path:
    """The policy update (PG + distillation) of round ``k``. With ``grpo.update_processes > 1`` it runs
    in that many worker processes (``edge.distributed``), each calling this function with its
    ``shard``; worker 0 writes the checkpoint and the metrics."""
    out = run.round_dir(k) / "checkpoint"
    metrics_file = run.round_dir(k) / "train_metrics.json"
    if run.sealed(k, "distill"):
        return out
    if shard is None and run.params.grpo.update_processes > 1:
        from edge.distributed import launch_sharded_update

        launch_sharded_update(run.folder, k, run.params.grpo.update_processes)
        run._policy = None  # the workers trained it: round k+1 starts from their checkpoint
        return out
    started = time.perf_counter()
    policy, optimizer = run.policy_for(k)
    trajectories = run.rollouts(k)
    g = run.params.grpo
    samples, group_stats = grpo_samples(trajectories, g.std_normalize, baseline=run.params.bank.advantage_baseline)
    update_cfg = UpdateConfig(g.lr, g.epochs, g.minibatches, g.clip_low, g.clip_high, g.beta, g.loss_agg,
                              g.max_grad_norm)
    generator = torch.Generator().manual_seed(stage_seed(run.params.seed, k, "update"))
    actor = Actor(policy)
    contributions = read_contributions(run, k) if run.settings.use_bank else []
    which = run.params.bank.conditioned_pg
    samples = conditioned_pg_filter(samples, trajectories, contributions, which)
    if which in ("plain", "own-and-plain"):
        samples = in_plain_context(actor, samples, trajectories, keep_own=which == "own-and-plain")
    extra_loss, n_distill, n_distill_only, n_replayed = None, 0, 0, 0
    d_cfg = run.params.distill
    # Before the update: how far the experience block moves the collecting policy on the plain states.
    follow = run.params.bank.block_follows_progress
    shift = advice_shift(actor, trajectories, follow) if run.settings.use_bank else None
    coef = scheduled_coef(run.settings.distill_coef, d_cfg.coef_decay_rounds, k)
    if coef > 0:
        # Teacher log-probs: the weights that collected the rollouts (or the base), frozen for the update.
        options = {"estimator": d_cfg.estimator, "states": d_cfg.states, "gate": d_cfg.gate, "teacher": d_cfg.teacher,
                   "keep_teacher_prompt": d_cfg.anchor > 0, "follow_progress": follow,
                   "guidance_scale": d_cfg.guidance_scale, "teacher_follows_progress": d_cfg.teacher_follows_progress}
        distill = distill_samples(actor, trajectories, contributions, **options)
        n_distill = len(distill)
        for j in range(max(0, k - d_cfg.replay_rounds), k):
            # Earlier rounds' states, their teacher recomputed now: more states for the same steps.
            distill += replayed(distill_samples(actor, run.rollouts(j), read_contributions(run, j), **options), j)
        n_replayed = len(distill) - n_distill
        if distill:
            # On the PG samples of the same states: the same minibatches and optimizer steps as GRPO.
            samples, n_distill_only = attach(samples, distill)
            extra_loss = make_distill_loss(coef, d_cfg.estimator, d_cfg.anchor, actor, d_cfg.divergence)
    # Every round reports every loss, also when no group carried signal (then nothing is updated).
    losses = {"pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "approx_kl": 0.0, "distill_loss": 0.0,
              "distill_kl": 0.0, "distill_weight": 0.0, "grad_norm": 0.0, "optimizer_steps": 0}
    distilling = run.settings.distill_coef > 0
    # The options' own metrics, in every round of a run that uses them (also one with nothing distilled).
    if distilling and d_cfg.anchor > 0:
        losses["anchor_kl"] = 0.0
    if distilling and d_cfg.coef_decay_rounds is not None:
        losses["distill_coef"] = coef
    if distilling and d_cfg.extra_epochs > 0:
        losses |= {"distill_extra_steps": 0, "distill_extra_kl": 0.0}
        if d_cfg.anchor > 0:
            losses["distill_extra_anchor_kl"] = 0.0
    if samples:
        carries = {"separate": lambda s: "teacher" in s.extras,
                   "pg": lambda s: s.pg}.get(d_cfg.normalize) if extra_loss else None
        losses |= policy_update(actor, optimizer, samples, update_cfg, generator, extra_loss, carries, shard)
    if extra_loss is not None and d_cfg.extra_epochs > 0:
        # Distillation alone towards the same teacher: declared extra optimizer steps (distill.extra_epochs).
        extra = distill_only_update(actor, optimizer, samples, update_cfg, d_cfg.extra_epochs, generator,
                                    extra_loss, shard, d_cfg.extra_lr_scale)
        losses["distill_extra_steps"] = extra["optimizer_steps"]
        if extra.get("distill_weight"):
            # The KL per distilled state over the extra steps (each measured before its step), and, anchored,
            # how far the advised context drifted from the teacher meanwhile.
            losses["distill_extra_kl"] = extra["distill_kl"] / extra["distill_weight"]
            if "anchor_kl" in extra:
                losses["distill_extra_anchor_kl"] = extra["anchor_kl"] / extra["distill_weight"]
    if shard is not None and shard.rank != 0:
        return out  # the weights are the same on every worker; worker 0 saves them
    # The KL per distilled unit (the hook sums weight x KL; its weight share is distill_weight).
    losses["distill_kl"] = losses["distill_kl"] / losses["distill_weight"] if losses["distill_weight"] else 0.0
    if "anchor_kl" in losses:
        losses["anchor_kl"] = losses["anchor_kl"] / losses["distill_weight"] if losses["distill_weight"] else 0.0
    # Saved into a temporary folder, sealed with its own manifest, then renamed into place: a half-written
    # checkpoint is never taken for a whole one.
    with atomic_folder(out) as tmp:
        save_policy(policy, tmp)
        torch.save({"optimizer": optimizer.state_dict(), "round": k,
                    "torch_rng": torch.get_rng_state(), "python_rng": random.getstate()}, tmp / "trainer_state.pt")
        seal_folder(tmp)
    run._policy_round = k + 1  # the in-memory policy is now round k+1's starting point
    plain = [t for t in trajectories if not t.conditioned]
    conditioned = [t for t in trajectories if t.conditioned]
    metrics = {
        "round": k,
        # None, not 0, in a round whose members were all conditioned (bank.rho = 1): no plain success was measured.
        "train_success_plain": sum(t.won for t in plain) / len(plain) if plain else None,
        "train_success_conditioned": sum(t.won for t in conditioned) / len(conditioned) if conditioned else None,
        "distill_samples": n_distill,
        "distill_only_samples": n_distill_only,
        **({"distill_replayed_samples": n_replayed} if d_cfg.replay_rounds else {}),
        "advice_shift_kl": shift,
        "experience_tokens": sum(len(s.decision.prompt_ids) for t in conditioned for s in t.steps)
        - sum(len(actor.builder.prompt_ids(t.state_at(i))) for t in conditioned for i in range(len(t.steps))),
        "train_reward": sum(t.reward for t in trajectories) / len(trajectories),
        "train_episode_length": sum(len(t.steps) for t in trajectories) / len(trajectories),
        "train_env_steps": sum(len(t.steps) for t in trajectories),
        "samples": len(samples),
        "tokens": sum(len(s.prompt_ids) + sum(len(c) for c in (s.candidate_ids or [])) + len(s.response_ids or [])
                      for s in samples) * g.epochs,
        **group_stats, **losses,
        "update_seconds": time.perf_counter() - started,
        "update_processes": shard.world if shard else 1,
        **run.read_json(k, "collect.json"),
        "peak_memory_mb": peak_memory_mb(),
    }
    write_json(metrics_file, metrics)
    run.seal(k, "distill", ["checkpoint/edge_manifest.json", "train_metrics.json"])
    return out


def plain_evaluation(run: Run, actor: Actor, seed: int, progress=None, episodes: int | None = None
                     ) -> dict[str, dict]:
    """Every configured split without experience."""
    cfg = run.params.eval
    return {split: evaluate(actor, run.eval_tasks(split, episodes), seed, greedy=cfg.greedy,
                            progress=progress).to_dict()
            for split in cfg.splits}


def evaluate_policy(run: Run, actor: Actor, seed: int, progress=None, plain: dict | None = None,
                    episodes: int | None = None) -> dict:
    """Every configured split, plain and (for bank methods) with the bank, plus retention, on the first
    ``episodes`` tasks (default all). ``plain``: the plain results per split, when already known."""
    cfg = run.params.eval
    plain = plain or plain_evaluation(run, actor, seed, progress, episodes)
    result = {}
    for split in cfg.splits:
        result[split] = {"plain": plain[split]}
        if run.settings.use_bank:
            tasks = run.eval_tasks(split, episodes)
            experiences = {t.task_id: run.experience_for(t, seed) for t in tasks}
            if any(experiences.values()):
                scaffold = evaluate(actor, tasks, seed, experience_for=lambda t, e=experiences: e[t.task_id],
                                    retrieve_step=run.step_retriever(),
                                    follow_progress=run.params.bank.block_follows_progress, greedy=cfg.greedy,
                                    progress=progress).to_dict()
            else:  # nothing retrieved: the scaffolded episodes would replay the plain ones exactly
                scaffold = dict(plain[split])
            result[split] |= {"with_bank": scaffold,
                              "retention": retention(plain[split]["success"], scaffold["success"]),
                              # with the bank differs from plain only on these tasks
                              "retrieved_share": sum(e is not None for e in experiences.values()) / len(tasks)}
    return result


def evaluate_stage(run: Run, k: int, force: bool = False) -> Path | None:
    cfg = run.params.eval
    last = k == run.params.train.rounds - 1
    out = run.round_dir(k) / "eval.json"
    if run.sealed(k, "evaluate"):
        return out
    if not (force or last or (k + 1) % cfg.every == 0):
        return None
    started = time.perf_counter()
    policy, _ = run.policy_for(k + 1)
    if run.settings.stores_bank:
        version = run.bank_versions().get(k)
        if version is not None and run.bank().version() != version:
            raise RuntimeError(f"bank is at version {run.bank().version()}, round {k} ended at {version}: "
                               "evaluate rounds in order")
    episodes = None if last else cfg.intermediate_episodes
    result = {"round": k, **evaluate_policy(run, Actor(policy), stage_seed(run.params.seed, k, "evaluate"),
                                            episodes=episodes)}
    result["eval_seconds"] = time.perf_counter() - started
    write_json(out, result)
    run.seal(k, "evaluate", ["eval.json"])
    return out


def base_evaluation_key(params: EdgeParams) -> str:
    """What the starting checkpoint's plain evaluation depends on: the checkpoint's files, the
    environment, the seed, the policy and evaluation settings (not the method, the bank or the update)."""
    base = params.train.base_checkpoint
    files = sorted((str(f.relative_to(base)), f.stat().st_size, f.stat().st_mtime_ns)
                   for f in Path(base).rglob("*") if f.is_file()) if base else None
    what = {"checkpoint": str(Path(base).resolve()) if base else None, "files": files, "env": params.train.env,
            "seed": params.seed, "policy": params.policy.model_dump(mode="json"),
            "eval": params.eval.model_dump(mode="json", exclude={"base_cache_dir"})}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def baseline_eval(run: Run, progress=None) -> Path:
    """Evaluate the starting checkpoint once (round -1, empty bank), so curves start at the base.
    With ``eval.base_cache_dir``, the plain results are shared with every run that would compute the
    same numbers; a lock makes concurrent runs wait for the first instead of repeating it."""
    out = run.folder / "eval_base.json"
    if run.sealed(None, "base_eval"):
        return out
    policy, _ = run.policy_for(0)
    actor, seed = Actor(policy), stage_seed(run.params.seed, -1, "evaluate")
    cache_dir = run.params.eval.base_cache_dir
    if cache_dir is None:
        result = evaluate_policy(run, actor, seed, progress)
    else:
        cache = Path(cache_dir) / f"eval-base-{base_evaluation_key(run.params)}.json"
        cache.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(cache) + ".lock"):
            if not cache.exists():
                write_json(cache, plain_evaluation(run, actor, seed, progress))
            result = evaluate_policy(run, actor, seed, progress, plain=read_json(cache))
    write_json(out, {"round": -1, **result})
    run.seal(None, "base_eval", ["eval_base.json"])
    return out


def round_summary(run: Run, k: int) -> dict:
    """Everything a round recorded, flattened: the per-round metrics of the spec."""
    out = run.read_json(k, "train_metrics.json")
    out |= run.read_json(k, "scores.json")["summary"]
    if run.sealed(k, "update_bank"):
        changes = run.read_json(k, "bank_changes.json")
        out |= {"bank_size": changes["size_active"], "entries_added": len(changes["added"]),
                "entries_merged": len(changes["merged"]), "entries_pruned": len(changes["pruned"]),
                **{f"pruned_{r}": n for r, n in changes["pruned_by_reason"].items()},
                "bank_seconds": changes["seconds"]["total"], "synthesis_seconds": changes["seconds"]["synthesis"],
                "prune_seconds": changes["seconds"]["prune"], "bank_snapshot_bytes": changes["snapshot_bytes"]}
    if run.sealed(k, "evaluate"):
        ev = run.read_json(k, "eval.json")
        out["evaluate_seconds"] = ev.get("eval_seconds")
        out |= eval_summary(ev, run.params.eval.splits)
    return out


def eval_summary(ev: dict, splits: list[str]) -> dict:
    """An ``eval.json`` (or ``eval_base.json``) as flat ``eval_<split>_<plain|with_bank|retention>`` keys."""
    out = {}
    for split in splits:
        out[f"eval_{split}_plain"] = ev[split]["plain"]["success"]
        if "with_bank" in ev[split]:
            out[f"eval_{split}_with_bank"] = ev[split]["with_bank"]["success"]
            out[f"eval_{split}_retention"] = ev[split]["retention"]
    return out


def base_summary(run: Run) -> dict:
    """The starting checkpoint's evaluation in ``round_summary``'s keys, as round -1."""
    ev = run.read_json(None, "eval_base.json")
    return {"round": -1, **eval_summary(ev, run.params.eval.splits)}


STAGES = {
    "collect": collect_stage, "score": score_stage, "update_bank": update_bank_stage,
    "distill": update_stage, "evaluate": evaluate_stage,
}
"""The stage functions of one round, in order; the Prefect flow passes task-wrapped versions."""


YOUNG_GC_THRESHOLD = 50_000
"""Allocations between two collections of Python's youngest generation while training (default 700)."""


def relax_garbage_collection() -> None:
    """Run Python's cyclic garbage collector less often for the rest of the process.

    A round allocates millions of short-lived containers (rollout rows, prompt pieces, records), and at
    the default threshold the collector ran ~600-900 young and 2-4 full collections a round, 0.65-1.4 s
    of a 12-25 s household round on 2 cores, landing wherever the allocation happened (it is what made
    prompt building look 4x slower in some rounds of ``edge bench perf``). At 50,000 it runs ~5-10 times
    and takes 0.03-0.3 s. Almost nothing here is cyclic, so reference counting still frees it at once; the
    collector only delays what it would find anyway, and the results do not depend on when it runs."""
    gc.set_threshold(YOUNG_GC_THRESHOLD, 10, 10)


def train(params: EdgeParams, on_round=None, progress=None, stages: dict | None = None) -> Run:
    """Run (or resume) every round of ``params.train``; ``on_round(k, summary, run)`` after each.

    ``stages`` replaces the stage functions (same names and signatures as ``STAGES``), which is how
    the Prefect flow runs each stage as a task while this loop stays the one place the order lives."""
    stages = {**STAGES, **(stages or {})}
    relax_garbage_collection()
    torch.manual_seed(params.seed)
    run = Run.open(params)
    clock = WallClock(run.folder / "wall_time.json")
    try:
        if run.settings.stores_bank and -1 not in run.bank_versions():
            run.bank()  # create the table, empty or with bank.seed_file's / bank.bootstrap's entries: version -1
            run.seed_bank()
            run.record_bank_version(-1)
        baseline_eval(run, progress)
        for k in range(params.train.rounds):
            for name in STAGES:
                stages[name](run, k)
                clock.tick()
                fault_point(f"after:{name}:r{k}")
            if on_round:
                on_round(k, round_summary(run, k), run)
    finally:  # also on Ctrl-C or an error: an interrupted run's cost still counts
        clock.tick()
        run.close()
    return run


class WallClock:
    """The time spent in ``train`` on a run over all its invocations (``wall_time.json``).

    The invocation is counted when it starts and its time is written after every stage, so a run killed
    with SIGKILL (no ``finally``) loses at most the stage it was in."""

    def __init__(self, path: Path):
        self.path = path
        before = read_json(path) if path.exists() else {"seconds": 0.0, "invocations": 0}
        self.before, self.started = before["seconds"], time.perf_counter()
        self.invocations = before["invocations"] + 1
        self.tick()

    def tick(self) -> None:
        write_json(self.path, {"seconds": self.before + time.perf_counter() - self.started,
                               "invocations": self.invocations})
