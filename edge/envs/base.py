"""The one interface every text environment speaks, built-in or real.

An environment is reset to a :class:`Task` and then stepped with action strings. Tasks are plain,
JSON-serialisable records that carry the *whole* initial state, so resetting two environments to the
same task gives two identical episodes: that is what group RL (G rollouts from one initial state)
is built on.

Invalid actions are never raised: the environment answers the way the real benchmark does
("Nothing happens." in ALFWorld) and flags the step in ``info.invalid_action``.

Beyond reset/step, an environment may know things EDGE's machinery asks for (how to read a failure,
how to phrase guidance, what an oracle would advise, who can demonstrate it): :class:`Knowledge`,
every part optional. ``docs/ENVIRONMENTS.md`` walks through adding an environment.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # read as plain records: an environment package never needs torch or the bank
    from edge.bank.synthesis import Failure
    from edge.config import WarmupConfig
    from edge.rollout import Trajectory

SPLITS = ("train", "test_seen", "test_unseen")


@dataclass(frozen=True)
class Task:
    """One task: everything needed to rebuild its initial state, nothing else."""

    env: str
    """Name of the environment in the registry ("household", "shop", ...)."""
    split: str
    """One of ``SPLITS``."""
    task_id: str
    """Unique within the environment, stable across runs with the same seed."""
    task_type: str
    """Benchmark task family, e.g. ``pick_clean_then_place_in_recep`` or ``fashion``."""
    instruction: str
    """The goal as the agent reads it."""
    spec: dict[str, Any] = field(default_factory=dict)
    """Environment-specific initial state (room layout, goal, product id, ...); JSON only."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, record: dict[str, Any], source: str = "<record>") -> Task:
        missing = [k for k in ("env", "split", "task_id", "task_type", "instruction") if k not in record]
        if missing:
            raise ValueError(f"{source}: task record lacks field(s) {missing}; expected keys "
                             "env, split, task_id, task_type, instruction, spec")
        if record["split"] not in SPLITS:
            raise ValueError(f"{source}: split {record['split']!r} is not one of {list(SPLITS)}")
        return cls(env=record["env"], split=record["split"], task_id=record["task_id"],
                   task_type=record["task_type"], instruction=record["instruction"],
                   spec=dict(record.get("spec") or {}))


@dataclass
class StepInfo:
    """Side information of a step, the same keys for every environment."""

    won: bool = False
    """The task is solved (ALFWorld ``won``; WebShop reward == 1)."""
    score: float = 0.0
    """Graded score in [0, 1] (WebShop's reward; equals ``won`` for household tasks)."""
    invalid_action: bool = False
    """The action was not admissible and changed nothing."""
    admissible_actions: list[str] = field(default_factory=list)
    """What the agent may do next."""
    steps: int = 0
    """Steps taken so far in this episode."""
    truncated: bool = False
    """The episode ended because the step limit was reached."""


@dataclass
class Reset:
    observation: str
    instruction: str
    task_type: str
    admissible_actions: list[str]


@dataclass
class Step:
    observation: str
    reward: float
    done: bool
    info: StepInfo


@runtime_checkable
class TextEnv(Protocol):
    """A text environment instance; one episode at a time."""

    name: str
    max_steps: int

    def reset(self, task: Task) -> Reset: ...

    def step(self, action: str) -> Step: ...


class Agent(Protocol):
    """Anything that picks an action; scripted agents and (later) LM policies alike."""

    def reset(self, task: Task, first: Reset) -> None: ...

    def act(self, observation: str, admissible_actions: list[str]) -> str: ...


@dataclass(frozen=True)
class Demonstrators:
    """The warm start's three demonstrators, each a factory ``(task, seed) -> Agent``."""

    explorer: Callable[[Task, int], Agent]
    """Plain, knows the rules and the goal but not the regularities (its lost episodes show how the
    environment works, kept when ``keep_explorer_failures``)."""
    competent: Callable[[Task, int], Agent]
    """Plain, mostly right: what good behaviour without advice looks like."""
    advised: Callable[[Task, int], Agent] | None
    """Plays with the oracle's advice in its prompt and follows it: where "advice helps" is learnt.
    None: the warm start has no advised episodes."""
    keep_explorer_failures: bool = False


EVERY_SUBJECT = "*"
"""The subject (and the bank entry's key) of knowledge about a whole task type rather than one subject
(``Knowledge.type_step_guidance``): such an entry is retrieved for every task of its type, whatever the
task is about, and its text names the task's own subject on the way to the prompt
(``Knowledge.name_subject``). ``*`` has no words, so it is never a word an instruction must contain."""


@dataclass(frozen=True)
class SubjectGuidance:
    """One entry's worth of knowledge about a subject (``Knowledge.subject_guidance``)."""

    subject: str
    """The entry's key: words the instructions it serves contain ("apple")."""
    pattern: str
    """The failure pattern it prevents ("not_found"): the signature is ``task_type|subject|pattern``."""
    kind: str
    """``try``, ``avoid`` or ``recover`` (``edge.guidance.entry`` phrases the text)."""
    text: str
    provenance: tuple[str, ...]
    """Ids of this round's trajectories whose evidence it was written from."""
    task_type: str = "any"
    """Which tasks it serves: "any" (knowledge about the subject, whatever the task) or one task type (a
    step that type takes, ``step_guidance``)."""


class Knowledge:
    """What an environment knows beyond reset/step; EDGE's bank, oracle control and warm start ask it.

    Every part is optional: a subclass overrides the ones its environment has, and :meth:`has` tells
    the machinery which (it warns once at start for a missing part, and refuses a control that needs
    one). A module registered as an environment exposes an instance as ``KNOWLEDGE``; without one it
    gets this class, which has no part at all.

    The bank's key rule: an entry written for a failure is keyed by the failure's *subject*, and is
    retrieved for a task only when every word of that subject occurs in the task's instruction (with
    ``bank.key_must_match``) and the instruction's embedding is similar enough to the key
    (``bank.similarity_threshold``). So a subject must be words the instructions it should serve
    contain ("apple", "red"), never an id.
    """

    PARTS = ("read_failure", "evidence", "write_guidance", "subject_guidance", "step_guidance",
             "type_step_guidance", "name_subject", "guidance_stage", "task_stages", "stages_done", "oracle_advice",
             "misleading_advice", "demonstrators", "guidance_vocabulary")
    """The optional parts, by method name."""
    generic_guidance: frozenset[str] = frozenset()
    """Guidance texts that hold for every task type of the environment: stored with task type "any"."""

    def has(self, part: str) -> bool:
        if part not in self.PARTS:
            raise ValueError(f"unknown knowledge part {part!r}; parts: {', '.join(self.PARTS)}")
        return getattr(type(self), part) is not getattr(Knowledge, part)

    def read_failure(self, trajectory: Trajectory) -> tuple[str, str] | None:
        """(pattern, subject) of a lost trajectory: how it failed ("not_found") and what about ("apple");
        None when it cannot say. Without this part the bank stays empty."""
        raise NotImplementedError

    def evidence(self, trajectories: list[Trajectory], previous: Any = None, counting: str = "every") -> Any:
        """What the trajectories show that guidance can be written from (where things were seen,
        what the winners did), added to ``previous`` (what earlier rounds showed, as this method
        returned it; None: this round alone, ``bank.evidence: round``). ``counting`` (``bank.sightings``):
        ``every`` observation counts, or ``once-per-episode`` (a thing seen again on a second visit in
        the same trajectory is not new evidence; passed only when not ``every``, so an override without the
        parameter works with the default only; an environment without repeated sightings ignores it). Handed to
        :meth:`write_guidance` as it is, and kept between rounds as JSON: plain dicts, lists, numbers
        and strings only. Default: nothing."""
        return None

    def write_guidance(self, failure: Failure, evidence: Any, successes: list[Trajectory]) -> tuple[str, str] | None:
        """(kind, text) of one entry for a failure signature (``edge.guidance.entry`` phrases it),
        contrasting it with the round's ``successes``; None when the round holds nothing to write from."""
        raise NotImplementedError

    def subject_guidance(self, trajectories: list[Trajectory], evidence: Any) -> list[SubjectGuidance]:
        """Knowledge about every subject the evidence says enough about, whether or not a task about it
        has failed yet (``bank.subjects: seen``; household: where each object kind lies, for every kind
        the observations showed often enough). Each names the trajectories of this round it read
        (its provenance) and the failure pattern it prevents, so that it shares its signature
        ``any|subject|pattern`` with the entry a failure of that pattern would write."""
        raise NotImplementedError

    def step_guidance(self, trajectories: list[Trajectory], evidence: Any) -> list[SubjectGuidance]:
        """Knowledge about a task type's steps, for every subject this round's tasks of the type are
        about, once the evidence shows winners taking the step (``bank.subjects: seen-and-steps``;
        household: heat the object with the tool the winners heated with, before placing it). Each
        serves its task type (``SubjectGuidance.task_type``) and shares its signature with the entry
        a failure to take the step would write."""
        raise NotImplementedError

    def type_step_guidance(self, trajectories: list[Trajectory], evidence: Any) -> list[SubjectGuidance]:
        """Knowledge about a task type's steps, once for the type (``bank.subjects: seen-and-type-steps``):
        what :meth:`step_guidance` says for each subject, written with subject ``EVERY_SUBJECT`` and a text
        that :meth:`name_subject` names for each task it is shown to (household: heat the object with the
        microwave before placing it). So a task retrieves its type's steps whether or not a task about
        its subject has been played. Needs :meth:`name_subject`."""
        raise NotImplementedError

    def name_subject(self, text: str, task: Task) -> str:
        """The text of an ``EVERY_SUBJECT`` entry (:meth:`type_step_guidance`) as shown to ``task``: named
        for the task's own subject ("heat the object ..." -> "heat the apple ..."). The result is
        sanitised again before it reaches a prompt."""
        raise NotImplementedError

    def entry_task_type(self, failure: Failure, text: str) -> str:
        """Which tasks an entry written for ``failure`` serves (``bank.grain: knowledge``): a task type,
        or "any" for knowledge about the subject or the whole environment (retrieval still needs the
        subject in the instruction). Default: "any" for ``generic_guidance``, else the failure's type."""
        return "any" if text in self.generic_guidance else failure.task_type

    def guidance_stage(self, text: str) -> int:
        """At which stage of an episode a guidance text applies, 0 first: with ``bank.block_order:
        episode`` the experience block lists its entries in this order (finding the object before
        transforming it, as the oracle's advice reads). Default: 0 for all (the similarity order stays)."""
        return 0

    def task_stages(self, task: Task) -> set[int]:
        """The stages (:meth:`guidance_stage`) of the steps a task of ``task``'s type takes, generic advice
        left out: what the environment's rules say about every task of the type, not where this one's
        objects lie. With ``bank.block_rule: complete`` a task is shown a block only when the bank has an
        entry for each of them."""
        raise NotImplementedError

    def stages_done(self, task: Task, actions: list[str]) -> set[int]:
        """The stages (:meth:`guidance_stage`) an episode of ``task`` has completed after taking
        ``actions``: with ``bank.block_follows_progress`` the block drops their entries. Without this part
        the block stays whole."""
        raise NotImplementedError

    def oracle_advice(self, task: Task) -> list[str]:
        """What an oracle that knows the environment's regularities (not this task's answer) advises,
        as guidance entries: the bank of the ``edge-oracle-bank`` control and the warm start's advised
        episodes."""
        raise NotImplementedError

    def misleading_advice(self, task: Task) -> list[str]:
        """The oracle's advice made false, in the same words and shape (where the object does not lie,
        the wrong step): the bank of the oracle control under ``bank.oracle_advice: misleading``, which
        measures whether guidance that hurts is distilled into the plain policy too."""
        raise NotImplementedError

    def demonstrators(self, cfg: WarmupConfig) -> Demonstrators:
        """The warm start's demonstrators. Without this part the warm start uses the environment's
        ``random`` (or ``explore``) and ``expert`` agents."""
        raise NotImplementedError

    def guidance_vocabulary(self) -> set[str]:
        """Words the environment's guidance can contain beyond its ``vocabulary()`` (for the tiny
        model's word-level tokenizer)."""
        return set()


def check_can_step(task: Task | None, done: bool) -> None:
    """The protocol's two misuses of ``step``, refused with the same words by every environment."""
    if task is None:
        raise RuntimeError("call reset(task) before step()")
    if done:
        raise RuntimeError("episode is over; call reset(task) to start another")


def write_tasks(tasks: Iterable[Task], path: Path) -> int:
    """Write tasks as JSONL atomically (temporary name, then rename); returns the count."""
    from edge.files import write_bytes

    lines = [task.to_json() + "\n" for task in tasks]
    write_bytes(Path(path), "".join(lines).encode())
    return len(lines)


def read_tasks(path: Path) -> list[Task]:
    """Read a JSONL task file; a bad line is an error naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"task file {path} does not exist; create it with `edge data prepare`")
    tasks = []
    with path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            tasks.append(Task.from_dict(record, source=f"{path}:{lineno}"))
    return tasks
