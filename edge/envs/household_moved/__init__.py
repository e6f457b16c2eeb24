"""``household_moved``: the household after its objects moved (a world that changed).

The same rooms, layouts, task types, goals and instructions as ``household``, task for task, but every
object kind now lies mostly in other receptacle kinds of its rooms (``world.moved_likely``). A policy
warm-started on ``household`` has learnt where things used to be; trained here, it must unlearn that.
The oracle's advice names the moved places, so the oracle control asks whether a scaffold that carries
what changed speeds the adaptation, and EDGE whether a bank that learns it from its own winners does.
"""

from edge.envs.household import AGENTS, KNOWLEDGE, vocabulary
from edge.envs.household.env import HouseholdEnv
from edge.envs.household.env import make_env as household_env
from edge.envs.household.tasks import generate_tasks as household_tasks

DESCRIPTION = "the household after its objects moved: the same tasks, other likely places"
WORLD = "moved"

__all__ = ["AGENTS", "DESCRIPTION", "KNOWLEDGE", "generate_tasks", "make_env", "vocabulary"]


def make_env(max_steps: int = 50) -> HouseholdEnv:
    return household_env(max_steps, WORLD)


def generate_tasks(split: str, n: int, seed: int):
    return household_tasks(split, n, seed, WORLD)
