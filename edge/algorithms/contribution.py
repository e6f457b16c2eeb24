"""Marginal contribution of experience, from the rollouts the policy gradient needs anyway.

For a task x whose group was split into conditioned members (saw E(x)) and plain ones:

    Delta(x) = mean_{i in conditioned} R_i - mean_{i in plain} R_i,     c(x) = max(Delta(x), 0)

and every entry g that E(x) contained is credited ``u_g <- (1 - eta) u_g + eta * Delta(x)``,
``n_g <- n_g + 1``. No extra sampling: these are the same trajectories GRPO trains on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

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
    """c(x) = max(Delta(x), 0)."""

    def to_dict(self) -> dict:
        return asdict(self)


def group_contributions(trajectories: list[Trajectory]) -> list[GroupContribution]:
    """One record per group that has both conditioned and plain members; other groups have no Delta."""
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        groups.setdefault(t.group_id, []).append(t)
    out = []
    for gid, members in groups.items():
        cond = [t for t in members if t.conditioned]
        plain = [t for t in members if not t.conditioned]
        if not cond or not plain:
            continue
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


def summary(contributions: list[GroupContribution], n_groups: int) -> dict[str, float]:
    """Per-round statistics: mean Delta, share of groups with Delta > 0, retrieval hit rate."""
    n = len(contributions)
    return {
        "delta_mean": sum(c.delta for c in contributions) / n if n else 0.0,
        "delta_positive_share": sum(c.delta > 0 for c in contributions) / n if n else 0.0,
        "credit_mean": sum(c.credit for c in contributions) / n if n else 0.0,
        "retrieval_hit_rate": n / n_groups if n_groups else 0.0,
    }


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
