"""GRPO for multi-turn agents, written to match ``docs/EDGE-SPEC.md`` formula by formula.

- Group-normalised advantage: ``A_i = (R_i - mean_G R) / (std_G R + eps)``; with
  ``std_normalize: false`` no division (Dr.GRPO).
- PPO-clip with separate low/high clip (DAPO's clip-higher):
  ``-min(r*A, clip(r, 1-eps_low, 1+eps_high)*A)``, ``r = exp(logp - logp_old)`` on action units.
- k3 KL to a frozen reference: ``exp(q-p) - (q-p) - 1`` with ``p = logp``, ``q = logp_ref``.

A *unit* is what a log-probability is attached to: one action in score mode (the policy is a
distribution over admissible actions), one token in generate mode. Every step of a trajectory is a
sample whose advantage is its episode's. How units are averaged is ``loss_agg``: ``token-mean``
(every unit equal), ``step-mean`` (every step equal), ``episode-mean`` (every episode equal,
whatever its length: long failing episodes do not drown short successes).

The budget is fixed per round, not per sample: the round's samples are split into
``minibatches`` nearly equal minibatches per epoch, so every method takes ``epochs x minibatches``
optimizer steps on its ``N x G`` episodes whatever the episodes' lengths. Another objective
(EDGE's distillation) rides on the same samples and is weighted and normalised like the PG term
(see ``policy_update``), so it neither adds optimizer steps nor dilutes the PG minibatches (the one
declared exception: ``distill.extra_epochs``, extra steps of distillation alone after the update).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import torch

from edge.policy.actor import Actor
from edge.rollout import Trajectory

LossAggregation = Literal["token-mean", "step-mean", "episode-mean"]


# ----- the formulas ---------------------------------------------------------------------------
def group_advantages(rewards: torch.Tensor, std_normalize: bool = True, eps: float = 1e-6,
                     baseline_members: torch.Tensor | None = None) -> torch.Tensor:
    """Advantages of one group's rewards (population std, as GRPO implementations use), centred on the
    mean of ``baseline_members`` (a boolean mask; None: every member)."""
    centred = rewards - (rewards.mean() if baseline_members is None else rewards[baseline_members].mean())
    if std_normalize:
        return centred / (rewards.std(unbiased=False) + eps)
    return centred


def plain_baseline_advantages(rewards: torch.Tensor, conditioned: list[bool], std_normalize: bool = True,
                              eps: float = 1e-6) -> torch.Tensor:
    """``bank.advantage_baseline: plain``: every member's reward against the mean of the group's plain
    members, the plain policy's own value on the task, scaled as GRPO scales (the whole group's std).
    A conditioned member then scores by how far it beat what the plain policy does there, and plain
    members read GRPO's baseline, not one raised by the advised members' wins. A group with no plain
    member or no conditioned one gets ``group_advantages``."""
    plain = torch.tensor([not c for c in conditioned])
    split = bool(plain.any()) and not bool(plain.all())
    return group_advantages(rewards, std_normalize, eps, baseline_members=plain if split else None)


def ppo_clip_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantage: torch.Tensor,
                  clip_low: float, clip_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-unit PPO-clip loss and whether each unit was clipped."""
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantage
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantage
    return -torch.minimum(unclipped, clipped), (clipped < unclipped)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per unit: unbiased, always >= 0."""
    log_ratio = ref_logp - logp
    return torch.exp(log_ratio) - log_ratio - 1


def unit_weights(n_units: int, episode_length: int, mode: LossAggregation) -> float:
    """Weight of each unit of a sample before normalising over the batch."""
    if mode == "token-mean":
        return 1.0
    if mode == "step-mean":
        return 1.0 / n_units
    return 1.0 / (n_units * episode_length)


# ----- samples ---------------------------------------------------------------------------------
@dataclass
class Sample:
    """One step, ready for the update."""

    prompt_ids: list[int]
    candidate_ids: list[list[int]] | None
    chosen: int
    response_ids: list[int] | None
    old_logp: list[float]
    advantage: float
    episode_length: int
    ref_logp: list[float] | None = None
    pg: bool = True
    """Takes part in the policy-gradient term (False: only another objective uses it)."""
    extras: dict = field(default_factory=dict)
    """Room for other objectives' per-sample data (EDGE's distillation)."""
    key: tuple[str, int] = ("", -1)
    """(trajectory id, step index): which state this is, so other objectives can attach to it."""

    @property
    def n_units(self) -> int:
        return len(self.old_logp)

    @property
    def n_tokens(self) -> int:
        """Length of the sample's row in a forward pass."""
        answer = self.candidate_ids if self.candidate_ids is not None else [self.response_ids or []]
        return len(self.prompt_ids) + sum(map(len, answer))


def grpo_samples(trajectories: list[Trajectory], std_normalize: bool = True, eps: float = 1e-6,
                 drop_zero_advantage: bool = True, baseline: Literal["group", "plain"] = "group",
                 ) -> tuple[list[Sample], dict[str, float]]:
    """Group advantages over each group (conditioned members included, in their own context), then
    one sample per step. Steps of groups whose rewards are all equal carry no gradient signal and are
    dropped unless asked otherwise. ``baseline``: ``group``, the whole group's mean (the spec);
    ``plain``, the plain members' mean (``plain_baseline_advantages``)."""
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        groups.setdefault(t.group_id, []).append(t)
    samples, informative = [], 0
    for group in groups.values():
        rewards = torch.tensor([t.reward for t in group], dtype=torch.float64)
        if baseline == "plain":
            advantages = plain_baseline_advantages(rewards, [t.conditioned for t in group], std_normalize, eps)
        else:
            advantages = group_advantages(rewards, std_normalize, eps)
        informative += bool(rewards.max() > rewards.min())
        for traj, adv in zip(group, advantages.tolist()):
            if drop_zero_advantage and abs(adv) < 1e-12:
                continue
            for i, step in enumerate(traj.steps):
                d = step.decision
                if d.candidate_ids is None and not d.response_ids:
                    continue
                samples.append(Sample(d.prompt_ids, d.candidate_ids, d.chosen, d.response_ids, list(d.logp), adv,
                                      len(traj.steps), key=(traj.traj_id, i)))
    stats = {"groups": len(groups), "informative_group_share": informative / max(len(groups), 1)}
    return samples, stats


# ----- the update ------------------------------------------------------------------------------
def sample_logprobs(actor: Actor, samples: list[Sample], full: bool = False):
    """Current per-unit log-probabilities of each sample's action (with grad if enabled).

    With ``full=True`` also returns, in score mode, each state's whole log-distribution over its
    candidates (the exact distillation loss needs it); None in generate mode."""
    if actor.cfg.mode == "score":
        logps = actor.action_logprobs([s.prompt_ids for s in samples], [s.candidate_ids for s in samples])
        units = [lp[s.chosen:s.chosen + 1] for lp, s in zip(logps, samples)]
        return (units, logps) if full else units
    units = actor.token_logprobs([s.prompt_ids for s in samples], [s.response_ids for s in samples])
    return (units, None) if full else units


@dataclass
class UpdateConfig:
    lr: float
    epochs: int
    minibatches: int
    """Optimizer steps per epoch: the samples are split into this many nearly equal minibatches."""
    clip_low: float
    clip_high: float
    beta: float
    loss_agg: LossAggregation
    max_grad_norm: float


@contextmanager
def using_reference(actor: Actor):
    """Within this block ``actor`` computes with the frozen reference (``Policy.reference``: the
    warm-started base) instead of the live weights."""
    with actor.policy.reference() as ref_model:
        live = actor.backbone, actor.lm_head
        actor.backbone, actor.lm_head = ref_model.get_decoder(), ref_model.get_output_embeddings()
        try:
            yield actor
        finally:
            actor.backbone, actor.lm_head = live


def fill_reference_logprobs(actor: Actor, samples: list[Sample]) -> None:
    with using_reference(actor), torch.inference_mode():
        for start in range(0, len(samples), actor.cfg.micro_batch_size):
            chunk = samples[start:start + actor.cfg.micro_batch_size]
            for s, lp in zip(chunk, sample_logprobs(actor, chunk)):
                s.ref_logp = lp.tolist()


def minibatch_bounds(n_samples: int, minibatches: int) -> list[tuple[int, int]]:
    """``minibatches`` nearly equal, non-empty slices of ``range(n_samples)`` (fewer when there are
    fewer samples than minibatches)."""
    parts = min(minibatches, n_samples)
    cuts = [i * n_samples // parts for i in range(parts + 1)] if parts else [0]
    return list(zip(cuts[:-1], cuts[1:]))


@dataclass
class Shard:
    """This process's part of a multi-process update (``accelerate launch``, see ``edge/distributed.py``).

    Every process holds all the round's samples and the same weights. Of each minibatch, process
    ``rank`` takes every ``world``-th sample (the batch is sorted by length, so the shards are about
    equally long); its gradient, weighted by the *whole* minibatch's normaliser, is summed over the
    processes by ``reduce_sum``, so each process clips and steps with the one-process gradient (up to
    the order of float additions) and the weights stay identical everywhere."""

    rank: int
    world: int
    reduce_sum: Callable[[torch.Tensor], torch.Tensor]
    """Sum of a tensor over the processes (every process gets it)."""

    def take(self, batch: list) -> list:
        return batch[self.rank::self.world]

    def sum_gradients(self, parameters: list[torch.nn.Parameter]) -> None:
        """Replace each gradient by its sum over the processes, as one flat buffer (one collective).
        A process whose shard had no gradient contributes zeros; if none had one, gradients stay
        None, as in a one-process minibatch with nothing to learn (the optimizer then skips them)."""
        had = self.reduce_sum(torch.tensor([float(any(p.grad is not None for p in parameters))]))
        if float(had) == 0:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
        flat = self.reduce_sum(torch.cat([g.reshape(-1) for g in grads]))
        for p, part in zip(parameters, flat.split([g.numel() for g in grads])):
            p.grad = part.view_as(p).clone()

    def sum_stats(self, stats: dict[str, float]) -> dict[str, float]:
        keys = sorted(stats)
        total = self.reduce_sum(torch.tensor([stats[k] for k in keys], dtype=torch.float64))
        return dict(zip(keys, total.tolist()))


def policy_update(actor: Actor, optimizer: torch.optim.Optimizer, samples: list[Sample], cfg: UpdateConfig,
                  generator: torch.Generator, extra_loss=None, extra_carries=None,
                  shard: Shard | None = None) -> dict[str, float]:
    """Epochs x minibatches of PPO-clip (+ beta * k3) over ``samples``; returns mean metrics, with
    ``optimizer_steps`` the number of steps taken.

    Every unit of a sample has the weight ``unit_weights(...)`` normalised over *all* units of the
    minibatch (those of samples that carry only another objective included), so the PG term and
    another objective are averages over the same states with the same weights.
    ``extra_loss(chunk, unit_logps, full_logps, weights) -> (loss tensor, metrics)`` adds another
    objective (EDGE's distillation) to the same backward pass; ``weights[i]`` is the normalised weight
    of each unit of ``chunk[i]``, so micro-batching does not change the gradient.

    ``extra_carries(sample) -> bool`` (optional) normalises the two terms separately instead: the PG
    term over the units of the minibatch's PG samples only (exactly GRPO's average, however many
    samples carry only the other objective) and the other objective's weights over the units of the
    samples it says it carries (``lambda s: s.pg``: both terms over the PG samples' units, so a sample that
    carries only the other objective adds to it at a PG sample's weight without diluting the PG term).

    ``shard`` (optional): this process's part of a multi-process update (``Shard``).
    """
    model = actor.policy.model
    model.train()
    pg_samples = [s for s in samples if s.pg]
    if cfg.beta > 0 and pg_samples and pg_samples[0].ref_logp is None:
        fill_reference_logprobs(actor, pg_samples)
    totals: dict[str, float] = {}
    counts = 0

    def units_weight(kept) -> float:
        """The summed unit weight of ``kept``: a term's normaliser over its minibatch."""
        return sum(unit_weights(s.n_units, s.episode_length, cfg.loss_agg) * s.n_units for s in kept) or 1.0

    micro = actor.cfg.micro_batch_size
    for _ in range(cfg.epochs):
        order = torch.randperm(len(samples), generator=generator).tolist()
        for start, stop in minibatch_bounds(len(order), cfg.minibatches):
            # Sorted by length, micro-batches pad less; the minibatch's gradient is the same sum.
            batch = sorted((samples[i] for i in order[start:stop]), key=lambda s: s.n_tokens)
            if extra_carries is None:
                weight_sum = extra_sum = units_weight(batch)
            else:
                weight_sum = units_weight([s for s in batch if s.pg])
                # A minibatch with none of the samples the other objective is averaged over (a round that only
                # replays earlier states, under ``extra_carries = pg``) averages it over its own.
                extra_sum = units_weight([s for s in batch if extra_carries(s)] or batch)
            optimizer.zero_grad(set_to_none=True)
            stats = {"pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "approx_kl": 0.0}
            mine = batch if shard is None else shard.take(batch)
            if not mine and extra_loss is not None:
                # Every process reports the same metrics, also one whose shard of this minibatch is empty.
                for k, v in extra_loss([], [], [], [])[1].items():
                    stats[k] = stats.get(k, 0.0) + v
            for m in range(0, len(mine), micro):
                chunk = mine[m:m + micro]
                units, full = sample_logprobs(actor, chunk, full=True)
                raw = [unit_weights(s.n_units, s.episode_length, cfg.loss_agg) for s in chunk]
                weights = [w / weight_sum for w in raw]
                loss = torch.zeros((), device=actor.policy.device)
                for s, lp, w in zip(chunk, units, weights):
                    if not s.pg:
                        continue
                    old = torch.tensor(s.old_logp, device=lp.device)
                    pg, clipped = ppo_clip_loss(lp, old, torch.tensor(s.advantage, device=lp.device),
                                                cfg.clip_low, cfg.clip_high)
                    loss = loss + w * pg.sum()
                    stats["pg_loss"] += w * float(pg.detach().sum())
                    stats["clip_frac"] += w * float(clipped.float().sum())
                    stats["approx_kl"] += w * float((old - lp.detach()).sum())
                    if cfg.beta > 0:
                        kl = k3_kl(lp, torch.tensor(s.ref_logp, device=lp.device))
                        loss = loss + cfg.beta * w * kl.sum()
                        stats["kl"] += w * float(kl.detach().sum())
                if extra_loss is not None:
                    extra, extra_stats = extra_loss(chunk, units, full, [w / extra_sum for w in raw])
                    loss = loss + extra
                    for k, v in extra_stats.items():
                        stats[k] = stats.get(k, 0.0) + v
                if loss.requires_grad:
                    loss.backward()
            trainable = [p for p in model.parameters() if p.requires_grad]
            if shard is not None:
                shard.sum_gradients(trainable)
                stats = shard.sum_stats(stats)
            grad_norm = torch.nn.utils.clip_grad_norm_(trainable, cfg.max_grad_norm)
            optimizer.step()
            stats["grad_norm"] = float(grad_norm)
            for k, v in stats.items():
                totals[k] = totals.get(k, 0.0) + v
            counts += 1
    model.eval()
    return {k: v / max(counts, 1) for k, v in totals.items()} | {"optimizer_steps": counts}
