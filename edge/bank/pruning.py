"""Pruning: entries the changing policy no longer needs leave the active set, with a reason.

Nothing is deleted; an entry's status becomes ``pruned`` and ``prune_reason`` says which rule fired:

- ``internalized``: the entry once helped (positive credit), and over its last ``window`` credited
  rounds the plain members of its groups succeed as often as the conditioned ones (within
  ``tolerance``): the policy has absorbed it. Checked first, since it also looks like "not helping".
  With ``internalized_needs="lift"`` the label asks for evidence: in a credited round before the
  window the conditioned members' success stood at least ``lift_margin`` above the plain members' (it
  helped, not one lucky group), and over the window the plain members reach that level. An entry that
  caught up without both (groups that all fail, plain and advised alike, "catch up" at 0%) leaves as
  ``not_helping`` in the same round when that rule is on; when it is off, only ``stale`` or the size cap
  can remove it.
- ``not_helping``: used at least ``min_uses`` times and its utility is at most ``min_utility`` (and, under
  ``internalized_needs="lift"``, the caught-up entries above that never showed a lift).
- ``stale``: not retrieved for ``stale_rounds`` rounds.
- ``size_cap``: more than ``max_size`` active entries: the lowest utility go.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge.bank.entry import BankEntry

RULES = ("internalized", "not_helping", "stale", "size_cap")
"""The rules, in the order ``prune_decisions`` checks them (``bank.prune.rules`` names some of them)."""


@dataclass(frozen=True)
class PruneRules:
    min_uses: int = 4
    min_utility: float = 0.0
    window: int = 3
    tolerance: float = 0.05
    stale_rounds: int = 6
    max_size: int = 200
    enabled: frozenset[str] = frozenset(RULES)
    """The rules that prune (``bank.prune.rules``); an entry only the others would prune stays."""
    internalized_needs: str = "credit"
    """What the ``internalized`` label asks for: ``credit`` (the spec) or ``lift`` (see the module's doc)."""
    lift_margin: float = 0.25


def helped_then_absorbed(entry: BankEntry, rules: PruneRules) -> bool:
    """``internalized_needs="lift"``: an earlier lift of at least ``lift_margin``, whose success level
    the plain members reach over the last ``window`` credited rounds."""
    w = rules.window
    plain, cond = entry.history_success_plain, entry.history_success_conditioned
    # Rounded: success fractions of four members make gaps like 0.75 - 0.5 that float arithmetic puts a hair
    # under an exact margin of 0.25.
    earlier = [(round(c - p, 9), c) for p, c in zip(plain[:-w], cond[:-w])]
    lifts = [c for gap, c in earlier if gap >= rules.lift_margin]
    if not lifts:
        return False
    # The least of the lifted levels: the plain side must reach what the advice gave at least once.
    return sum(plain[-w:]) / w >= min(lifts) - rules.tolerance


def caught_up(entry: BankEntry, rules: PruneRules) -> bool:
    """The spec's internalized test: positive credit once, and plain success level with conditioned."""
    if entry.positive_credit <= 0 or len(entry.history_rounds) < rules.window or entry.uses < rules.min_uses:
        return False
    plain = entry.history_success_plain[-rules.window:]
    cond = entry.history_success_conditioned[-rules.window:]
    return sum(plain) / len(plain) >= sum(cond) / len(cond) - rules.tolerance


def not_helping(entry: BankEntry, rules: PruneRules) -> bool:
    return entry.uses >= rules.min_uses and entry.utility <= rules.min_utility


def stale(entry: BankEntry, round_index: int, rules: PruneRules) -> bool:
    return round_index - max(entry.last_used_round, entry.created_round) >= rules.stale_rounds


def prune_decisions(active: list[BankEntry], round_index: int, rules: PruneRules) -> dict[str, str]:
    """Entry id -> reason, for every active entry that should leave the active set this round."""
    reasons: dict[str, str] = {}
    on = rules.enabled
    for entry in active:
        reason = None
        if "internalized" in on and caught_up(entry, rules):
            if rules.internalized_needs != "lift" or helped_then_absorbed(entry, rules):
                reason = "internalized"
            elif "not_helping" in on:
                reason = "not_helping"  # no better than plain over the window, and never shown to help
        if reason is None and "not_helping" in on and not_helping(entry, rules):
            reason = "not_helping"
        if reason is None and "stale" in on and stale(entry, round_index, rules):
            reason = "stale"
        if reason is not None:
            reasons[entry.id] = reason
    survivors = [e for e in active if e.id not in reasons]
    if "size_cap" in on and len(survivors) > rules.max_size:
        # Lowest utility first; among equals the older entry goes (ids grow with time).
        for entry in sorted(survivors, key=lambda e: (e.utility, e.id))[: len(survivors) - rules.max_size]:
            reasons[entry.id] = "size_cap"
    return reasons
