"""``household``: a pure-Python mini-ALFWorld (see ``world``, ``tasks``, ``env``, ``agents``)."""

from edge.envs.household.agents import AGENTS, ExpertAgent, ExploreAgent, expert_plan
from edge.envs.household.env import HouseholdEnv, make_env
from edge.envs.household.knowledge import HouseholdKnowledge
from edge.envs.household.tasks import TASK_TYPES, generate_tasks, make_task

DESCRIPTION = "mini-ALFWorld: six household task types, 2.1.1 wording"

__all__ = ["AGENTS", "DESCRIPTION", "KNOWLEDGE", "ExpertAgent", "ExploreAgent", "HouseholdEnv", "TASK_TYPES",
           "expert_plan",
           "generate_tasks", "make_env", "make_task"]

KNOWLEDGE = HouseholdKnowledge()


def vocabulary() -> set[str]:
    """Every word household text can contain (lower-cased \\w+ runs and punctuation runs), for a
    word-level tokenizer. Built from the constants and message templates, not from sampled play."""
    from edge.envs.household import env as env_module
    from edge.envs.household import world
    from edge.text import split_words

    numbers = [str(i) for i in range(0, 21)]
    templates = [
        env_module.WELCOME, env_module.NOTHING_HAPPENS,
        "You are in the middle of a room. Looking quickly around you, you see nothing, and a",
        "Your task is to: put a some two clean hot cool in on under the with them it and",
        "look at examine find heat cool clean", "You arrive at. The is closed. open. In it, you see",
        "On the, you see", "You open the You close the You pick up the from the",
        "You put the in/on the", "You clean heat cool the using the", "You turn on the",
        "This is a There's nothing special about", "You are carrying: a You are not carrying anything.",
        "You are facing the. Next to it, you see nothing.",
        "go to open close take from put in/on clean heat cool with use examine inventory look",
    ]
    names = list(world.ROOM_RECEPTACLES) + list(world.OBJECT_KINDS) + list(world.LAMPS)
    names += [k for room in world.ROOM_RECEPTACLES.values() for k in room]
    names += [w for t in TASK_TYPES for w in t.split("_")]
    words: set[str] = set(numbers) | set(names)
    for text in templates:
        words.update(split_words(text))
    return words
