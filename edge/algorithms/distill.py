"""Reverse-KL distillation of the experience-conditioned teacher into the plain student.

    L_distill = sum_s w_s c(x_s) KL( pi_theta(.|s) || pi_T(.|s, E(x_s)) ) / sum_s' w_s'

States ``s`` are the student's own: every step of the *plain* trajectories of tasks whose
experience helped (c(x) > 0). The teacher is the same network with E(x) in its prompt, evaluated
once before the update and frozen (stop-gradient). Reverse KL is mode-seeking: it only reshapes
mass on actions the student takes, which is why only helpful guidance is distilled.

The distillation term rides on the policy-gradient samples of the same states (``attach``): a
state that carries both terms is one sample, so EDGE takes the same optimizer steps on the same
minibatches as GRPO, and both terms are averaged with the update's unit weights ``w_s`` over the
same minibatch (``grpo.policy_update``). In generate mode the sampled KL has one unit per token,
weighted like the PG term's tokens.

Two estimators:
- ``sampled``: on the action the student sampled, ``log pi_theta(a|s) - log pi_T(a|s,E)``, whose
  gradient is the policy-gradient form with per-unit advantage ``-(log pi_theta - log pi_T)``.
  Works in both action modes (per token in generate mode).
- ``exact`` (score mode): the sum over the admissible actions,
  ``sum_a pi_theta(a|s) (log pi_theta(a|s) - log pi_T(a|s,E))``.
"""

from __future__ import annotations

from typing import Literal

import torch

from edge.algorithms.contribution import GroupContribution
from edge.algorithms.grpo import Sample
from edge.policy.actor import Actor
from edge.rollout import Trajectory

Estimator = Literal["sampled", "exact"]


def reverse_kl_exact(student_logp: torch.Tensor, teacher_logp: torch.Tensor) -> torch.Tensor:
    """KL(student || teacher) over a finite action set, from log-probabilities."""
    return (student_logp.exp() * (student_logp - teacher_logp)).sum()


def reverse_kl_sampled_loss(student_logp: torch.Tensor, teacher_logp: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(surrogate whose gradient is the sampled reverse-KL gradient, the KL estimate itself).

    The surrogate is ``-A * log pi_theta`` with ``A = -(log pi_theta - log pi_T)`` held constant."""
    advantage = -(student_logp.detach() - teacher_logp)
    return (-advantage * student_logp).sum(), float((student_logp.detach() - teacher_logp).sum())


def distill_samples(actor: Actor, trajectories: list[Trajectory], contributions: list[GroupContribution],
                    estimator: Estimator) -> list[Sample]:
    """One sample per step of the plain trajectories of groups with c(x) > 0, with the frozen
    teacher's log-probabilities attached."""
    if estimator == "exact" and actor.cfg.mode != "score":
        raise ValueError("distill.estimator 'exact' needs policy.mode 'score' (a finite action set)")
    credit = {c.group_id: c for c in contributions if c.credit > 0}
    samples, teacher_prompts = [], []
    for traj in trajectories:
        c = credit.get(traj.group_id)
        if c is None or traj.conditioned:
            continue
        experience = next(t.experience.text for t in trajectories if t.group_id == traj.group_id and t.conditioned)
        for i, step in enumerate(traj.steps):
            d = step.decision
            if d.candidate_ids is None and not d.response_ids:
                continue
            samples.append(Sample(d.prompt_ids, d.candidate_ids, d.chosen, d.response_ids, list(d.logp), 0.0,
                                  len(traj.steps), pg=False, extras={"credit": c.credit}, key=(traj.traj_id, i)))
            teacher_prompts.append(actor.builder.prompt_ids(traj.state_at(i, experience)))
    with torch.inference_mode():
        if actor.cfg.mode == "score":
            teacher = actor.action_logprobs(teacher_prompts, [s.candidate_ids for s in samples])
            for s, t in zip(samples, teacher):
                s.extras["teacher"] = t.tolist() if estimator == "exact" else [float(t[s.chosen])]
        else:
            teacher = actor.token_logprobs(teacher_prompts, [s.response_ids for s in samples])
            for s, t in zip(samples, teacher):
                s.extras["teacher"] = t.tolist()
    return samples


def attach(pg_samples: list[Sample], distill: list[Sample]) -> tuple[list[Sample], int]:
    """One sample per state: a distillation state that is also a PG sample carries both terms on that
    sample; the others (states whose PG advantage is zero) join as distillation-only samples.
    Returns the update's samples and how many are distillation-only."""
    by_key = {s.key: s for s in pg_samples}
    only = []
    for d in distill:
        twin = by_key.get(d.key)
        if twin is None:
            only.append(d)
        else:
            twin.extras |= d.extras
    return pg_samples + only, len(only)


def make_distill_loss(coef: float, estimator: Estimator):
    """The ``extra_loss`` hook for ``policy_update``: coef * c(x) * KL on every state that carries the
    teacher, with the update's normalised unit weights (the same as the PG term's)."""

    def extra_loss(chunk, units, full, weights):
        device = units[0].device if units else torch.device("cpu")
        loss = torch.zeros((), device=device)
        stats = {"distill_loss": 0.0, "distill_kl": 0.0, "distill_weight": 0.0}
        for i, s in enumerate(chunk):
            if "teacher" not in s.extras:
                continue
            teacher = torch.tensor(s.extras["teacher"], device=device)
            if estimator == "exact":
                kl = reverse_kl_exact(full[i], teacher)
                surrogate, value = kl, float(kl.detach())
            else:
                surrogate, value = reverse_kl_sampled_loss(units[i], teacher)
            w = weights[i]
            loss = loss + coef * s.extras["credit"] * w * surrogate
            stats["distill_loss"] += coef * s.extras["credit"] * w * value
            # KL per distilled state, averaged with the same weights: kl_sum / weight at the end.
            stats["distill_kl"] += w * value
            stats["distill_weight"] += w * s.n_units
        return loss, stats

    return extra_loss
