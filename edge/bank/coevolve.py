"""The bank's co-evolution, one round: credit what was used, write guidance for new failures, prune.

``co_evolve`` is the whole step on an open bank, as a plain function (the ``update_bank`` stage of
``edge/train.py`` restores the bank's previous version first, calls it, then records the version
and the snapshot). It returns the round's record of changes, which the stage writes as
``bank_changes.json``.

1. **Credit**: every entry a split group saw gets ``u <- (1 - eta) u + eta * Delta`` per group, in
   order, ``n <- n + 1`` and a point of its history (utility, plain and conditioned success).
2. **Synthesis**: guidance for failure signatures no active entry covers (``edge.bank.synthesis``),
   written from the environment's evidence (this round's, or accumulated over the run:
   ``bank.evidence``), and with ``bank.subjects: seen`` knowledge about every subject the evidence
   knows enough about, failed on or not (``seen-and-steps``: and each task type's steps for the round's
   subjects; ``seen-and-type-steps``: each task type's steps once, for every subject); a near-duplicate
   of an active entry of the same task type (text similarity at least ``bank.merge_threshold``; with
   ``bank.grain: knowledge`` also about the same subject) is stored as ``merged`` into it, its
   provenance added to the twin's. With ``bank.revise``, a signature whose active entry the evidence
   now contradicts (the writer says something else) gets a new version that ``revises`` it; the old
   one becomes ``revised``.
3. **Pruning**: not helping, internalized, stale, size cap (``edge.bank.pruning``), with reasons.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from edge.bank.entry import PRUNE_REASONS, BankEntry
from edge.bank.pruning import PruneRules, prune_decisions
from edge.bank.store import ExperienceBank
from edge.bank.synthesis import LMSynthesizer, TemplateSynthesizer, round_evidence, subject_entries, synthesize
from edge.envs.registry import knowledge
from edge.files import fault_point

if TYPE_CHECKING:
    from edge.algorithms.contribution import GroupContribution
    from edge.config import BankConfig
    from edge.rollout import Trajectory

@dataclass
class EntryCredit:
    """What one round's groups say about one entry."""

    deltas: list[float] = field(default_factory=list)
    success_plain: list[float] = field(default_factory=list)
    success_conditioned: list[float] = field(default_factory=list)


def credit_by_entry(contributions: list[GroupContribution]) -> dict[str, EntryCredit]:
    credits: dict[str, EntryCredit] = {}
    for c in contributions:
        for entry_id in c.entry_ids:
            e = credits.setdefault(entry_id, EntryCredit())
            e.deltas.append(c.delta)
            e.success_plain.append(c.success_plain)
            e.success_conditioned.append(c.success_conditioned)
    return credits


def ema_utility(utility: float, deltas: list[float], eta: float) -> float:
    """Apply ``u <- (1 - eta) u + eta * Delta`` once per group, in order."""
    for delta in deltas:
        utility = (1 - eta) * utility + eta * delta
    return utility


def credit_entries(bank: ExperienceBank, contributions: list[GroupContribution], round_index: int,
                   eta: float) -> list[dict]:
    credited = []
    for entry_id, credit in credit_by_entry(contributions).items():
        entry = bank.get(entry_id)
        before = entry.utility
        entry.utility = ema_utility(entry.utility, credit.deltas, eta)
        entry.uses += len(credit.deltas)
        entry.positive_credit += sum(max(d, 0.0) for d in credit.deltas)
        entry.last_used_round = round_index
        entry.history_rounds.append(round_index)
        entry.history_utility.append(entry.utility)
        entry.history_success_plain.append(sum(credit.success_plain) / len(credit.success_plain))
        entry.history_success_conditioned.append(sum(credit.success_conditioned) / len(credit.success_conditioned))
        bank.upsert([entry])
        credited.append({"id": entry_id, "groups": len(credit.deltas), "utility_before": before,
                         "utility_after": entry.utility, "deltas": credit.deltas})
    return credited


def make_synthesizer(cfg: BankConfig):
    return LMSynthesizer(cfg.lm_endpoint, cfg.lm_model) if cfg.synthesizer == "lm" else TemplateSynthesizer()


def add_guidance(bank: ExperienceBank, trajectories: list[Trajectory], round_index: int, cfg: BankConfig,
                 evidence: dict | None = None) -> tuple[list[dict], list[dict], list[dict], dict]:
    """Synthesize for uncovered signatures and store, merging near-duplicates and revising what the
    evidence changed: (added, merged, revised, counts of what became of each signature)."""
    active = bank.all("active")
    to_revise: dict[str, BankEntry] = {}
    generic = {text for env in {t.task.env for t in trajectories} for text in knowledge(env).generic_guidance}

    def covered(signature: str, text: str) -> bool:
        current = next((e for e in active if e.signature == signature), None)
        if current is None:
            return False
        # A revision replaces what the environment's writer said from evidence by what it says now;
        # never by its generic fallback (a round that saw nothing), never an LM's entry (its wording
        # varies from call to call whatever the evidence).
        if cfg.revise and current.text != text and text not in generic and current.synthesizer == "template":
            to_revise[signature] = current
            return False
        return True

    added, merged, revised = [], [], []
    synthesizer, counts = make_synthesizer(cfg), Counter()
    # What guidance is written from: the caller's (accumulated) evidence, else this round's alone.
    evidence = round_evidence(trajectories, counting=cfg.sightings) if evidence is None else evidence
    written = synthesize(trajectories, synthesizer, round_index, bank.next_id, cfg.max_chars, covered,
                         evidence=evidence, grain=cfg.grain, counts=counts)
    if cfg.subjects != "failed":
        written += subject_entries(trajectories, round_index, bank.next_id, evidence, cfg.max_chars, covered,
                                   skip={e.signature for e in written}, counts=counts,
                                   steps=cfg.subjects == "seen-and-steps",
                                   type_steps=cfg.subjects == "seen-and-type-steps")
    for entry in written:
        old = to_revise.pop(entry.signature, None)
        if old is not None:
            entry.revises = old.id
            old.status, old.prune_reason, old.status_round = "revised", f"revised by {entry.id}", round_index
            bank.upsert([old])
            active.remove(old)
            revised.append({"id": old.id, "by": entry.id, "signature": entry.signature, "was": old.text,
                            "now": entry.text})
        twin = near_duplicate(bank, entry, active, cfg.merge_threshold, same_subject=cfg.grain == "knowledge")
        if twin is not None:
            twin.provenance = sorted(set(twin.provenance) | set(entry.provenance))
            bank.upsert([twin])
            entry.status, entry.prune_reason, entry.status_round = "merged", f"merged into {twin.id}", round_index
            merged.append({"id": entry.id, "into": twin.id, "signature": entry.signature})
        else:
            added.append({"id": entry.id, "kind": entry.kind, "signature": entry.signature, "text": entry.text,
                          "provenance": entry.provenance} | ({"revises": entry.revises} if entry.revises else {}))
        bank.add([entry])
        if entry.status == "active":
            active.append(entry)
    counts.update(getattr(synthesizer, "counts", {}))  # the LM's: asked, answered, failed, empty, unparsed
    return added, merged, revised, dict(sorted(counts.items()))


def near_duplicate(bank: ExperienceBank, entry: BankEntry, active: list[BankEntry], threshold: float,
                   same_subject: bool = True) -> BankEntry | None:
    """The active entry for the same task type or "any" whose text is most similar, if at least
    ``threshold``; with ``same_subject`` (``bank.grain: knowledge``, where an entry serves every task
    type needing its subject) only one about the same subject (key): advice about another subject is
    then never a twin, however alike the words ("look for keychain in sidetable" / "... watch ...").
    Without it (``grain: task_type``) texts merge across subjects, as the bank always did."""
    peers = [e for e in active if e.task_type in (entry.task_type, "any") and (not same_subject or e.key == entry.key)]
    if not peers:
        return None
    vectors = bank.embedder.embed([entry.text] + [e.text for e in peers])
    scores = vectors[1:] @ vectors[0]
    best = int(scores.argmax())
    return peers[best] if scores[best] >= threshold else None


def prune_rules(cfg: BankConfig) -> PruneRules:
    """The pruning rules of ``bank.prune``."""
    p = cfg.prune
    return PruneRules(p.min_uses, p.min_utility, p.window, p.tolerance, p.stale_rounds, p.max_size, frozenset(p.rules),
                      p.internalized_needs, p.lift_margin)


def prune_entries(bank: ExperienceBank, round_index: int, cfg: BankConfig) -> list[dict]:
    pruned = []
    for entry_id, reason in prune_decisions(bank.all("active"), round_index, prune_rules(cfg)).items():
        entry = bank.get(entry_id)
        entry.status, entry.prune_reason, entry.status_round = "pruned", reason, round_index
        bank.upsert([entry])
        pruned.append({"id": entry_id, "reason": reason, "utility": entry.utility, "uses": entry.uses})
    return pruned


def co_evolve(bank: ExperienceBank, trajectories: list[Trajectory], contributions: list[GroupContribution],
              round_index: int, cfg: BankConfig, synthesize_new: bool = True, prune: bool = True,
              evidence: dict | None = None) -> dict:
    """One round of the bank's co-evolution on ``bank``; the record of what changed and how long
    each part took (see the module's doc), and under ``evidence`` what guidance is now written from
    (with ``bank.evidence: accumulated``, the ``evidence`` given, from earlier rounds, plus this
    round's: pass it back next round). ``synthesize_new`` / ``prune`` switch parts off (the
    static-bank and no-prune ablations)."""
    started = time.perf_counter()
    credited = credit_entries(bank, contributions, round_index, cfg.eta)
    credit_seconds = time.perf_counter() - started
    fault_point("bank:credited")  # a kill between two table versions: the stage restores and redoes it
    synth_started = time.perf_counter()
    evidence = round_evidence(trajectories, (evidence or {}) if cfg.evidence == "accumulated" else None,
                              counting=cfg.sightings)
    added, merged, revised, counts = (add_guidance(bank, trajectories, round_index, cfg, evidence) if synthesize_new
                                      else ([], [], [], {}))
    synth_seconds = time.perf_counter() - synth_started
    prune_started = time.perf_counter()
    pruned = prune_entries(bank, round_index, cfg) if prune else []
    prune_seconds = time.perf_counter() - prune_started
    return {
        "round": round_index, "credited": credited, "added": added, "merged": merged, "revised": revised,
        "pruned": pruned, "synthesis": counts, "evidence": evidence,
        "pruned_by_reason": {r: sum(p["reason"] == r for p in pruned) for r in PRUNE_REASONS},
        "seconds": {"credit": credit_seconds, "synthesis": synth_seconds, "prune": prune_seconds},
    }
