"""E(x): the experience block retrieved for a task, shared by training, evaluation and `edge eval`."""

from __future__ import annotations

import random

from edge.bank.store import ExperienceBank
from edge.text import split_words


def retrieve_experience(bank: ExperienceBank, instruction: str, task_type: str, top_k: int, threshold: float,
                        key_must_match: bool = True) -> tuple[str, list[str]] | None:
    """(experience text, entry ids) for a task, or None when nothing relevant is active.

    Active entries of the task's type (or of any type) whose key is similar enough to the instruction,
    best first. With ``key_must_match``, an entry's key words must also occur in the instruction:
    embeddings associate subjects (a "pillow" key scores high for "put a keychain on bed")."""
    found = bank.retrieve(instruction, 4 * top_k, threshold, task_type)
    if key_must_match:
        words = set(split_words(instruction))
        found = [(e, score) for e, score in found if set(split_words(e.key)) <= words]
    found = found[:top_k]
    if not found:
        return None
    return " ".join(e.text for e, _ in found), [e.id for e, _ in found]


def random_entries(bank: ExperienceBank, n: int, rng: random.Random) -> tuple[str, list[str]] | None:
    """``n`` active entries drawn uniformly without replacement (of any task type) from ``rng``: the
    random-entries control, guidance of the same kind and length with no relevance to the task."""
    active = bank.all("active")  # sorted by id, so the same rng state draws the same entries
    if not active:
        return None
    chosen = rng.sample(active, min(n, len(active)))
    return " ".join(e.text for e in chosen), [e.id for e in chosen]
