"""The game: a hall with a few places (drawer 1, chest 2, ...) holding coloured keys, and a door.

Task types: ``unlock`` ("unlock the red door": hold the red key at the red door and unlock it) and
``unlock_open`` (unlock it, then open it). The regularity a bank can learn: each colour's key usually
lies in one of two kinds of place (``LIKELY``). ``test_unseen`` uses colours train never shows.
"""

from __future__ import annotations

import random

from edge.envs.base import Reset, Step, StepInfo, Task, check_can_step
from edge.text import split_words

PLACE_KINDS = ("drawer", "chest", "shelf", "bag", "box", "rug")
LIKELY = {"red": ("drawer", "shelf"), "blue": ("chest", "bag"), "green": ("box", "rug"),
          "yellow": ("shelf", "chest"), "white": ("bag", "drawer"), "black": ("rug", "box")}
SEEN_COLOURS, UNSEEN_COLOURS = ("red", "blue", "green", "yellow"), ("white", "black")
TASK_TYPES = ("unlock", "unlock_open")
NOTHING = "Nothing happens."


def make_task(split: str, index: int, seed: int) -> Task:
    rng = random.Random(f"keysdoors-{seed}-{split}-{index}")
    task_type = TASK_TYPES[index % 2]
    colour = rng.choice(UNSEEN_COLOURS if split == "test_unseen" else SEEN_COLOURS)
    places = [f"{kind} {rng.randint(1, 3)}" for kind in rng.sample(PLACE_KINDS, 5)]
    places = sorted(set(places))
    likely = [p for p in places if p.split()[0] in LIKELY[colour]]
    # 80% of keys lie where their colour's keys usually do (when such a place exists).
    home = rng.choice(likely) if likely and rng.random() < 0.8 else rng.choice(places)
    decoys = [(c, rng.choice(places)) for c in rng.sample([c for c in LIKELY if c != colour], 2)]
    verb = "unlock" if task_type == "unlock" else "unlock and open"
    return Task(env="keysdoors", split=split, task_id=f"keysdoors-{split}-{index:05d}", task_type=task_type,
                instruction=f"Your task is to: {verb} the {colour} door.",
                spec={"colour": colour, "places": places, "keys": [[colour, home], *map(list, decoys)]})


def generate_tasks(split: str, n: int, seed: int) -> list[Task]:
    return [make_task(split, i, seed) for i in range(n)]


class KeysDoorsEnv:
    name = "keysdoors"

    def __init__(self, max_steps: int = 20):
        self.max_steps = max_steps
        self.task: Task | None = None

    def reset(self, task: Task) -> Reset:
        self.task, self.done, self.steps = task, False, 0
        self.colour, self.places = task.spec["colour"], list(task.spec["places"])
        self.contents = {p: [] for p in self.places}
        for colour, place in task.spec["keys"]:
            self.contents[place].append(f"{colour} key")
        self.at, self.holding, self.unlocked, self.opened = None, [], False, False
        first = f"You are in the hall. You see {', '.join(self.places)}, and a {self.colour} door."
        return Reset(first, task.instruction, task.task_type, self.admissible())

    def admissible(self) -> list[str]:
        actions = [f"go to {p}" for p in self.places if p != self.at] + ["look", "inventory"]
        if self.at != "door":
            actions.append(f"go to {self.colour} door")
        if self.at in self.contents:
            actions += [f"take {key} from {self.at}" for key in self.contents[self.at]]
        if self.at == "door":
            actions += [f"unlock {self.colour} door with {key}" for key in self.holding if not self.unlocked]
            if self.unlocked and not self.opened:
                actions.append(f"open {self.colour} door")
        return sorted(actions)

    def step(self, action: str) -> Step:
        check_can_step(self.task, self.done)
        self.steps += 1
        invalid = action not in self.admissible()
        observation = NOTHING if invalid else self._apply(action)
        won = self.unlocked if self.task.task_type == "unlock" else self.opened
        truncated = not won and self.steps >= self.max_steps
        self.done = won or truncated
        info = StepInfo(won=won, score=float(won), invalid_action=invalid, admissible_actions=self.admissible(),
                        steps=self.steps, truncated=truncated)
        return Step(observation, float(won), self.done, info)

    def _apply(self, action: str) -> str:
        if action == "look":
            return f"You are at {self.at or 'the hall'}."
        if action == "inventory":
            return f"You carry: {', '.join(self.holding) or 'nothing'}."
        if action.startswith("go to ") and action.endswith(" door"):
            self.at = "door"
            return f"You arrive at the {self.colour} door. It is locked." if not self.unlocked else \
                f"You arrive at the {self.colour} door."
        if action.startswith("go to "):
            self.at = action[len("go to "):]
            keys = self.contents[self.at]
            return f"On the {self.at}, you see {', '.join(f'a {k}' for k in keys) or 'nothing'}."
        if action.startswith("take "):
            key = action[len("take "):].split(" from ")[0]
            self.contents[self.at].remove(key)
            self.holding.append(key)
            return f"You pick up the {key}."
        if action.startswith("unlock "):
            key = action.split(" with ")[1]
            if key != f"{self.colour} key":
                return "The key does not fit."
            self.unlocked = True
            return f"You unlock the {self.colour} door."
        self.opened = True
        return f"You open the {self.colour} door."


def make_env(max_steps: int = 20) -> KeysDoorsEnv:
    return KeysDoorsEnv(max_steps)


def vocabulary() -> set[str]:
    """Every word the game can show or accept."""
    text = ("Your task is to: unlock and open the door . You are in the hall . You see , and a door "
            "go to look inventory take from with You arrive at It is locked On the you see nothing "
            "You carry : You pick up The key does not fit You unlock You open Nothing happens key at "
            + " ".join(PLACE_KINDS) + " " + " ".join(LIKELY) + " 1 2 3 " + " ".join(TASK_TYPES))
    return set(split_words(text)) | {w for t in TASK_TYPES for w in t.split("_")}
