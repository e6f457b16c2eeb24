"""Marginal contribution of experience, from the rollouts the policy gradient needs anyway.

For a task x whose group was split into conditioned members (saw E(x)) and plain ones:

    Delta(x) = mean_{i in conditioned} R_i - mean_{i in plain} R_i,     c(x) = max(Delta(x), 0)

(``bank.credit``: ``gap``, the spec's c; ``margin``, Delta only where it clears a margin; ``soft``, a
sigmoid gate sigma(k (Delta - margin)) as SDAR uses; ``utility``, from the seen entries' accumulated
utility instead of one group's Delta: a gap between two halves of four episodes is positive in a
third of the groups where nothing separates them.)

and every entry g that E(x) contained is credited ``u_g <- (1 - eta) u_g + eta * Delta(x)``,
``n_g <- n_g + 1`` (the bank's co-evolution, ``edge.bank.coevolve``). No extra sampling: these are
the same trajectories GRPO trains on.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from edge.rollout import Trajectory


@dataclass
class GroupContribution:
    group_id: str
    task_type: str
    entry_ids: list[str]
    n_conditioned: int
    n_plain: int
    reward_conditioned: float
    reward_plain: float
    success_conditioned: float
    success_plain: float
    delta: float
    credit: float
    """c(x): max(Delta(x), 0) under the spec's rule (``bank.credit``)."""

    def to_dict(self) -> dict:
        return asdict(self)


def group_contributions(trajectories: list[Trajectory], unselected_plain: bool = False) -> list[GroupContribution]:
    """One record per group that has both conditioned and plain members; other groups have no Delta.
    ``unselected_plain`` (``bank.decided_by: half_plain``): Delta against the second half of the plain
    members by member index only, the first half having decided that the group be split."""
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        groups.setdefault(t.group_id, []).append(t)
    out = []
    for gid, members in groups.items():
        cond = [t for t in members if t.conditioned]
        plain = [t for t in members if not t.conditioned]
        if not cond or not plain:
            continue
        if unselected_plain:
            plain = sorted(plain, key=lambda t: t.member)[len(plain) // 2:]
        r_cond = sum(t.reward for t in cond) / len(cond)
        r_plain = sum(t.reward for t in plain) / len(plain)
        delta = r_cond - r_plain
        # Every entry any conditioned member saw (they differ only under per-step re-retrieval).
        entry_ids = list(dict.fromkeys(e for t in cond for e in t.experience.entry_ids))
        out.append(GroupContribution(
            group_id=gid, task_type=members[0].task.task_type, entry_ids=entry_ids,
            n_conditioned=len(cond), n_plain=len(plain), reward_conditioned=r_cond, reward_plain=r_plain,
            success_conditioned=sum(t.won for t in cond) / len(cond),
            success_plain=sum(t.won for t in plain) / len(plain), delta=delta, credit=max(delta, 0.0)))
    return out


CREDIT_RULES = ("gap", "margin", "soft", "utility")


def credit_of(delta: float, rule: str, margin: float = 0.0, sharpness: float = 8.0,
              utility: float | None = None) -> float:
    """c(x) for a group with gap ``delta`` under ``rule``; ``utility`` (rule ``utility``): the mean
    utility of the entries the group saw, this round's Delta included."""
    if rule == "gap":
        return max(delta, 0.0)
    if rule == "margin":
        return delta if delta >= margin else 0.0
    if rule == "soft":
        return 1.0 / (1.0 + math.exp(-sharpness * (delta - margin)))
    if rule == "utility":
        if utility is None:
            raise ValueError("bank.credit: utility needs the utilities of the entries a group saw")
        return max(utility, 0.0)
    raise ValueError(f"bank.credit must be one of {CREDIT_RULES}, got {rule!r}")


def with_credit_rule(contributions: list[GroupContribution], rule: str, margin: float = 0.0,
                     sharpness: float = 8.0, utilities: dict[str, float] | None = None,
                     eta: float = 0.3) -> list[GroupContribution]:
    """The contributions with c(x) recomputed under ``rule``. ``utilities``: each entry's utility
    before this round (rule ``utility``: a group's c is the mean over its entries of
    ``(1 - eta) u + eta * Delta``)."""
    out = []
    for c in contributions:
        utility = None
        if rule == "utility":
            known = utilities or {}
            utility = sum((1 - eta) * known.get(e, 0.0) + eta * c.delta for e in c.entry_ids) / max(len(c.entry_ids), 1)
        out.append(GroupContribution(**(c.to_dict() | {"credit": credit_of(c.delta, rule, margin, sharpness,
                                                                           utility)})))
    return out


def summary(contributions: list[GroupContribution], n_groups: int) -> dict[str, float]:
    """Per-round statistics: mean Delta, share of groups with Delta > 0, retrieval hit rate."""
    n = len(contributions)
    return {
        "delta_mean": sum(c.delta for c in contributions) / n if n else 0.0,
        "delta_positive_share": sum(c.delta > 0 for c in contributions) / n if n else 0.0,
        "credit_mean": sum(c.credit for c in contributions) / n if n else 0.0,
        "retrieval_hit_rate": n / n_groups if n_groups else 0.0,
    }


def scaffold_lead(groups: list[dict]) -> float | None:
    """The scaffold's lead in one round: the share of the conditioned members' mean success that the
    plain members' did not reach, max(q - p, 0) / q, over the groups that retrieved (``scores.json``'s
    ``groups``); None where no group retrieved or no conditioned member succeeded."""
    if not groups:
        return None
    q = sum(g["success_conditioned"] for g in groups) / len(groups)
    p = sum(g["success_plain"] for g in groups) / len(groups)
    return max(q - p, 0.0) / q if q > 0 else None


def scheduled_rho(rho: float, rho_min: float, leads: list[float | None]) -> float:
    """``bank.rho_schedule: withdraw``: rho_min + (rho - rho_min) * min(1, L_last / L_first), where the leads
    are those of the rounds so far (``scaffold_lead``; None where not measured). Until a lead has been
    measured, or if the first was 0, the scaffold stays at rho."""
    measured = [lead for lead in leads if lead is not None]
    if not measured or measured[0] <= 0:
        return rho
    return rho_min + (rho - rho_min) * min(1.0, measured[-1] / measured[0])


def conditioned_pg_filter(samples: list, trajectories: list[Trajectory], contributions: list[GroupContribution],
                          which: str) -> list:
    """The policy-gradient samples kept under ``bank.conditioned_pg``: ``all``; ``helpful``, a
    conditioned member's steps only where its group's Delta > 0; ``none``, no conditioned member's
    steps. Plain members' samples are always kept (their advantages stay those of the whole group)."""
    if which not in ("helpful", "none"):  # all, or in the plain context (``distill.in_plain_context``)
        return samples
    helped = {c.group_id for c in contributions if c.delta > 0} if which == "helpful" else set()
    dropped = {t.traj_id for t in trajectories if t.conditioned and t.group_id not in helped}
    return [s for s in samples if s.key[0] not in dropped]
