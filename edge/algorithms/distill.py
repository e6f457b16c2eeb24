"""Reverse-KL distillation of the experience-conditioned teacher into the plain student.

    L_distill = sum_s w_s g(x_s) KL( pi_theta(.|s) || pi_T(.|s, E(x_s)) ) / sum_s' w_s'

The student is the plain policy (no experience block) on state ``s``; the teacher is a network with
E(x) in its prompt, evaluated once before the update and frozen (stop-gradient). Reverse KL is
mode-seeking: it only reshapes mass on actions the student takes. Which states, which groups and
which teacher are options (``DistillConfig``; the spec says what each default rests on):

- ``states``: ``plain`` (the spec): every step of the plain members' trajectories, the student's
  own states; ``conditioned``: the conditioned members' states with the experience removed, the
  states the scaffold led to, which the plain student may never reach on its own; ``both``.
- ``gate``: ``credit`` (the spec): groups with c(x) = max(Delta(x), 0) > 0, weighted g = c(x);
  ``retrieved``: every group that retrieved, weighted g = 1 (for guidance known to help, like the
  oracle's, where Delta is mostly sampling noise).
- ``teacher``: ``current``, the weights that collected the rollouts (the spec); ``base``, the run's
  starting checkpoint, fixed for the whole run (OEL keeps its teacher fixed), so that what the
  policy learns about the experience block cannot move the target.
- ``guidance_scale`` (alpha): the teacher's log-probabilities are those of the plain context moved
  alpha times as far as the experience moves them, ``log_softmax(l_plain + alpha (l_advised - l_plain))``
  over the admissible actions, both at the teacher's weights (classifier-free guidance, or context-aware
  decoding, applied to the distillation target). Where the block changes nothing the target is the
  plain policy's own; where it does, the target follows the advice more than the network does with the
  advice in its prompt. 1 (the spec): the advised outputs themselves.
- ``divergence``: ``reverse`` (the spec), KL(student || teacher); ``forward``, KL(teacher || student)
  on the same states. Their gradients differ where it matters here: on a logit z_a the reverse KL's is
  ``p_S(a) (log p_S(a) - log p_T(a) - KL)``, which is small on an action the student rarely takes however
  much the teacher favours it (an advised place the plain policy neglects); the forward KL's is
  ``p_S(a) - p_T(a)``, which raises such an action by as much as the teacher favours it.
- ``extra_epochs``: more optimizer steps on the distillation term alone after the shared update
  (``distill_only_update``), towards the same frozen teacher: an extra budget, declared as such.
- ``anchor``: the student and the teacher are one network, so pulling the plain context towards the
  advised one also moves the advised one, and over rounds the two meet in the middle (a stronger
  lambda_d lowered the success *with* the advice as much as it raised retention). The anchor adds
  ``anchor * g(x) * KL(pi_T(.|s,E) || pi_theta(.|s,E))`` on the same states: the live weights' advised
  outputs are held at the round's teacher while the plain ones move towards it (forward KL, so the
  advised context keeps the mass on every action the teacher favoured).

The distillation term rides on the policy-gradient samples of the same states (``attach``): a plain
state that carries both terms is one sample, so EDGE takes the same optimizer steps on the same
minibatches as GRPO, and both terms are averaged with the update's unit weights ``w_s`` over the
same minibatch (``grpo.policy_update``). A conditioned member's state seen without the experience is
another prompt than its PG sample, so it joins as a distillation-only sample. In generate mode the
sampled KL has one unit per token, weighted like the PG term's tokens.

Two estimators:
- ``sampled``: on the action the student sampled, ``log pi_theta(a|s) - log pi_T(a|s,E)``, whose
  gradient is the policy-gradient form with per-unit advantage ``-(log pi_theta - log pi_T)``.
  Works in both action modes (per token in generate mode); only on the student's own states.
- ``exact`` (score mode): the sum over the admissible actions,
  ``sum_a pi_theta(a|s) (log pi_theta(a|s) - log pi_T(a|s,E))``.
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from typing import Literal

import torch

from edge.algorithms.contribution import GroupContribution
from edge.algorithms.grpo import Sample, Shard, UpdateConfig, policy_update, using_reference
from edge.guidance import block_after
from edge.policy.actor import Actor
from edge.rollout import Trajectory

Estimator = Literal["sampled", "exact"]
States = Literal["plain", "conditioned", "both"]
Gate = Literal["credit", "retrieved"]
Teacher = Literal["current", "base"]
Divergence = Literal["reverse", "forward"]


def reverse_kl_exact(student_logp: torch.Tensor, teacher_logp: torch.Tensor) -> torch.Tensor:
    """KL(student || teacher) over a finite action set, from log-probabilities."""
    return (student_logp.exp() * (student_logp - teacher_logp)).sum()


def forward_kl_exact(student_logp: torch.Tensor, teacher_logp: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) over a finite action set, from log-probabilities (mass-covering: the
    teacher's mass on an action the student lacks costs most)."""
    return (teacher_logp.exp() * (teacher_logp - student_logp)).sum()


def reverse_kl_sampled_loss(student_logp: torch.Tensor, teacher_logp: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(surrogate whose gradient is the sampled reverse-KL gradient, the KL estimate itself).

    The surrogate is ``-A * log pi_theta`` with ``A = -(log pi_theta - log pi_T)`` held constant."""
    advantage = -(student_logp.detach() - teacher_logp)
    return (-advantage * student_logp).sum(), float((student_logp.detach() - teacher_logp).sum())


def experience_blocks(trajectories: list[Trajectory]) -> dict[str, str]:
    """The experience block each group's conditioned members saw, by group id (groups that retrieved)."""
    return {t.group_id: t.experience.text for t in trajectories if t.conditioned and t.experience is not None}


def teacher_block(traj: Trajectory, index: int, group_block: str, follow_progress: bool,
                  trim: bool = False) -> str | None:
    """The block the teacher sees at step ``index`` of ``traj``: a conditioned member's own (what its
    prompt had; rollouts written before steps recorded it have the group's), a plain member's group's
    block; with ``follow_progress``, the plain member's without the stages its actions so far completed,
    and the conditioned member's as recorded even where it was none (None: nothing to distil there).
    ``trim`` (``distill.teacher_follows_progress``): both members' without the completed stages, also
    where the rollouts showed the block whole."""
    if traj.conditioned:
        recorded = traj.steps[index].experience
        if follow_progress:
            return recorded
        block = recorded or group_block
    else:
        block = group_block
        trim = trim or follow_progress
    return block_after(block, traj.task, [s.decision.action for s in traj.steps[:index]]) if trim else block


def scheduled_coef(coef: float, decay_rounds: int | None, k: int) -> float:
    """lambda_d in round ``k``: ``coef``, or with ``distill.coef_decay_rounds`` D, coef * max(0, 1 - k / D)."""
    return coef if decay_rounds is None else coef * max(0.0, 1.0 - k / decay_rounds)


def group_weights(contributions: list[GroupContribution], gate: Gate) -> dict[str, float]:
    """The weight g(x) of each group whose states are distilled (groups not listed are not)."""
    if gate == "credit":
        return {c.group_id: c.credit for c in contributions if c.credit > 0}
    return {c.group_id: 1.0 for c in contributions}


def distills_member(conditioned: bool, states: States) -> bool:
    """Whether ``distill.states`` draws on a member that was (``conditioned``) or was not shown the block:
    ``plain`` the plain members' own states, ``conditioned`` the conditioned members' (block removed), ``both``."""
    return states == "both" or states == ("conditioned" if conditioned else "plain")


def distill_samples(actor: Actor, trajectories: list[Trajectory], contributions: list[GroupContribution],
                    estimator: Estimator, states: States = "plain", gate: Gate = "credit",
                    teacher: Teacher = "current", keep_teacher_prompt: bool = False,
                    follow_progress: bool = False, guidance_scale: float = 1.0,
                    teacher_follows_progress: bool = False) -> list[Sample]:
    """The distillation samples of a round: one per distilled state, as the plain student sees it,
    with the group's weight (``extras["credit"]``) and the frozen teacher's log-probabilities
    (``extras["teacher"]``) attached; with ``keep_teacher_prompt`` also the teacher's prompt
    (``extras["teacher_prompt"]``, the state with the block: the anchor evaluates the live weights on it).
    With ``follow_progress`` (``bank.block_follows_progress``) the teacher sees the block as the episode
    was or would have been shown it at each state (``teacher_block``), and a state with none left gives
    no sample; ``teacher_follows_progress`` (``distill.teacher_follows_progress``) does so for the teacher
    alone, the rollouts having shown the block whole. With ``guidance_scale`` alpha != 1 the teacher is the
    amplified target (module docstring) and the advised outputs themselves, which the anchor holds, are kept
    as ``extras["advised"]``."""
    if guidance_scale != 1.0 and estimator != "exact":
        raise ValueError(f"distill.guidance_scale {guidance_scale} amplifies the teacher's distribution over the "
                         "admissible actions, which needs distill.estimator 'exact'")
    if estimator == "exact" and actor.cfg.mode != "score":
        raise ValueError("distill.estimator 'exact' needs policy.mode 'score' (a finite action set)")
    if keep_teacher_prompt and estimator != "exact":
        raise ValueError("the teacher's prompt is kept for distill.anchor, which needs distill.estimator 'exact'")
    if estimator == "sampled" and states != "plain":
        raise ValueError(f"distill.states {states!r} needs distill.estimator 'exact': on a conditioned member's "
                         "states the action was sampled by the teacher, not the student, so the sampled "
                         "reverse-KL estimate does not apply")
    weights = group_weights(contributions, gate)
    block = experience_blocks(trajectories)
    samples, teacher_prompts = [], []
    for traj in trajectories:
        g = weights.get(traj.group_id)
        if g is None or traj.group_id not in block or not distills_member(traj.conditioned, states):
            continue
        if not traj.conditioned:
            # The student's own state: the same prompt as its PG sample, so both terms share one sample.
            for i, step in enumerate(traj.steps):
                d = step.decision
                if d.candidate_ids is None and not d.response_ids:
                    continue
                shown = teacher_block(traj, i, block[traj.group_id], follow_progress, teacher_follows_progress)
                if shown is None:
                    continue
                samples.append(Sample(d.prompt_ids, d.candidate_ids, d.chosen, d.response_ids, list(d.logp), 0.0,
                                      len(traj.steps), pg=False, extras={"credit": g}, key=(traj.traj_id, i)))
                teacher_prompts.append(actor.builder.prompt_ids(traj.state_at(i, shown)))
        else:
            # The state the scaffold led to, shown to the student without the block (its own key: the
            # PG sample of this step is the conditioned prompt). The teacher sees the block it acted on.
            for i, step in enumerate(traj.steps):
                d = step.decision
                shown = teacher_block(traj, i, block[traj.group_id], follow_progress, teacher_follows_progress)
                if d.candidate_ids is None or shown is None:
                    continue
                samples.append(Sample(actor.builder.prompt_ids(traj.state_at(i)), d.candidate_ids, d.chosen, None,
                                      [0.0], 0.0, len(traj.steps), pg=False, extras={"credit": g},
                                      key=(traj.traj_id + WITHOUT_EXPERIENCE, i)))
                teacher_prompts.append(actor.builder.prompt_ids(traj.state_at(i, shown)))
    with torch.inference_mode(), (using_reference(actor) if teacher == "base" else nullcontext()):
        if actor.cfg.mode == "score":
            logps = actor.action_logprobs(teacher_prompts, [s.candidate_ids for s in samples]) if samples else []
            if guidance_scale != 1.0 and samples:
                # The same weights on the student's prompts: the plain outputs the advice's shift starts from.
                plain = actor.action_logprobs([s.prompt_ids for s in samples], [s.candidate_ids for s in samples])
                for s, advised in zip(samples, logps):
                    s.extras["advised"] = advised.tolist()
                logps = [torch.log_softmax(p + guidance_scale * (advised - p), dim=-1)
                         for advised, p in zip(logps, plain)]
            for s, t in zip(samples, logps):
                s.extras["teacher"] = t.tolist() if estimator == "exact" else [float(t[s.chosen])]
            if keep_teacher_prompt:
                for s, prompt in zip(samples, teacher_prompts):
                    s.extras["teacher_prompt"] = prompt
        else:
            logps = actor.token_logprobs(teacher_prompts, [s.response_ids for s in samples]) if samples else []
            for s, t in zip(samples, logps):
                s.extras["teacher"] = t.tolist()
    return samples


def advice_shift(actor: Actor, trajectories: list[Trajectory], follow_progress: bool = False) -> float | None:
    """How much the experience block moves the policy, on the same states: the mean over the plain
    members' states of groups that retrieved of KL(pi(.|s) || pi(.|s, E)), at the current weights
    (score mode; None otherwise or when nothing retrieved). It falls towards zero when the policy
    learns to ignore the block, and when the plain policy has learned what the block says. With
    ``follow_progress``, the block each state would have been shown, and only states shown one."""
    if actor.cfg.mode != "score":
        return None
    block = experience_blocks(trajectories)
    plain_prompts, advised_prompts, candidates = [], [], []
    for traj in trajectories:
        if traj.conditioned or traj.group_id not in block:
            continue
        for i, step in enumerate(traj.steps):
            if step.decision.candidate_ids is None:
                continue
            shown = teacher_block(traj, i, block[traj.group_id], follow_progress)
            if shown is None:
                continue
            plain_prompts.append(step.decision.prompt_ids)
            advised_prompts.append(actor.builder.prompt_ids(traj.state_at(i, shown)))
            candidates.append(step.decision.candidate_ids)
    if not candidates:
        return None
    with torch.inference_mode():
        plain = actor.action_logprobs(plain_prompts, candidates)
        advised = actor.action_logprobs(advised_prompts, candidates)
    return float(sum(reverse_kl_exact(p, a) for p, a in zip(plain, advised)) / len(candidates))


WITHOUT_EXPERIENCE = "/without-experience"
"""Key suffix of a conditioned member's state shown without its experience block."""


def in_plain_context(actor: Actor, samples: list[Sample], trajectories: list[Trajectory],
                     keep_own: bool) -> list[Sample]:
    """``bank.conditioned_pg: plain / own-and-plain``: the conditioned members' PG samples again with
    the experience block removed from the prompt (EMPO²-style internalization: what the scaffold led
    to is reinforced in the context the plain policy acts in). Their old log-probabilities are
    recomputed in that context at the collecting weights, so the PPO ratio starts at 1 and clipping
    bounds how far the plain policy moves; the advantage stays the trajectory's. ``keep_own``: keep
    the samples in their own context too. Each copy has the key ``<traj_id>/without-experience``, so a
    distillation state of the same step (``states: conditioned``) rides on it."""
    by_id = {t.traj_id: t for t in trajectories if t.conditioned}
    own, copies = [], []
    for s in samples:
        traj = by_id.get(s.key[0])
        if traj is None:
            own.append(s)
            continue
        if keep_own:
            own.append(s)
        prompt = actor.builder.prompt_ids(traj.state_at(s.key[1]))
        copies.append(Sample(prompt, s.candidate_ids, s.chosen, s.response_ids, [], s.advantage, s.episode_length,
                             key=(s.key[0] + WITHOUT_EXPERIENCE, s.key[1])))
    if not copies:
        return own
    prompts = [c.prompt_ids for c in copies]
    with torch.inference_mode():
        if actor.cfg.mode == "score":
            for c, lp in zip(copies, actor.action_logprobs(prompts, [c.candidate_ids for c in copies])):
                c.old_logp = [float(lp[c.chosen])]
        else:
            for c, lp in zip(copies, actor.token_logprobs(prompts, [c.response_ids for c in copies])):
                c.old_logp = lp.tolist()
    return own + copies


def attach(pg_samples: list[Sample], distill: list[Sample]) -> tuple[list[Sample], int]:
    """One sample per state: a distillation state that is also a PG sample carries both terms on that
    sample; the others (states whose PG advantage is zero, conditioned members' states seen without
    the experience) join as distillation-only samples. Returns the update's samples and how many are
    distillation-only."""
    by_key = {s.key: s for s in pg_samples}
    only = []
    for d in distill:
        twin = by_key.get(d.key)
        if twin is None:
            only.append(d)
        else:
            twin.extras |= d.extras
    return pg_samples + only, len(only)


def replayed(samples: list[Sample], round_index: int) -> list[Sample]:
    """Round ``round_index``'s distillation samples made again in a later round (``distill.replay_rounds``):
    their keys name the round, since a task drawn again later has the same trajectory ids, so that none is
    attached to a PG sample of the later round; each joins as a distillation-only sample."""
    return [dataclasses.replace(s, key=(f"r{round_index}/{s.key[0]}", s.key[1])) for s in samples]


def distill_only_update(actor: Actor, optimizer: torch.optim.Optimizer, samples: list[Sample], cfg: UpdateConfig,
                        epochs: int, generator: torch.Generator, extra_loss, shard: Shard | None = None,
                        lr_scale: float = 1.0) -> dict[str, float]:
    """``distill.extra_epochs``: ``epochs x cfg.minibatches`` more optimizer steps, after the round's
    update, on the samples that carry the teacher, with the distillation loss ``extra_loss`` (and its
    anchor) alone: each joins as a copy that carries no PG term, so the update's own samples are
    untouched, and every sample of a minibatch carries the term, so it is averaged over distilled states
    only. ``lr_scale`` (``distill.extra_lr_scale``) multiplies the optimizer's learning rate for these
    steps only; it is restored after, so the next round's update is GRPO's. Returns ``policy_update``'s
    metrics (its ``optimizer_steps`` are these extra steps)."""
    distilled = [dataclasses.replace(s, pg=False) for s in samples if "teacher" in s.extras]
    if not distilled:
        return {"optimizer_steps": 0}
    # Adam's steps are about lr long whatever the gradient's scale, so the learning rate, not the loss
    # weight, is what bounds how far the extra steps move the weights.
    lrs = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * lr_scale
    try:
        return policy_update(actor, optimizer, distilled, dataclasses.replace(cfg, epochs=epochs), generator,
                             extra_loss, None, shard)
    finally:
        for group, lr in zip(optimizer.param_groups, lrs):
            group["lr"] = lr


def teacher_anchor_kl(teacher_logp: torch.Tensor, live_logp: torch.Tensor) -> torch.Tensor:
    """KL(teacher || live) over a finite action set: how far the live weights' advised outputs have
    moved from the round's teacher (forward KL: mass the teacher put on an action and the live weights
    took away costs most)."""
    return forward_kl_exact(live_logp, teacher_logp)


def make_distill_loss(coef: float, estimator: Estimator, anchor: float = 0.0, actor: Actor | None = None,
                      divergence: Divergence = "reverse"):
    """The ``extra_loss`` hook for ``policy_update``: coef * g(x) * D on every state that carries the
    teacher, with the update's normalised unit weights (the same as the PG term's), D the ``divergence``
    (``distill.divergence``: reverse KL, the spec, or forward KL, which needs the exact estimator). The
    reported ``distill_kl`` is the reverse KL whichever is trained, so that rows compare on one measure of
    the gap. With ``anchor > 0`` (``distill.anchor``; needs the exact estimator, the samples'
    ``teacher_prompt`` and ``actor``, whose live weights are being updated) also anchor * g(x) *
    KL(teacher || live) in the advised context."""
    if anchor > 0 and (estimator != "exact" or actor is None):
        raise ValueError("distill.anchor needs distill.estimator 'exact' and the live actor")
    if divergence == "forward" and estimator != "exact":
        raise ValueError("distill.divergence 'forward' sums over the admissible actions, which needs "
                         "distill.estimator 'exact'")

    def extra_loss(chunk, units, full, weights):
        device = units[0].device if units else torch.device("cpu")
        loss = torch.zeros((), device=device)
        stats = {"distill_loss": 0.0, "distill_kl": 0.0, "distill_weight": 0.0}
        if anchor > 0:
            stats["anchor_kl"] = 0.0
            anchored = [i for i, s in enumerate(chunk) if "teacher_prompt" in s.extras]
            if anchored:
                # One forward pass, with grad, of the live weights on the advised prompts of the chunk.
                live = actor.action_logprobs([chunk[i].extras["teacher_prompt"] for i in anchored],
                                             [chunk[i].candidate_ids for i in anchored])
                for i, live_logp in zip(anchored, live):
                    s = chunk[i]
                    # The advised outputs as the round's weights gave them (the teacher itself unless amplified).
                    held = s.extras.get("advised", s.extras["teacher"])
                    drift = teacher_anchor_kl(torch.tensor(held, device=device), live_logp)
                    loss = loss + anchor * s.extras["credit"] * weights[i] * drift
                    # Per anchored state, weighted like distill_kl (divided by distill_weight at the end).
                    stats["anchor_kl"] += weights[i] * float(drift.detach())
        for i, s in enumerate(chunk):
            if "teacher" not in s.extras:
                continue
            teacher = torch.tensor(s.extras["teacher"], device=device)
            if estimator == "exact":
                kl = reverse_kl_exact(full[i], teacher)
                surrogate = kl if divergence == "reverse" else forward_kl_exact(full[i], teacher)
                value, trained = float(kl.detach()), float(surrogate.detach())
            else:
                surrogate, value = reverse_kl_sampled_loss(units[i], teacher)
                trained = value
            w = weights[i]
            loss = loss + coef * s.extras["credit"] * w * surrogate
            stats["distill_loss"] += coef * s.extras["credit"] * w * trained
            # Reverse KL per distilled state, averaged with the same weights: kl_sum / weight at the end.
            stats["distill_kl"] += w * value
            stats["distill_weight"] += w * s.n_units
        return loss, stats

    return extra_loss
