"""What EDGE asks of a room environment (household, and ALFWorld's games, which share its goals and
wording): how a lost episode failed, where the round saw each object kind, how guidance reads, and,
for household, the oracle's advice and the warm start's demonstrators.

Guidance names its subject (an object kind) but never a task's own target or lamp: an entry is
retrieved for other tasks about the same subject, whose targets differ.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING

from edge.envs.base import EVERY_SUBJECT, Demonstrators, Knowledge, SubjectGuidance, Task
from edge.envs.household.tasks import TOOL_FOR, TRANSFORM
from edge.envs.household.world import kind_of
from edge.guidance import entry
from edge.text import split_words

if TYPE_CHECKING:
    from edge.bank.synthesis import Failure
    from edge.config import WarmupConfig
    from edge.rollout import Trajectory

SEEN = re.compile(r"(?:you see|in it, you see) (.*?)(?:\.|$)")
# Where the listed objects lie: "On the countertop 1, you see ..." names it in both environments;
# otherwise the receptacle arrived at or opened ("you arrive at fridge 1", household). ALFWorld
# arrives at "loc 23", which names nothing.
ON_THE = re.compile(r"\bon the ([a-z]+) \d+, you see")
ARRIVE = re.compile(r"^(?:you arrive at|you open the) ([a-z]+) \d+")


# ----- how guidance reads --------------------------------------------------------------------
FIND_OPENING = "try : look for "
"""How a ``find_in`` entry begins (its text is read back by the place list, task type and stage)."""
SECOND_OPENING = "try : after you put one "
"""How a ``second_object`` entry begins."""
ANY_OBJECT = "object"
"""The word a task type's step names instead of an object kind when it is written once for the type
(``type_step_guidance``); ``name_subject`` puts each task's object kind in its place. No object kind
of either environment is called "object"."""


def find_in(obj: str, receptacle_kinds: list[str]) -> str:
    return entry("try", f"look for {obj} in {' , '.join(receptacle_kinds)}")


def transform_first(verb: str, obj: str, tool: str) -> str:
    return entry("try", f"{verb} the {obj} with the {tool} before you put it in place")


def take_to_lamp(obj: str) -> str:
    return entry("try", f"take the {obj} to the lamp and use the lamp")


def second_object(obj: str) -> str:
    return entry("try", f"after you put one {obj} in place , find the second {obj}")


def avoid_searched_again() -> str:
    return entry("avoid", "going back to a receptacle you already searched")


def open_closed() -> str:
    return entry("recover", "if a receptacle is closed , open it and look inside")


def advised_receptacle_kinds(advice: list[str]) -> list[str]:
    """Read back the receptacle kinds a ``find_in`` entry names (the advised demonstrator's plan)."""
    for text in advice:
        if text.startswith(FIND_OPENING):
            _, _, kinds = text[:-2].partition(" in ")
            return [k.strip() for k in kinds.split(",")]
    return []


WRONG_TRANSFORM = {"clean": "heat", "heat": "cool", "cool": "clean"}
"""The misleading oracle's transformation for each true one (``HouseholdKnowledge.misleading_advice``)."""


def likely_and_present(task: Task) -> tuple[tuple[str, ...], list[str]]:
    """The receptacle kinds where the task's object kind usually lies, most likely first, and the kinds of
    the room's receptacles, in the room's order."""
    from edge.envs.household.world import likely_kinds

    goal = task.spec["goal"]
    # A shuffled task carries its object's likely kinds; the other worlds' follow from the object's kind.
    likely = task.spec.get("likely") or likely_kinds(goal["object"], task.spec.get("world", "usual"))
    return tuple(likely), list(dict.fromkeys(kind_of(r) for r in task.spec["receptacles"]))


def advice_lines(task: Task, places: list[str], transformation: tuple[str, str] | None) -> list[str]:
    """The oracle's advice in its order: where to look (none without places), then the type's step, the
    ``transformation`` (verb, tool) for a clean / heat / cool task. What the true and the false oracle say
    differs only in ``places`` and ``transformation``."""
    goal = task.spec["goal"]
    advice = [find_in(goal["object"], places)] if places else []
    if transformation:
        advice.append(transform_first(transformation[0], goal["object"], transformation[1]))
    elif goal["type"] == "look_at_obj_in_light":
        advice.append(take_to_lamp(goal["object"]))
    elif goal["type"] == "pick_two_obj_and_place":
        advice.append(second_object(goal["object"]))
    return advice


# ----- reading a round ---------------------------------------------------------------------------
def takes_of(actions: list[str], object_kind: str) -> list[str]:
    """The actions that take an object of ``object_kind`` ("take apple 1 from fridge 1"), in order."""
    return [a for a in actions if a.startswith("take ") and kind_of(a[5:].split(" from ")[0]) == object_kind]


def failure_pattern(traj: Trajectory) -> str:
    """How a lost episode failed, read off its actions: the first step of the goal it never did."""
    goal = traj.task.spec["goal"]
    actions = [s.decision.action for s in traj.steps]
    took = takes_of(actions, goal["object"])
    if not took:
        return "not_found"
    if goal["type"] == "look_at_obj_in_light":
        return "no_lamp"
    verb = TRANSFORM.get(goal["type"])
    if verb and not any(a.startswith(f"{verb} ") for a in actions):
        return "no_transform"
    placed = [a for a in actions if a.startswith("put ") and kind_of(a.split(" in/on ")[1]) == goal["target"]]
    if goal["type"] == "pick_two_obj_and_place" and len(placed) == 1:
        return "second_missing"
    return "not_placed"


def where_taken(trajectories: list[Trajectory]) -> dict[str, Counter]:
    """Object kind -> receptacle kinds the trajectories took it from ("take apple 1 from fridge 1")."""
    taken: dict[str, Counter] = defaultdict(Counter)
    for t in trajectories:
        for step in t.steps:
            action = step.decision.action
            if action.startswith("take ") and " from " in action:
                obj, place = action[len("take "):].split(" from ", 1)
                taken[kind_of(obj)][kind_of(place)] += 1
    return taken


def step_taken(trajectory: Trajectory) -> str | None:
    """What a trajectory did for its task type's step: the tool kind it transformed the object with
    ("microwave"), the lamp kind it used ("desklamp"), "second" for a two-object task it won (the step
    is the task itself); None when its type has no step or it did not take it."""
    goal_type = trajectory.task.spec["goal"]["type"]
    if goal_type == "pick_two_obj_and_place":
        return "second" if trajectory.won else None
    for step in trajectory.steps:
        action = step.decision.action
        if goal_type in TRANSFORM and action.startswith(f"{TRANSFORM[goal_type]} ") and " with " in action:
            return kind_of(action.split(" with ", 1)[1])
        if goal_type == "look_at_obj_in_light" and action.startswith("use "):
            return kind_of(action[len("use "):])
    return None


def steps_won(winners: list[Trajectory]) -> dict[str, Counter]:
    """Task type -> what its winners did for the type's step (``step_taken``) -> how many winners."""
    won: dict[str, Counter] = defaultdict(Counter)
    for t in winners:
        if (done := step_taken(t)) is not None:
            won[t.task.spec["goal"]["type"]][done] += 1
    return won


def listed_names(listing: str) -> list[str]:
    """The objects an observation's "you see a spoon 1, a cup 2, and a fork 1" lists, by name ("spoon 1");
    "nothing" lists none."""
    items = listing.replace(", and ", ", ").split(", ")
    names = (item.removeprefix("a ").removeprefix("an ").strip() for item in items)
    return [name for name in names if name and name != "nothing"]


def sightings(trajectory: Trajectory, once_per_episode: bool = False) -> Iterator[tuple[str, str]]:
    """(object kind, receptacle kind) for every object an observation of the trajectory showed in a
    receptacle it names. ``once_per_episode``: each object (by its name, "spoon 1") in each receptacle
    kind once, however often the trajectory came back to look at it."""
    shown: set[tuple[str, str]] = set()
    for step in trajectory.steps[1:]:
        obs = step.observation.lower()
        at = ON_THE.search(obs) or ARRIVE.match(obs)
        found = SEEN.search(obs)
        if not at or not found or at.group(1) == "loc":
            continue
        for name in listed_names(found.group(1)):
            if once_per_episode:
                if (name, at.group(1)) in shown:
                    continue
                shown.add((name, at.group(1)))
            yield kind_of(name), at.group(1)


def where_seen(trajectories: list[Trajectory], once_per_episode: bool = False) -> dict[str, Counter]:
    """Object kind -> receptacle kinds it was seen in, counted over every observation of the round
    (``once_per_episode``: each object in each receptacle kind once per trajectory; ``sightings``)."""
    seen: dict[str, Counter] = defaultdict(Counter)
    for t in trajectories:
        for obj, place in sightings(t, once_per_episode):
            seen[obj][place] += 1
    return seen


class RoomKnowledge(Knowledge):
    """Failures, evidence and guidance for tasks with a household-style goal in ``spec["goal"]``
    (object, target, type, tool)."""

    generic_guidance = frozenset({avoid_searched_again(), open_closed()})

    def read_failure(self, trajectory: Trajectory) -> tuple[str, str]:
        return failure_pattern(trajectory), trajectory.task.spec["goal"]["object"]

    def evidence(self, trajectories: list[Trajectory], previous: dict | None = None, counting: str = "every") -> dict:
        """``seen``: object kind -> receptacle kind -> how often an observation showed one there (with
        ``counting: once-per-episode``, each object there once per trajectory: ``bank.sightings``);
        ``taken``: the same for where winning episodes took it (the places that led to a success),
        counted only when evidence accumulates (``previous`` not None): ``bank.evidence: round`` reads
        this round's sightings alone, as the bank always did. ``won_steps``: task type -> the tool or lamp
        kind its winners used for the type's step (``step_taken``) -> how many winners (read only by
        ``step_guidance``)."""
        out = {"seen": {}, "taken": {}, "won_steps": {}}
        rounds = {"seen": where_seen(trajectories, once_per_episode=counting == "once-per-episode"),
                  "taken": where_taken([t for t in trajectories if t.won]) if previous is not None else {},
                  "won_steps": steps_won([t for t in trajectories if t.won])}
        for part, counts in rounds.items():
            merged: dict[str, Counter] = defaultdict(Counter)
            for obj, places in ((previous or {}).get(part) or {}).items():
                merged[obj].update(places)
            for obj, places in counts.items():
                merged[obj].update(places)
            out[part] = {obj: dict(c) for obj, c in merged.items()}  # first seen first: ties keep that order
        return out

    @staticmethod
    def likely_places(evidence: dict, obj: str, n: int = 3) -> list[str]:
        """The receptacle kinds the evidence favours for ``obj``: a winner's take counts double, as it
        is also a sighting that led somewhere; ties go to the one seen first."""
        score = Counter((evidence.get("seen") or {}).get(obj, {}))
        for place, count in ((evidence.get("taken") or {}).get(obj, {})).items():
            score[place] += 2 * count
        return [place for place, _ in sorted(score.items(), key=lambda kv: -kv[1])[:n]]

    MIN_SIGHTINGS = 3
    """``subject_guidance`` writes where an object kind lies once the evidence has seen it this often:
    one sighting says where one room put it, not where the kind usually lies."""
    MAX_PROVENANCE = 8
    """At most this many of the round's trajectories are named as an entry's sources (the first ones)."""

    def subject_guidance(self, trajectories: list[Trajectory], evidence: dict) -> list[SubjectGuidance]:
        """Where each object kind lies, for every kind this round's trajectories showed and the evidence
        has seen at least ``MIN_SIGHTINGS`` times (the entry a ``not_found`` failure of it would get)."""
        shown_by: dict[str, list[str]] = defaultdict(list)
        for t in trajectories:
            for obj in dict.fromkeys(obj for obj, _ in sightings(t)):
                shown_by[obj].append(t.traj_id)
        out = []
        for obj in sorted(shown_by):
            if sum(((evidence.get("seen") or {}).get(obj) or {}).values()) < self.MIN_SIGHTINGS:
                continue
            places = self.likely_places(evidence, obj)
            out.append(SubjectGuidance(obj, "not_found", "try", find_in(obj, places),
                                       tuple(shown_by[obj][:self.MAX_PROVENANCE])))
        return out

    @staticmethod
    def step_text(goal_type: str, obj: str, tool: str) -> tuple[str, str]:
        """(pattern, text) of a task type's step for ``obj``: the entry a failure to take it would get
        (``write_guidance``); ``tool``, the kind a transformation uses (read only for those types)."""
        if goal_type in TRANSFORM:
            return "no_transform", transform_first(TRANSFORM[goal_type], obj, tool)
        if goal_type == "look_at_obj_in_light":
            return "no_lamp", take_to_lamp(obj)
        return "second_missing", second_object(obj)

    def _steps_by_type(self, trajectories: list[Trajectory], evidence: dict
                       ) -> Iterator[tuple[str, str, dict[str, list[Trajectory]], list[str]]]:
        """(task type, the tool most of its winners used, the round's trajectories of the type by object
        kind, the ids of the round's winners of the type) for each type whose winners the evidence has
        seen take the step, in name order."""
        by_type: dict[str, dict[str, list[Trajectory]]] = defaultdict(lambda: defaultdict(list))
        for t in trajectories:
            goal = t.task.spec["goal"]
            by_type[goal["type"]][goal["object"]].append(t)
        for goal_type in sorted(by_type):
            done = Counter(((evidence.get("won_steps") or {}).get(goal_type)) or {})
            if not done:
                continue
            winners = [t.traj_id for objs in by_type[goal_type].values() for t in objs if t.won]
            tool = done.most_common(1)[0][0]  # ties: the one seen first, as write_guidance picks
            yield goal_type, tool, by_type[goal_type], winners

    def step_guidance(self, trajectories: list[Trajectory], evidence: dict) -> list[SubjectGuidance]:
        """For each task type with a step whose winners the evidence has seen, that step for every object
        kind this round's tasks of the type are about: the text a failure to take it would get
        (``write_guidance``; a transformation names the tool most winners used). Provenance: the round's
        winners of the type first, then its tasks about the object."""
        out = []
        for goal_type, tool, by_object, winners in self._steps_by_type(trajectories, evidence):
            for obj in sorted(by_object):
                pattern, text = self.step_text(goal_type, obj, tool)
                sources = list(dict.fromkeys(winners + [t.traj_id for t in by_object[obj]]))
                out.append(SubjectGuidance(obj, pattern, "try", text, tuple(sources[:self.MAX_PROVENANCE]),
                                           task_type=goal_type))
        return out

    def type_step_guidance(self, trajectories: list[Trajectory], evidence: dict) -> list[SubjectGuidance]:
        """``step_guidance`` once per task type: the step with ``ANY_OBJECT`` for the object kind, subject
        ``EVERY_SUBJECT``. Provenance: the round's winners of the type first, then its other tasks."""
        out = []
        for goal_type, tool, by_object, winners in self._steps_by_type(trajectories, evidence):
            pattern, text = self.step_text(goal_type, ANY_OBJECT, tool)
            sources = list(dict.fromkeys(winners + [t.traj_id for obj in sorted(by_object) for t in by_object[obj]]))
            out.append(SubjectGuidance(EVERY_SUBJECT, pattern, "try", text, tuple(sources[:self.MAX_PROVENANCE]),
                                       task_type=goal_type))
        return out

    def name_subject(self, text: str, task: Task) -> str:
        """``ANY_OBJECT`` replaced by the task's object kind, as the oracle's advice names it."""
        return re.sub(rf"\b{ANY_OBJECT}\b", task.spec["goal"]["object"], text)

    def entry_task_type(self, failure: Failure, text: str) -> str:
        """Where an object kind lies serves every task type that needs it; steps of a task type
        (transform, lamp, second object) serve that type."""
        if text.startswith(FIND_OPENING):
            return "any"
        return super().entry_task_type(failure, text)

    def write_guidance(self, failure: Failure, evidence: dict,
                       successes: list[Trajectory]) -> tuple[str, str] | None:
        goal = failure.trajectories[0].task.spec["goal"]
        obj = failure.subject
        if failure.pattern == "not_found":
            places = self.likely_places(evidence, obj)
            return ("try", find_in(obj, places)) if places else ("recover", open_closed())
        if failure.pattern == "no_transform":
            verb = TRANSFORM[goal["type"]]
            tools = Counter(kind_of(s.decision.action.split(" with ")[1]) for t in successes for s in t.steps
                            if s.decision.action.startswith(f"{verb} "))
            if not tools:
                return None
            return "try", transform_first(verb, obj, tools.most_common(1)[0][0])
        if failure.pattern == "no_lamp":
            return "try", take_to_lamp(obj)
        if failure.pattern == "second_missing":
            return "try", second_object(obj)
        return None  # held it but never placed it: the round shows nothing to contrast with

    def guidance_stage(self, text: str) -> int:
        """Find the object (0), then transform it or take it to the lamp (1), then the second object (2);
        the generic advice last (3): the order of ``oracle_advice``, which the warm start learnt to follow."""
        if text.startswith(FIND_OPENING):
            return 0
        if text.startswith(SECOND_OPENING):
            return 2
        if text in self.generic_guidance:
            return 3
        return 1

    def task_stages(self, task: Task) -> set[int]:
        """Every task finds its object (0); the transforming and lamp types then use a tool or the lamp (1),
        and the two-object type finds a second one (2): the stages of ``oracle_advice`` for the type."""
        goal_type = task.spec["goal"]["type"]
        if goal_type in TRANSFORM or goal_type == "look_at_obj_in_light":
            return {0, 1}
        if goal_type == "pick_two_obj_and_place":
            return {0, 2}
        return {0}

    def stages_done(self, task: Task, actions: list[str]) -> set[int]:
        """Finding (0) is done once the agent has taken as many of the task's objects as it needs (both,
        for the two-object type: the places still serve the second), and the second object (2) with
        them; the transformation (1) once the type's verb was applied, the lamp (1) once used after the
        take. Generic advice (3) is never done."""
        goal = task.spec["goal"]
        taken = takes_of(actions, goal["object"])
        done = set()
        # ALFWorld's goals do not say how many objects; only its two-object type needs two.
        needed = goal.get("count", 2 if goal["type"] == "pick_two_obj_and_place" else 1)
        if len(taken) >= needed:
            done |= {0, 2} if goal["type"] == "pick_two_obj_and_place" else {0}
        verb = TRANSFORM.get(goal["type"])
        if verb and any(a.startswith(f"{verb} ") for a in actions):
            done.add(1)
        if goal["type"] == "look_at_obj_in_light" and taken and any(
                a.startswith("use ") for a in actions[actions.index(taken[0]):]):
            done.add(1)
        return done

    def guidance_vocabulary(self) -> set[str]:
        samples = [find_in("x", ["y", "z"]), transform_first("clean", "x", "y"), take_to_lamp("x"),
                   second_object("x"), avoid_searched_again(), open_closed(), "heat cool clean"]
        return {w for s in samples for w in split_words(s)}


class HouseholdKnowledge(RoomKnowledge):
    """The room knowledge plus what only the generated household knows: its regularities (the oracle)
    and its scripted demonstrators."""

    def oracle_advice(self, task: Task) -> list[str]:
        """Where the goal's object kind usually lies (its likely receptacle kinds present in the room),
        plus the transformation or lamp step."""
        likely, present = likely_and_present(task)
        goal = task.spec["goal"]
        verb = TRANSFORM.get(goal["type"])
        return advice_lines(task, [k for k in likely if k in present], verb and (verb, goal["tool"]))

    def misleading_advice(self, task: Task) -> list[str]:
        """The oracle's advice with every claim this world can make false made false, in the same words
        and shape: the places name the room's receptacle kinds where the object kind does *not* usually lie
        (as many as the true advice names, in the room's order), and a transformation names another
        verb with that verb's tool (clean -> heat -> cool -> clean). The lamp and second-object steps have
        no false counterpart here and stay true."""
        likely, present = likely_and_present(task)
        named = len([k for k in likely if k in present])
        verb = TRANSFORM.get(task.spec["goal"]["type"])
        wrong = verb and WRONG_TRANSFORM[verb]
        return advice_lines(task, [k for k in present if k not in likely][:named], wrong and (wrong, TOOL_FOR[wrong]))

    def demonstrators(self, cfg: WarmupConfig) -> Demonstrators:
        """The explorer (random search order), the expert with detours, and the explorer that searches
        the advised receptacle kinds first."""
        from edge.envs.household.agents import AdvisedExplorer, ExploreAgent, NoisyExpert

        return Demonstrators(
            explorer=lambda task, s: ExploreAgent(s),
            competent=lambda task, s: NoisyExpert(s, cfg.detour_prob),
            advised=lambda task, s: AdvisedExplorer(s, advised_receptacle_kinds(self.oracle_advice(task))))
