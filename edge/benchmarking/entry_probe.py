"""Which entries are worth following: each bank entry's paired effect on one policy's success.

The advice probe (`benchmarks/advice_probe.py`) says what a whole bank's block is worth; this says which
of its entries earn that, so a bank can be audited entry by entry. For every evaluation task that
retrieves anything, the same episode (same task, same sampling stream) is played three ways: plain, with
the block retrieval gives, and with that block less one entry (leave-one-out; with a one-entry block,
that is the plain episode). An entry's **contribution** is the mean over the tasks it was shown on of
(success with the block − success with the block less the entry): what the policy loses when the entry
goes, the others staying. Its **lift** is (with the block − plain) on the same tasks, the whole block's
worth where the entry took part. Where the environment has an oracle, **oracle words** is the share of the
entry's words that the oracle's advice for the same task also says (1.0: nothing the oracle would not
say; 0: nothing it would). Several sampling seeds play every task once per seed, all paired.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from edge.bank.retrieval import named_text, prompt_text, retrieve_for_task, type_steps_for
from edge.bank.store import ExperienceBank
from edge.config import BankConfig
from edge.envs.base import Task
from edge.evaluate import evaluate
from edge.policy.actor import Actor
from edge.rollout import Experience
from edge.text import split_words


@dataclass
class EntryEffect:
    """One entry's record over the tasks that retrieved it (each task once per sampling seed)."""

    entry_id: str
    text: str
    """What the report calls the entry (``entry_effects``' ``label``)."""
    episodes: int = 0
    """(task, sampling seed) pairs on which the entry was shown."""
    plain_wins: int = 0
    block_wins: int = 0
    without_wins: int = 0
    """Wins with the block less this entry."""
    oracle_words: list[float] = field(default_factory=list)

    @property
    def contribution(self) -> float:
        return (self.block_wins - self.without_wins) / self.episodes if self.episodes else 0.0

    @property
    def lift(self) -> float:
        return (self.block_wins - self.plain_wins) / self.episodes if self.episodes else 0.0

    @property
    def oracle_agreement(self) -> float | None:
        return sum(self.oracle_words) / len(self.oracle_words) if self.oracle_words else None

    def as_dict(self) -> dict:
        return {"entry_id": self.entry_id, "text": self.text, "episodes": self.episodes,
                "plain": self.plain_wins / self.episodes if self.episodes else None,
                "with_block": self.block_wins / self.episodes if self.episodes else None,
                "without_entry": self.without_wins / self.episodes if self.episodes else None,
                "contribution": self.contribution, "lift": self.lift, "oracle_words": self.oracle_agreement}


def block_without(entry_texts: list[str], drop: int) -> str | None:
    """The experience block of ``entry_texts`` (in their retrieved order) less the one at ``drop``; None
    when nothing is left (the episode is then the plain one)."""
    kept = [t for i, t in enumerate(entry_texts) if i != drop]
    return " ".join(kept) if kept else None


def word_overlap(text: str, reference: list[str]) -> float:
    """Share of ``text``'s distinct words that also occur in the ``reference`` lines."""
    words = set(split_words(text))
    said = {w for line in reference for w in split_words(line)}
    return len(words & said) / len(words) if words else 0.0


def entry_effects(actor: Actor, tasks: list[Task], sample_seeds: list[int],
                  retrieved: Callable[[Task], tuple[list[str], list[str]] | None],
                  oracle: Callable[[Task], list[str]] | None = None,
                  label: Callable[[str], str] | None = None) -> list[EntryEffect]:
    """Each retrieved entry's contribution and lift for ``actor`` on ``tasks``, paired task by task.

    ``retrieved(task)``: the entries' ids and prompt texts in the block's order (the block is their texts
    joined by spaces, as retrieval builds it), or None. ``oracle(task)``: the oracle's advice lines, for
    the agreement column. ``label(entry id)``: the text an entry is reported under (``entry_labels``);
    None: its text in the first block that shows it. Sorted by contribution, most helpful first (ties by id)."""
    shown = {t.task_id: found for t in tasks if (found := retrieved(t)) is not None}
    probed = [t for t in tasks if t.task_id in shown]
    effects: dict[str, EntryEffect] = {}
    for ids, texts in shown.values():
        for ident, text in zip(ids, texts):
            if ident not in effects:
                effects[ident] = EntryEffect(ident, text if label is None else label(ident))
    if not probed:
        return []
    positions = max(len(ids) for ids, _ in shown.values())
    for seed in sample_seeds:
        plain = evaluate(actor, probed, seed).won_by_task
        block = evaluate(actor, probed, seed,
                         experience_for=lambda t: Experience(" ".join(shown[t.task_id][1]))).won_by_task
        # One evaluation per position left out: a task appears once in each, so its stream is its own.
        without: list[dict[str, bool]] = []
        for drop in range(positions):
            less = {tid: block_without(texts, drop) for tid, (_, texts) in shown.items() if len(texts) > drop}
            several = [t for t in probed if less.get(t.task_id) is not None]
            if several:
                less_block = lambda t, less=less: Experience(less[t.task_id])  # noqa: E731
                without.append(evaluate(actor, several, seed, experience_for=less_block).won_by_task)
            else:
                without.append({})
        for t in probed:
            ids, texts = shown[t.task_id]
            for drop, ident in enumerate(ids):
                effect = effects[ident]
                effect.episodes += 1
                effect.plain_wins += plain[t.task_id]
                effect.block_wins += block[t.task_id]
                effect.without_wins += without[drop].get(t.task_id, plain[t.task_id])
                if oracle is not None:
                    effect.oracle_words.append(word_overlap(texts[drop], oracle(t)))
    return sorted(effects.values(), key=lambda e: (-e.contribution, e.entry_id))


def retrieved_entries(bank: ExperienceBank, cfg: BankConfig) -> Callable[[Task], tuple[list[str], list[str]] | None]:
    """``entry_effects``' ``retrieved`` for a stored bank, retrieving as training and evaluation do
    (``retrieve_for_task``), with each entry's prompt text in the block's order."""

    def retrieved(task: Task) -> tuple[list[str], list[str]] | None:
        found = retrieve_for_task(bank, task, cfg)
        if found is None:
            return None
        block, ids = found
        how = type_steps_for(task, cfg)
        texts = [named_text(bank.get(i), how.name if how else None, cfg.max_chars) for i in ids]
        if " ".join(texts) != block:  # the block is the entries' texts joined: anything else is a bug
            raise RuntimeError(f"task {task.task_id}: the retrieved block is not its entries' texts joined")
        return ids, texts

    return retrieved


def entry_labels(bank: ExperienceBank, cfg: BankConfig) -> Callable[[str], str]:
    """``entry_effects``' ``label`` for a stored bank: each entry's own prompt text. An entry about a whole
    task type (key ``EVERY_SUBJECT``) is shown to each task named for its subject (``named_text``); its
    label is the text written for the type, not what the first task it was shown to read."""

    def label(ident: str) -> str:
        text = prompt_text(bank.get(ident), cfg.max_chars)
        if text is None:  # a retrieved entry was shown, so the sanitiser let it through
            raise RuntimeError(f"entry {ident}: the sanitiser refuses the text of an entry retrieval showed")
        return text

    return label
