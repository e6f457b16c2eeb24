"""What keysdoors tells EDGE: how a lost episode failed, where the round saw each colour's keys, how
its guidance reads, and the oracle's advice. It has no demonstrators of its own: the warm start
clones its ``random`` and ``expert`` agents."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from edge.envs.base import Knowledge, Task
from edge.guidance import entry
from edge.text import split_words
from keysdoors.game import LIKELY

ON_THE = re.compile(r"^on the ([a-z]+) \d+, you see (.*)\.$")


def look_for(colour: str, kinds: list[str]) -> str:
    return entry("try", f"look for the {colour} key in the {' , '.join(kinds)}")


def search_elsewhere() -> str:
    return entry("recover", "if the key is not where you looked , go to a place you have not visited")


def use_key(colour: str) -> str:
    return entry("try", f"take the {colour} key to the {colour} door and unlock it")


def open_after(colour: str) -> str:
    return entry("try", f"after you unlock the {colour} door , open it")


class KeysDoorsKnowledge(Knowledge):
    generic_guidance = frozenset({search_elsewhere()})  # true of every task type: stored with type "any"

    def read_failure(self, trajectory) -> tuple[str, str]:
        # The subject is the colour: the instruction names it, so entries keyed to it are retrieved
        # for every task about that colour (the key rule of docs/ENVIRONMENTS.md).
        colour = trajectory.task.spec["colour"]
        actions = [s.decision.action for s in trajectory.steps]
        if not any(a.startswith(f"take {colour} key") for a in actions):
            return "not_found", colour
        if not any(a.startswith(f"unlock {colour} door with {colour} key") for a in actions):
            return "not_unlocked", colour
        return "not_opened", colour

    def evidence(self, trajectories, previous=None) -> dict[str, dict[str, int]]:
        """Colour -> kinds of place its keys were seen on, over the observations so far (JSON, as
        EDGE keeps it between rounds)."""
        seen: dict[str, Counter] = defaultdict(Counter)
        for colour, places in (previous or {}).items():
            seen[colour].update(places)
        for t in trajectories:
            for step in t.steps:
                found = ON_THE.match(step.observation.lower())
                if found:
                    for colour in re.findall(r"a ([a-z]+) key", found.group(2)):
                        seen[colour][found.group(1)] += 1
        return {colour: dict(places) for colour, places in seen.items()}

    def write_guidance(self, failure, evidence, successes) -> tuple[str, str] | None:
        if failure.pattern == "not_found":
            kinds = [kind for kind, _ in Counter(evidence.get(failure.subject, {})).most_common(2)]
            return ("try", look_for(failure.subject, kinds)) if kinds else ("recover", search_elsewhere())
        if failure.pattern == "not_unlocked":
            return "try", use_key(failure.subject)
        return "try", open_after(failure.subject)

    def oracle_advice(self, task: Task) -> list[str]:
        colour = task.spec["colour"]
        present = [k for k in LIKELY[colour] if any(p.startswith(k + " ") for p in task.spec["places"])]
        advice = [look_for(colour, present)] if present else []
        advice.append(use_key(colour))
        if task.task_type == "unlock_open":
            advice.append(open_after(colour))
        return advice

    def guidance_vocabulary(self) -> set[str]:
        texts = (look_for("x", ["y"]), search_elsewhere(), use_key("x"), open_after("x"))
        return {w for text in texts for w in split_words(text)}


KNOWLEDGE = KeysDoorsKnowledge()
