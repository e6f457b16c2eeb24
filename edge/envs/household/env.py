"""The household environment: a pure-Python mini-ALFWorld that speaks ALFWorld 2.1.1's text.

State is a handful of dicts rebuilt from the task spec on every reset, so G environments reset to
one task are identical. Messages follow ALFWorld's wording ("You arrive at fridge 1. The fridge 1
is closed.", "put apple 1 in/on countertop 1", "Nothing happens.") so that an agent trained here
reads the real benchmark's language.
"""

from __future__ import annotations

from edge.envs.base import Reset, Step, StepInfo, Task, check_can_step
from edge.envs.household.tasks import TRANSFORM
from edge.envs.household.world import LAMPS, OPENABLE, TOOL_FOR, env_name, kind_of

WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
NOTHING_HAPPENS = "Nothing happens."

# Past participle of each transformation, as the object's state flag.
STATE_OF = {"clean": "clean", "heat": "hot", "cool": "cool"}


def see_list(names: list[str]) -> str:
    """ALFWorld's list style: 'a apple 1, a knife 2, and a mug 1' ('a' even before vowels)."""
    if not names:
        return "nothing"
    items = [f"a {n}" for n in names]
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + ", and " + items[-1]


class HouseholdEnv:
    """One household episode at a time. See ``edge.envs.base.TextEnv``."""

    def __init__(self, max_steps: int = 50, world: str = "usual"):
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.max_steps = max_steps
        self.name = env_name(world)
        """The same rules in every world; only the tasks it accepts (where their objects start) differ."""
        self.task: Task | None = None

    # ----- episode -----------------------------------------------------------------------
    def reset(self, task: Task) -> Reset:
        if task.env != self.name:
            raise ValueError(f"task {task.task_id} is for environment {task.env!r}, not {self.name!r}")
        spec = task.spec
        self.task = task
        self.goal = spec["goal"]
        self.receptacles: list[str] = list(spec["receptacles"])
        self.is_open = {r: False for r in self.receptacles if kind_of(r) in OPENABLE}
        self.contents: dict[str, list[str]] = {r: [] for r in self.receptacles}
        self.lamp, self.lamp_at = spec["lamp"] if spec["lamp"] else (None, None)
        if self.lamp:
            self.contents[self.lamp_at].append(self.lamp)
        for obj, loc in spec["objects"]:
            self.contents[loc].append(obj)
        self.states: dict[str, set[str]] = {obj: set() for obj, _ in spec["objects"]}
        self.location: str | None = None
        self.holding: str | None = None
        self.lamp_on = False
        self.steps = 0
        self.done = False
        self.won = False
        self.invalid_count = 0
        self._admissible = self.admissible_actions()
        observation = (f"{WELCOME}\n\nYou are in the middle of a room. Looking quickly around you, you see "
                       f"{see_list(self.receptacles)}.\n\nYour task is to: {task.instruction}")
        return Reset(observation, task.instruction, task.task_type, list(self._admissible))

    def step(self, action: str) -> Step:
        check_can_step(self.task, self.done)
        self.steps += 1
        action = " ".join(action.strip().lower().split())
        invalid = action not in self._admissible
        observation = NOTHING_HAPPENS if invalid else self._apply(action)
        if not invalid:
            self._admissible = self.admissible_actions()
        self.invalid_count += invalid
        self.won = self._goal_met()
        truncated = not self.won and self.steps >= self.max_steps
        self.done = self.won or truncated
        info = StepInfo(won=self.won, score=float(self.won), invalid_action=invalid,
                        admissible_actions=list(self._admissible), steps=self.steps, truncated=truncated)
        return Step(observation, float(self.won), self.done, info)

    # ----- rules -------------------------------------------------------------------------
    def _reachable(self, receptacle: str) -> bool:
        return self.is_open.get(receptacle, True)

    def _takeable(self, receptacle: str) -> list[str]:
        return [o for o in self.contents[receptacle] if o != self.lamp]

    def admissible_actions(self) -> list[str]:
        here = self.location
        actions = [f"go to {r}" for r in self.receptacles if r != here]
        actions += ["inventory", "look"]
        if self.holding:
            actions.append(f"examine {self.holding}")
        if here is not None:
            actions.append(f"examine {here}")
            if here in self.is_open:
                actions.append(f"{'close' if self.is_open[here] else 'open'} {here}")
            if self._reachable(here):
                if self.holding is None:
                    actions += [f"take {o} from {here}" for o in self._takeable(here)]
                else:
                    actions.append(f"put {self.holding} in/on {here}")
            if self.holding is not None:
                for verb, tool in TOOL_FOR.items():
                    if kind_of(here) == tool:
                        actions.append(f"{verb} {self.holding} with {here}")
            if self.lamp_at == here:
                actions.append(f"use {self.lamp}")
        return sorted(actions)

    def _describe(self, receptacle: str) -> str:
        if receptacle in self.is_open:
            if not self.is_open[receptacle]:
                return f"The {receptacle} is closed."
            return f"The {receptacle} is open. In it, you see {see_list(self.contents[receptacle])}."
        return f"On the {receptacle}, you see {see_list(self.contents[receptacle])}."

    def _apply(self, action: str) -> str:
        verb, _, rest = action.partition(" ")
        if action.startswith("go to "):
            self.location = action[len("go to "):]
            return f"You arrive at {self.location}. {self._describe(self.location)}"
        if verb == "open":
            self.is_open[rest] = True
            return f"You open the {rest}. {self._describe(rest)}"
        if verb == "close":
            self.is_open[rest] = False
            return f"You close the {rest}."
        if verb == "take":
            obj, _, source = rest.partition(" from ")
            self.contents[source].remove(obj)
            self.holding = obj
            return f"You pick up the {obj} from the {source}."
        if verb == "put":
            obj, _, dest = rest.partition(" in/on ")
            self.contents[dest].append(obj)
            self.holding = None
            return f"You put the {obj} in/on the {dest}."
        if verb in TOOL_FOR:
            obj, _, tool = rest.partition(" with ")
            self.states[obj].add(STATE_OF[verb])
            return f"You {verb} the {obj} using the {tool}."
        if verb == "use":
            self.lamp_on = True
            return f"You turn on the {rest}."
        if verb == "examine":
            if rest in self.contents:
                return self._describe(rest)
            state = sorted(self.states.get(rest, ()))
            return f"This is a {' and '.join(state)} {rest}." if state else f"There's nothing special about {rest}."
        if verb == "inventory":
            return f"You are carrying: a {self.holding}." if self.holding else "You are not carrying anything."
        if verb == "look":
            if self.location is None:
                return "You are in the middle of a room. Looking quickly around you, you see nothing."
            return f"You are facing the {self.location}. Next to it, you see nothing."
        raise AssertionError(f"admissible action without a rule: {action}")  # pragma: no cover

    def _goal_met(self) -> bool:
        goal = self.goal
        if goal["type"] == "look_at_obj_in_light":
            return (self.lamp_on and self.location == self.lamp_at and self.holding is not None
                    and kind_of(self.holding) == goal["object"])
        needed = STATE_OF.get(TRANSFORM.get(goal["type"], ""))
        placed = [o for r, objs in self.contents.items() if kind_of(r) == goal["target"] for o in objs
                  if kind_of(o) == goal["object"] and (needed is None or needed in self.states[o])]
        return len(placed) >= goal["count"]


def make_env(max_steps: int = 50, world: str = "usual") -> HouseholdEnv:
    return HouseholdEnv(max_steps=max_steps, world=world)


__all__ = ["HouseholdEnv", "make_env", "LAMPS"]
