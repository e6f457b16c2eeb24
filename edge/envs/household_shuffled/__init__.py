"""``household_shuffled``: the household where only the advice knows where a task's object lies.

The same tasks as ``household``, task for task, but each task's object lies mostly in three receptacle kinds
of its room drawn for that task alone (kept in ``Task.spec["likely"]``, which the oracle's advice names), so
no regularity across tasks says where to look. It exists for the warm start
(``warmup.advised_env: household_shuffled``): advised demonstrations played here teach a policy to read
where the advice says to look, instead of learning the usual places the advice happens to repeat.
"""

from edge.envs.household import AGENTS, KNOWLEDGE, vocabulary
from edge.envs.household.env import HouseholdEnv
from edge.envs.household.env import make_env as household_env
from edge.envs.household.tasks import generate_tasks as household_tasks

DESCRIPTION = "the household where each task's object lies where only the advice says"
WORLD = "shuffled"

__all__ = ["AGENTS", "DESCRIPTION", "KNOWLEDGE", "generate_tasks", "make_env", "vocabulary"]


def make_env(max_steps: int = 50) -> HouseholdEnv:
    return household_env(max_steps, WORLD)


def generate_tasks(split: str, n: int, seed: int):
    return household_tasks(split, n, seed, WORLD)
