"""keysdoors: a small keys-and-doors game, written the way a user writes an environment for EDGE.

It lives outside ``edge/`` on purpose: the tests register it through the ``edge.envs`` entry-point
group (as ``pip install`` of a package declaring ``keysdoors = "keysdoors"`` would), and it is the
worked example of ``docs/ENVIRONMENTS.md``. The module gives the registry what it asks for:
``make_env``, ``generate_tasks``, ``AGENTS`` and, optionally, ``DESCRIPTION``, ``vocabulary()`` (for
the tiny model's word tokenizer) and ``KNOWLEDGE`` (what EDGE's bank, oracle control and warm start
ask; see ``knowledge.py``).
"""

from keysdoors.agents import AGENTS
from keysdoors.game import KeysDoorsEnv, generate_tasks, make_env, vocabulary
from keysdoors.knowledge import KNOWLEDGE

DESCRIPTION = "keys and doors: find the right colour's key, unlock (and open) its door"

__all__ = ["AGENTS", "DESCRIPTION", "KNOWLEDGE", "KeysDoorsEnv", "generate_tasks", "make_env", "vocabulary"]
