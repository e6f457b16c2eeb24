"""Rollouts: groups of G trajectories from one initial state, stepped together across tasks.

This is where the policy, the environments and retrieved text meet. Every environment of every
group advances in lockstep, so each step is one batched call into the policy and one into the
environments (``edge.envs.parallel.step_all``: concurrent where they run in worker processes). Part
of each group can be *conditioned* (its prompts carry an experience block), the rest plain; which
entries each trajectory saw is recorded, because EDGE's credit and distillation depend on it.

Every step is a training sample of its own (its prompt, the action's tokens, old log-probs), with
the episode's reward attached, verl-agent style. Rollouts serialise to Parquet (one row per step).

Every episode draws from its own random stream, seeded from the stage's seed, the task id and the
group member (``episode_generator``): the same policy on the same task and member replays exactly,
whichever other episodes are stepped beside it, so plain and scaffolded evaluations, two rounds and
two methods are compared on common random numbers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from edge.envs.base import Task
from edge.envs.group import make_groups
from edge.envs.parallel import step_all
from edge.files import IntegrityError, write_with
from edge.guidance import block_after
from edge.policy.actor import Actor, Decision
from edge.policy.prompt import AgentState


@dataclass
class Experience:
    """The experience block shown to conditioned trajectories of one task, and where it came from."""

    text: str
    entry_ids: list[str] = field(default_factory=list)


@dataclass
class StepRecord:
    observation: str
    """What the agent saw before acting."""
    admissible: list[str]
    decision: Decision
    experience: str | None = None
    """The experience block in this step's prompt (differs from the trajectory's first block only
    when entries are re-retrieved per step)."""


@dataclass
class Trajectory:
    traj_id: str
    task: Task
    group_id: str
    member: int
    conditioned: bool
    experience: Experience | None
    steps: list[StepRecord] = field(default_factory=list)
    won: bool = False
    score: float = 0.0
    reward: float = 0.0
    """What the update optimises: the score, minus the invalid-action penalty."""
    invalid_actions: int = 0

    def history_before(self, index: int) -> list[tuple[str, str]]:
        """(action, observation-after) pairs before step ``index``, oldest first."""
        return [(self.steps[i].decision.action, self.steps[i + 1].observation) for i in range(index)]

    def state_at(self, index: int, experience: str | None = None) -> AgentState:
        """The state of step ``index``, optionally re-rendered with another experience block (the
        distillation teacher sees the plain student's states with experience added)."""
        step = self.steps[index]
        return AgentState(self.task.instruction, step.observation, step.admissible,
                          self.history_before(index), experience)


def episode_seed(seed: int, task_id: str, member: int) -> int:
    """The seed of one episode's stream: a hash of (stage seed, task id, member), 63 bits."""
    digest = hashlib.blake2b(f"{seed}|{task_id}|{member}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def episode_generator(seed: int, task_id: str, member: int) -> torch.Generator:
    return torch.Generator().manual_seed(episode_seed(seed, task_id, member))


def rollout(actor: Actor, tasks: list[Task], group_size: int, seed: int, *,
            experiences: dict[str, Experience] | None = None, conditioned_per_group: int = 0,
            retrieve_step: Callable[[Task, str], Experience | None] | None = None,
            follow_progress: bool = False, members: range | None = None,
            greedy: bool = False, max_steps: int | None = None, progress=None) -> list[Trajectory]:
    """Roll out ``group_size`` trajectories per task; the first ``conditioned_per_group`` members of
    a task's group see its experience when ``experiences`` has one for it, the rest are plain.
    ``seed`` (the stage's) seeds every episode's own stream, with its task id and member.
    ``members``: play only these members of each group (default all ``group_size``); each keeps its own
    stream, so a group played in two parts replays the episodes of one played whole.

    With ``retrieve_step``, a conditioned trajectory's block is retrieved again after every step
    from the new observation (keeping the previous block when nothing is found), and every entry
    it saw is recorded in its ``experience.entry_ids``. With ``follow_progress``
    (``bank.block_follows_progress``), after every step a conditioned trajectory sees its block
    (as retrieved, or retrieved again) without the entries of the stages it has completed
    (``edge.guidance.block_after``); each step records the block its prompt had."""
    experiences = experiences or {}
    trajectories: list[Trajectory] = []
    envs, states, generators = [], [], []
    kwargs = {"max_steps": max_steps} if max_steps else {}
    members = range(group_size) if members is None else members
    for task, (group_envs, resets) in zip(tasks, make_groups(tasks, len(members), **kwargs)):
        exp = experiences.get(task.task_id)
        for member, env, first in zip(members, group_envs, resets, strict=True):
            conditioned = exp is not None and member < conditioned_per_group
            own = Experience(exp.text, list(exp.entry_ids)) if conditioned else None  # ids may grow per step
            traj = Trajectory(f"{task.task_id}/m{member}", task, task.task_id, member, conditioned, own)
            trajectories.append(traj)
            envs.append(env)
            generators.append(episode_generator(seed, task.task_id, member))
            states.append(AgentState(task.instruction, first.observation, first.admissible_actions,
                                     [], exp.text if conditioned else None))
    whole = [state.experience for state in states]  # each one's block as retrieved last, entries not dropped
    active = list(range(len(trajectories)))
    history_steps = actor.cfg.history_steps
    while active:
        decisions = actor.act([states[i] for i in active], [generators[i] for i in active], greedy=greedy)
        results = step_all([envs[i] for i in active], [d.action for d in decisions])
        still = []
        for i, decision, result in zip(active, decisions, results):
            traj, state = trajectories[i], states[i]
            traj.steps.append(StepRecord(state.observation, state.admissible, decision, state.experience))
            traj.invalid_actions += result.info.invalid_action or decision.invalid
            if result.done:
                traj.won, traj.score = result.info.won, result.info.score
                penalty = actor.cfg.invalid_penalty if actor.cfg.mode == "generate" else 0.0
                traj.reward = traj.score - penalty * traj.invalid_actions
                if progress is not None:
                    progress.update(1)
            else:
                history = (state.history + [(decision.action, result.observation)])[-max(history_steps, 1):]
                experience = state.experience
                if retrieve_step is not None and traj.conditioned:
                    found = retrieve_step(traj.task, result.observation)
                    if found is not None:
                        experience = whole[i] = found.text
                        traj.experience.entry_ids += [e for e in found.entry_ids if e not in traj.experience.entry_ids]
                if follow_progress and traj.conditioned:
                    experience = block_after(whole[i], traj.task, [s.decision.action for s in traj.steps])
                states[i] = AgentState(state.instruction, result.observation, result.info.admissible_actions,
                                       history if history_steps else [], experience)
                still.append(i)
        active = still
    return trajectories


def rollout_guided_where_plain_failed(actor: Actor, tasks: list[Task], group_size: int, seed: int, *,
                                      experiences: dict[str, Experience], conditioned_per_group: int,
                                      deciders: int | None = None, **kwargs) -> list[Trajectory]:
    """``bank.condition_when: plain_failed``: the plain members of every group (members
    ``conditioned_per_group`` to ``group_size`` - 1) play first; then the first ``conditioned_per_group``
    members see their task's experience only where every deciding plain member failed, and play plain
    where one won. ``deciders``: how many plain members decide, the first ones by member index (None:
    all; ``bank.decided_by: half_plain``: half, so that the others measure Delta unselected). The same
    episodes a group as ``rollout`` and the same order (task by task, member by member); where the block
    is shown, each member replays the stream it has in ``rollout``. ``kwargs``: ``rollout``'s other options."""
    if not 0 < conditioned_per_group < group_size:
        raise ValueError(f"conditioning where the plain members failed needs plain members to play first and "
                         f"members to condition: 0 < conditioned members < group size (got "
                         f"{conditioned_per_group} of {group_size})")
    if deciders is not None and not 0 < deciders <= group_size - conditioned_per_group:
        raise ValueError(f"deciders: between 1 and the {group_size - conditioned_per_group} plain members "
                         f"(got {deciders})")
    plain = rollout(actor, tasks, group_size, seed, members=range(conditioned_per_group, group_size), **kwargs)
    last_decider = group_size if deciders is None else conditioned_per_group + deciders
    solved = {t.group_id for t in plain if t.won and t.member < last_decider}
    guided = {task_id: e for task_id, e in experiences.items() if task_id not in solved}
    first = rollout(actor, tasks, group_size, seed, experiences=guided, conditioned_per_group=conditioned_per_group,
                    members=range(conditioned_per_group), **kwargs)
    by_task: dict[str, list[Trajectory]] = {}
    for t in first + plain:  # members 0.. first in each group
        by_task.setdefault(t.group_id, []).append(t)
    return [t for task in tasks for t in by_task[task.task_id]]


# ----- Parquet ---------------------------------------------------------------------------------
STEP_SCHEMA = pa.schema([
    ("traj_id", pa.string()), ("group_id", pa.string()), ("member", pa.int32()), ("step", pa.int32()),
    ("task_json", pa.string()), ("task_type", pa.string()),
    ("conditioned", pa.bool_()), ("experience", pa.string()), ("entry_ids", pa.list_(pa.string())),
    ("observation", pa.string()), ("admissible", pa.list_(pa.string())), ("action", pa.string()),
    ("prompt_ids", pa.list_(pa.int32())), ("candidate_ids", pa.list_(pa.list_(pa.int32()))),
    ("chosen", pa.int32()), ("response_ids", pa.list_(pa.int32())), ("logp", pa.list_(pa.float32())),
    ("invalid", pa.bool_()), ("entropy", pa.float32()),
    ("won", pa.bool_()), ("score", pa.float32()), ("reward", pa.float32()), ("length", pa.int32()),
    ("invalid_actions", pa.int32()),
])


def to_table(trajectories: list[Trajectory]) -> pa.Table:
    rows: dict[str, list] = {name: [] for name in STEP_SCHEMA.names}
    for t in trajectories:
        task_json = t.task.to_json()
        for i, s in enumerate(t.steps):
            d = s.decision
            values = dict(
                traj_id=t.traj_id, group_id=t.group_id, member=t.member, step=i, task_json=task_json,
                task_type=t.task.task_type, conditioned=t.conditioned,
                experience=s.experience,
                entry_ids=t.experience.entry_ids if t.experience else [], observation=s.observation,
                admissible=s.admissible, action=d.action, prompt_ids=d.prompt_ids, candidate_ids=d.candidate_ids,
                chosen=d.chosen, response_ids=d.response_ids, logp=d.logp, invalid=d.invalid, entropy=d.entropy,
                won=t.won, score=t.score, reward=t.reward, length=len(t.steps), invalid_actions=t.invalid_actions,
            )
            for name, value in values.items():
                rows[name].append(value)
    return pa.Table.from_pydict(rows, schema=STEP_SCHEMA)


TOKEN_COLUMNS = ("prompt_ids", "candidate_ids", "response_ids", "logp")
"""What the update reads and a reader of behaviour does not: most of a rollouts file's bytes."""


def from_table(table: pa.Table) -> list[Trajectory]:
    """Trajectories from a rollouts table. A table without ``TOKEN_COLUMNS`` (``read_rollouts(text_only=
    True)``) gives decisions whose text, choice and outcome are whole but whose token fields are empty
    (``prompt_ids`` and ``logp`` []; ``candidate_ids`` and ``response_ids`` None): for readers of behaviour,
    never for the update, which would find no tokens to train on."""
    trajectories: dict[str, Trajectory] = {}
    missing = [name for name in TOKEN_COLUMNS if name not in table.column_names]
    for row in table.to_pylist():
        row |= {name: [] if name in ("prompt_ids", "logp") else None for name in missing}  # a new list a row
        traj = trajectories.get(row["traj_id"])
        if traj is None:
            exp = Experience(row["experience"], row["entry_ids"]) if row["conditioned"] else None
            task = Task.from_dict(json.loads(row["task_json"]))
            traj = trajectories[row["traj_id"]] = Trajectory(
                row["traj_id"], task, row["group_id"], row["member"], row["conditioned"], exp,
                won=row["won"], score=row["score"], reward=row["reward"], invalid_actions=row["invalid_actions"])
        decision = Decision(row["action"], row["prompt_ids"], row["candidate_ids"], row["chosen"],
                            row["response_ids"], row["logp"], row["invalid"], row["entropy"])
        traj.steps.append(StepRecord(row["observation"], row["admissible"], decision, row["experience"]))
    return list(trajectories.values())


def write_rollouts(trajectories: list[Trajectory], path: Path) -> Path:
    """Write atomically: a reader never sees half a file."""
    return write_with(Path(path), lambda tmp: pq.write_table(to_table(trajectories), tmp))


def read_rollouts(path: Path, group_size: int | None = None, text_only: bool = False) -> list[Trajectory]:
    """The trajectories in a rollouts file, checked for whole episodes (and whole groups of
    ``group_size``): a file cut short is an ``IntegrityError`` naming it, never a smaller round.
    ``text_only``: without ``TOKEN_COLUMNS`` (several times faster), for readers of what the agent did."""
    path = Path(path)
    columns = [n for n in STEP_SCHEMA.names if n not in TOKEN_COLUMNS] if text_only else None
    try:
        table = pq.read_table(path, schema=STEP_SCHEMA, columns=columns)
    except FileNotFoundError:
        raise IntegrityError(f"{path}: file is missing") from None
    except (pa.ArrowException, OSError, ValueError) as err:
        raise IntegrityError(f"{path}: not a readable rollouts Parquet file ({str(err).splitlines()[0]})") from None
    seen: dict[str, int] = {}
    for traj_id, step, length in zip(*(table.column(c).to_pylist() for c in ("traj_id", "step", "length")),
                                     strict=True):
        if step != seen.get(traj_id, 0) or step >= length:
            raise IntegrityError(f"{path}: trajectory {traj_id} is not whole (step {step} where step "
                                 f"{seen.get(traj_id, 0)} of {length} was expected)")
        seen[traj_id] = step + 1
    lengths = dict(zip(table.column("traj_id").to_pylist(), table.column("length").to_pylist(), strict=True))
    cut = next((t for t, n in seen.items() if n != lengths[t]), None)
    if cut is not None:
        raise IntegrityError(f"{path}: trajectory {cut} has {seen[cut]} of its {lengths[cut]} steps")
    trajectories = from_table(table)
    if group_size is not None:
        members: dict[str, int] = {}
        for t in trajectories:
            members[t.group_id] = members.get(t.group_id, 0) + 1
        short = sorted(g for g, n in members.items() if n != group_size)
        if short:
            raise IntegrityError(f"{path}: group {short[0]} has {members[short[0]]} trajectories, expected "
                                 f"rollout.group_size = {group_size} ({len(short)} incomplete groups)")
    return trajectories
