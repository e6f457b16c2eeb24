"""E(x): the experience block retrieved for a task, shared by training, evaluation and `edge eval`.

Every entry is checked again by the sanitiser on its way to a prompt (``prompt_text``): entries are
sanitised when they are written, but a bank table edited by any other means (a tampered snapshot, a
hand-edited LanceDB folder) would otherwise reach the policy unchecked. A refused entry is skipped, as
if it were not in the bank, and a warning names it and the reason once per process.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from edge.bank.entry import BankEntry
from edge.bank.sanitize import refusal_reason, sanitize_guidance
from edge.bank.store import ExperienceBank
from edge.envs.base import EVERY_SUBJECT
from edge.envs.registry import knowledge
from edge.text import split_words

if TYPE_CHECKING:
    from edge.config import BankConfig
    from edge.envs.base import Knowledge, Task

log = logging.getLogger(__name__)
_WARNED: set[str] = set()


@lru_cache(maxsize=8192)
def _vetted(text: str, max_chars: int | None, language: str) -> tuple[str | None, str | None]:
    """(text for the prompt, refusal reason): one of the two is None. Cached: an active entry is
    retrieved for many tasks and steps, and its text rarely changes."""
    # Without a cap, the entry's own length is the cap: an entry is only ever shortened when written.
    cap = max_chars if max_chars is not None else max(len(text), 1)
    reason = refusal_reason(text, max_chars=cap, language=language)
    if reason is not None:
        return None, reason
    return sanitize_guidance(text, max_chars=cap, language=language), None


def prompt_text(entry: BankEntry, max_chars: int | None = None, language: str = "ascii") -> str | None:
    """What ``entry`` may put into a prompt, or None when the sanitiser refuses its text (a warning
    names the entry and the reason, once per entry id in a process).

    For an entry the sanitiser wrote, this is its text unchanged. ``max_chars``: refuse entries longer
    than ``INPUT_FACTOR`` times this (``bank.max_chars``) and cut the rest to it; None leaves the length
    alone. ``language``: the bank's (``edge.bank.sanitize.LANGUAGES``)."""
    text, reason = _vetted(entry.text, max_chars, language)
    if reason is not None and entry.id not in _WARNED:
        _WARNED.add(entry.id)
        log.warning("bank entry %s is not shown to the policy: the sanitiser refuses its text (%s); "
                    "was the bank table edited outside EDGE?", entry.id, reason)
    return text


def named_text(entry: BankEntry, name: Callable[[str], str] | None, max_chars: int | None = None,
               language: str = "ascii") -> str | None:
    """``prompt_text`` of an entry as one task sees it: an entry about a whole task type (key
    ``EVERY_SUBJECT``) named for the task by ``name`` (``Knowledge.name_subject``) and sanitised again;
    None when refused, or for such an entry without ``name``."""
    text = prompt_text(entry, max_chars, language)
    if text is None or entry.key != EVERY_SUBJECT:
        return text
    return None if name is None else _vetted(name(text), max_chars, language)[0]


@dataclass(frozen=True)
class TypeSteps:
    """How the entries about a whole task type (key ``EVERY_SUBJECT``, ``bank.subjects:
    seen-and-type-steps``) reach one task."""

    name: Callable[[str], str]
    """``Knowledge.name_subject`` for the task: the entry's text named for the task's subject."""
    stage: Callable[[str], int]
    """``Knowledge.guidance_stage``: which step a text gives (what an entry about the subject may already say)."""
    own_words: frozenset[str]
    """The task's instruction's words: an entry whose key they contain is about the task's own subject
    (a per-step query's observation may name other objects)."""


def retrieve_experience(bank: ExperienceBank, instruction: str, task_type: str, top_k: int, threshold: float,
                        key_must_match: bool = True, max_chars: int | None = None,
                        language: str = "ascii", stage: Callable[[str], int] | None = None,
                        steps: set[int] | None = None, type_steps: TypeSteps | None = None
                        ) -> tuple[str, list[str]] | None:
    """(experience text, entry ids) for a task, or None when nothing relevant is active.

    Active entries of the task's type (or of any type) whose key is similar enough to the instruction,
    best first. With ``key_must_match``, an entry's key words must also occur in the instruction:
    embeddings associate subjects (a "pillow" key scores high for "put a keychain on bed"). Entries
    whose text the sanitiser refuses are skipped (``prompt_text``); the next candidates take their place.
    ``stage``: the chosen entries are listed in the order of the episode stage it gives each text
    (``Knowledge.guidance_stage``; ties keep the similarity order); None lists them best first.
    ``steps`` (with ``stage``; ``bank.block_rule: complete``): the block is instead the most similar entry
    of each of these stages (``Knowledge.task_stages``), listed in stage order, and None unless every
    stage has one: a block that covers only some of a task's steps is not shown.
    ``type_steps`` (``bank.subjects: seen-and-type-steps``): the entries about the whole task type
    (``ExperienceBank.type_entries``, found by type, not by their key's similarity) come right after the
    most similar candidate (the oracle's order: where to look, then the step), named for the task
    (``named_text``), except where a candidate about the task's own subject already gives that stage
    (the more specific knowledge, which keeps its own place). Without it such entries are never shown."""
    # Complete blocks choose among every entry the task's subject and type retrieve, not the top_k alone
    # (a third "where to look" entry must not crowd out the only "what to do next" one).
    wanted = top_k if steps is None else None
    found = bank.retrieve(instruction, 4 * top_k if wanted else max(len(bank), 1), threshold, task_type)
    found = [(e, score) for e, score in found if e.key != EVERY_SUBJECT]  # not retrieved by similarity
    if key_must_match:
        words = set(split_words(instruction))
        found = [(e, score) for e, score in found if set(split_words(e.key)) <= words]
    candidates = [e for e, _ in found]
    if type_steps is not None:
        candidates = with_type_steps(candidates, bank.type_entries(task_type), type_steps)
    name = type_steps.name if type_steps is not None else None
    shown = []
    for entry in candidates:
        if wanted is not None and len(shown) >= wanted:
            break
        text = named_text(entry, name, max_chars, language)
        if text is None:
            continue
        if steps is not None:
            if stage(text) not in steps or any(stage(t) == stage(text) for _, t in shown):
                continue  # generic advice, or a stage that already has its (more similar) entry
        shown.append((entry, text))
    if not shown or (steps is not None and {stage(t) for _, t in shown} != steps):
        return None
    if stage is not None:
        shown.sort(key=lambda pair: stage(pair[1]))  # stable: the same stage keeps the similarity order
    return " ".join(text for _, text in shown), [e.id for e, _ in shown]


def with_type_steps(candidates: list[BankEntry], typed: list[BankEntry], how: TypeSteps) -> list[BankEntry]:
    """``candidates`` (best first) with the ``typed`` entries placed right after the first, except those
    whose stage a candidate about the task's own subject already gives (the more specific knowledge)."""
    given = {how.stage(e.text) for e in candidates if set(split_words(e.key)) <= how.own_words}
    typed = [e for e in typed if how.stage(e.text) not in given]
    return candidates[:1] + typed + candidates[1:]


def retrieve_for_task(bank: ExperienceBank, task: Task, cfg: BankConfig, query: str | None = None
                      ) -> tuple[str, list[str]] | None:
    """``retrieve_experience`` with the ``bank`` section's settings, for ``task`` (training, evaluation
    and `edge eval` all retrieve through here). ``query``: what is embedded (default the instruction;
    per-step retrieval adds the observation)."""
    known = knowledge(task.env)
    steps = known.task_stages(task) if cfg.block_rule == "complete" and known.has("task_stages") else None
    # Complete blocks list their stages in order whatever bank.block_order says: one entry per step.
    stage = known.guidance_stage if cfg.block_order == "episode" or steps is not None else None
    return retrieve_experience(bank, query or task.instruction, task.task_type, cfg.top_k, cfg.similarity_threshold,
                               cfg.key_must_match, cfg.max_chars, stage=stage, steps=steps,
                               type_steps=type_steps_for(task, cfg, known))


def type_steps_for(task: Task, cfg: BankConfig, known: Knowledge | None = None) -> TypeSteps | None:
    """``TypeSteps`` for ``task`` with ``bank.subjects: seen-and-type-steps`` and an environment that can
    name a task's subject (``Knowledge.name_subject``); else None (no bank of another setting holds such
    entries, and a bank that does is not shown them: their text would name no subject). ``known``: the
    knowledge of the task's environment, when the caller has it (None: asked of the registry)."""
    if known is None:
        known = knowledge(task.env)
    if cfg.subjects != "seen-and-type-steps" or not known.has("name_subject"):
        return None
    return TypeSteps(lambda text: known.name_subject(text, task), known.guidance_stage,
                     frozenset(split_words(task.instruction)))


def random_entries(bank: ExperienceBank, n: int, rng: random.Random, max_chars: int | None = None,
                   language: str = "ascii", name: Callable[[str], str] | None = None
                   ) -> tuple[str, list[str]] | None:
    """``n`` active entries drawn uniformly without replacement (of any task type) from ``rng``: the
    random-entries control, guidance of the same kind and length with no relevance to the task.
    Entries the sanitiser refuses are not drawn from (``prompt_text``); entries about a whole task type
    are named by ``name`` (the task's ``TypeSteps.name``), and not drawn from without it (``named_text``)."""
    # Sorted by id, so the same rng state draws the same entries; refused ones are left out before
    # the draw, so a clean bank draws exactly what it drew before the check existed.
    active = [(e, text) for e in bank.all("active") if (text := named_text(e, name, max_chars, language)) is not None]
    if not active:
        return None
    chosen = rng.sample(active, min(n, len(active)))
    return " ".join(text for _, text in chosen), [e.id for e, _ in chosen]
