"""The language of guidance: how an experience entry reads, and the oracle's advice, asked of the
environment.

Entries are short sentences of three kinds, as in the spec: ``try`` (what works), ``avoid`` (what
fails) and ``recover`` (how to get out of a failure). What an entry says about a task is the
environment's knowledge (``edge.envs.base.Knowledge``, in each environment's folder): the bank's
synthesizer asks it to phrase guidance from trajectories, and the warm start shows the tiny model the
oracle's *true* advice in the same language, so that the base policy learns to read it, as an
instruction-tuned LLM would.
"""

from __future__ import annotations

import re

from edge.envs.base import Task

KINDS = ("try", "avoid", "recover")


def entry(kind: str, text: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"guidance kind must be one of {KINDS}, got {kind!r}")
    return f"{kind} : {text.strip().rstrip('.')} ."


def experience_block(entries: list[str]) -> str:
    """The text that goes into the prompt's experience section."""
    return " ".join(entries)


ENTRY_START = re.compile(rf"(?<= \.) (?=(?:{'|'.join(KINDS)}) : )")
"""Where one entry of a block ends and the next begins: after an entry's closing " ." (``entry``)."""


def block_entries(block: str) -> list[str]:
    """The entries an experience block lists, in its order (``experience_block`` read back)."""
    return ENTRY_START.split(block)


def block_after(block: str, task: Task, actions: list[str]) -> str | None:
    """The block an episode of ``task`` is shown once it has taken ``actions``
    (``bank.block_follows_progress``): without the entries of the stages it has completed
    (``Knowledge.stages_done``, each entry's stage by ``Knowledge.guidance_stage``); None when none is
    left. An environment without ``stages_done`` keeps the block whole."""
    from edge.envs.registry import knowledge

    know = knowledge(task.env)
    if not know.has("stages_done"):
        return block
    done = know.stages_done(task, actions)
    if not done:
        return block
    kept = [e for e in block_entries(block) if know.guidance_stage(e) not in done]
    return experience_block(kept) if kept else None


def has_oracle(env: str) -> bool:
    from edge.envs.registry import knowledge

    return knowledge(env).has("oracle_advice")


ORACLE_PARTS = {"truth": "oracle_advice", "misleading": "misleading_advice"}
"""The knowledge part each value of ``bank.oracle_advice`` asks for."""


def require_oracle(env: str, advice: str = "truth") -> None:
    """A control that needs the oracle's advice (``advice``, a ``bank.oracle_advice`` value: its true or its
    misleading advice) refuses an environment that has none."""
    from edge.envs.registry import knowledge

    part = ORACLE_PARTS[advice]
    if not knowledge(env).has(part):
        what = "oracle advice" if advice == "truth" else "misleading oracle advice (bank.oracle_advice: misleading)"
        raise ValueError(f"environment {env!r} has no {what} (its KNOWLEDGE does not implement {part}): the "
                         "method edge-oracle-bank cannot run on it")


def oracle_says(task: Task, advice: str = "truth") -> list[str]:
    """What the oracle says of ``task``: ``advice`` "truth", what an oracle that knows the task's environment's
    regularities (not this task's answer) says; "misleading", the same made false, in the same words and
    shape (``Knowledge.misleading_advice``)."""
    from edge.envs.registry import knowledge

    require_oracle(task.env, advice)
    return getattr(knowledge(task.env), ORACLE_PARTS[advice])(task)


def true_advice(task: Task) -> list[str]:
    """What an oracle that knows the task's environment's regularities (not this task's answer) says."""
    return oracle_says(task, "truth")


def misleading_advice(task: Task) -> list[str]:
    """The oracle's advice made false, in the same words and shape (``Knowledge.misleading_advice``)."""
    return oracle_says(task, "misleading")


def is_generic(text: str, env: str) -> bool:
    """Guidance that holds for every task type of an environment (stored with task type "any")."""
    from edge.envs.registry import knowledge

    return text in knowledge(env).generic_guidance


def guidance_vocabulary(envs: list[str]) -> set[str]:
    """Words the guidance of these environments can contain (their knowledge says), plus the kinds."""
    from edge.envs.registry import knowledge
    from edge.text import split_words

    words = set(split_words(" ".join(KINDS) + " : . ,"))
    for env in envs:
        words |= knowledge(env).guidance_vocabulary()
    return words
