"""Warm start: behaviour cloning of the tiny model on scripted demonstrations.

A base policy for RL must be partly competent (so rewards are not all zero) and must *use advice*
in its prompt, as an instruction-tuned LLM would; otherwise a retrieved-experience scaffold carries
no signal. Three kinds of demonstration give it both:

- plain, by an explorer: knows the rules and the goal, not the regularities (household: searches
  receptacles in random order; shop: a careless shopper, see ``edge.envs.shop.agents.Shopper``);
- plain, by a competent agent (household: the expert's plan with random detours it recovers from;
  shop: the careful shopper);
- advised: true advice (``edge.guidance.true_advice``) in the prompt, by a demonstrator that
  follows it (household: searches the advised receptacle kinds first; shop: the careful shopper).
  This is where "advice helps" is learnt.

The loss is either the policy's own, ``-log pi(a|s)`` normalised over the admissible candidates
(``objective: candidates``), or plain supervised fine-tuning on the action's tokens (``sft``), which
raises the same score without packing the other candidates and so costs fewer tokens per state.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import torch
from rich.progress import Progress

from edge.config import EdgeParams, WarmupConfig
from edge.envs.base import Task
from edge.envs.household.agents import ExploreAgent, expert_plan
from edge.envs.household.world import kind_of
from edge.envs.registry import generate_tasks, make_env
from edge.envs.shop.agents import Shopper
from edge.evaluate import evaluate, retention
from edge.guidance import advised_receptacle_kinds, experience_block, true_advice
from edge.policy.actor import Actor
from edge.policy.model import load_policy, save_policy
from edge.policy.prompt import AgentState
from edge.rollout import Experience


class AdvisedExplorer(ExploreAgent):
    """The explorer, but it searches the receptacle kinds the advice names first, in that order."""

    def __init__(self, seed: int, advised_kinds: list[str]):
        super().__init__(seed)
        self.advised_kinds = advised_kinds

    def _search_order(self, receptacles: list[str]) -> list[str]:
        self.rng.shuffle(receptacles)
        rank = {k: i for i, k in enumerate(self.advised_kinds)}
        # A stack: the last item is visited first, so the first advised kind goes to the end.
        return sorted(receptacles, key=lambda r: -rank.get(kind_of(r), len(rank)))


class NoisyExpert:
    """The expert's plan with random detours ("go to" somewhere else), each followed by a return."""

    def __init__(self, seed: int, detour_prob: float):
        self.rng = random.Random(seed)
        self.detour_prob = detour_prob

    def reset(self, task: Task, first) -> None:
        self.plan = expert_plan(task)
        self.receptacles = task.spec["receptacles"]
        self.at: str | None = None
        self.returning: str | None = None

    def act(self, observation: str, admissible: list[str]) -> str:
        if self.returning:
            action, self.returning = f"go to {self.returning}", None
            return action
        if self.at is not None and self.plan and not self.plan[0].startswith("go to ") \
                and self.rng.random() < self.detour_prob:
            detour = self.rng.choice([r for r in self.receptacles if r != self.at])
            self.returning = self.at
            return f"go to {detour}"
        action = self.plan.pop(0) if self.plan else "look"
        if action.startswith("go to "):
            self.at = action[len("go to "):]
        return action


def record_demo(task: Task, agent, advice: str | None, history_steps: int,
                keep_failures: bool = False) -> list[tuple[AgentState, str]]:
    """Play one episode with a scripted agent; return (state, action) pairs as the policy sees them
    (none for a lost episode unless ``keep_failures``)."""
    env = make_env(task.env)
    first = env.reset(task)
    agent.reset(task, first)
    state = AgentState(task.instruction, first.observation, first.admissible_actions, [], advice)
    pairs = []
    while True:
        action = agent.act(state.observation, state.admissible)
        pairs.append((state, action))
        out = env.step(action)
        if out.done:
            return pairs if out.info.won or keep_failures else []
        history = (state.history + [(action, out.observation)])[-history_steps:] if history_steps else []
        state = AgentState(task.instruction, out.observation, out.info.admissible_actions, history, advice)


def demonstrators(cfg: WarmupConfig):
    """The environment's three demonstrators (plain explorer, plain competent agent, advised agent)
    as factories ``(task, seed) -> agent``, and whether the explorer's lost episodes are kept."""
    if cfg.env == "household":
        return (lambda task, s: ExploreAgent(s),
                lambda task, s: NoisyExpert(s, cfg.detour_prob),
                lambda task, s: AdvisedExplorer(s, advised_receptacle_kinds(true_advice(task))),
                False)
    if cfg.env == "shop":
        return (lambda task, s: Shopper(s, careful=False, option_prob=cfg.option_prob),
                lambda task, s: Shopper(s, careful=True),
                lambda task, s: Shopper(s, careful=True),
                True)
    raise ValueError(f"warmup.env {cfg.env!r}: scripted demonstrations exist for 'household' and 'shop'; "
                     "for another environment start from a pretrained model (policy.model) instead")


def demonstrations(cfg: WarmupConfig, history_steps: int, seed: int) -> list[tuple[AgentState, str]]:
    explorer, competent, advised, keep_explorer_failures = demonstrators(cfg)
    total = cfg.explore_episodes + cfg.noisy_expert_episodes + cfg.advised_episodes
    tasks = generate_tasks(cfg.env, "train", total, seed)
    rng = random.Random(seed)
    rng.shuffle(tasks)
    pairs: list[tuple[AgentState, str]] = []
    for i, task in enumerate(tasks):
        agent_seed = rng.randrange(2**31)
        if i < cfg.explore_episodes:
            pairs += record_demo(task, explorer(task, agent_seed), None, history_steps, keep_explorer_failures)
        elif i < cfg.explore_episodes + cfg.noisy_expert_episodes:
            pairs += record_demo(task, competent(task, agent_seed), None, history_steps)
        else:
            advice = experience_block(true_advice(task))
            pairs += record_demo(task, advised(task, agent_seed), advice, history_steps)
    return pairs


def behaviour_clone(actor: Actor, pairs: list[tuple[AgentState, str]], cfg: WarmupConfig,
                    generator: torch.Generator, progress: Progress | None = None) -> list[float]:
    """Minimise -log pi(a|s) over the candidates; returns the mean loss of each epoch."""
    builder = actor.builder
    prompts = [builder.prompt_ids(s) for s, _ in pairs]
    candidates = [[builder.action_ids(a) for a in s.admissible] for s, _ in pairs]
    chosen = [s.admissible.index(a) for s, a in pairs]
    model = actor.policy.model
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr)
    steps_per_epoch = (len(pairs) + cfg.batch_size - 1) // cfg.batch_size
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=cfg.lr, total_steps=cfg.epochs * steps_per_epoch,
                                                   pct_start=0.1)
    task_id = progress.add_task("warm-up (behaviour cloning)", total=cfg.epochs * steps_per_epoch) if progress else None
    model.train()
    losses = []
    for _ in range(cfg.epochs):
        order = torch.randperm(len(pairs), generator=generator).tolist()
        total = 0.0
        for start in range(0, len(order), cfg.batch_size):
            idx = order[start:start + cfg.batch_size]
            optimizer.zero_grad(set_to_none=True)
            for m in range(0, len(idx), actor.cfg.micro_batch_size):
                part = idx[m:m + actor.cfg.micro_batch_size]
                if cfg.objective == "candidates":
                    logps = actor.action_logprobs([prompts[i] for i in part], [candidates[i] for i in part])
                    loss = -torch.stack([lp[chosen[i]] for lp, i in zip(logps, part)]).sum() / len(idx)
                else:
                    logps = actor.token_logprobs([prompts[i] for i in part],
                                                 [candidates[i][chosen[i]] for i in part])
                    loss = -torch.stack([lp.sum() for lp in logps]).sum() / len(idx)
                loss.backward()
                total += float(loss.detach()) * len(idx)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            if progress:
                progress.advance(task_id)
        losses.append(total / len(pairs))
    model.eval()
    return losses


def true_advice_experience(task: Task) -> Experience:
    return Experience(experience_block(true_advice(task)), ["oracle"])


def run_warmup(params: EdgeParams, out_dir: Path | None = None) -> dict:
    """Build the tiny model, clone the demonstrations, save the base checkpoint, and check it:
    plain and true-advice success on ``test_seen``. Writes ``warmup.json`` beside the model."""
    cfg = params.warmup.for_env()
    out_dir = Path(out_dir or cfg.out_dir)
    torch.manual_seed(params.seed)
    started = time.perf_counter()
    policy = load_policy(params.policy, seed=params.seed, envs=[cfg.env])
    actor = Actor(policy)
    pairs = demonstrations(cfg, params.policy.history_steps, params.seed)
    generator = torch.Generator().manual_seed(params.seed)
    with Progress() as progress:
        losses = behaviour_clone(actor, pairs, cfg, generator, progress)
    report: dict = {"demonstration_states": len(pairs), "epoch_losses": losses,
                    "train_seconds": time.perf_counter() - started}
    if cfg.eval_episodes:
        tasks = generate_tasks(cfg.env, "test_seen", cfg.eval_episodes, params.seed)
        plain = evaluate(actor, tasks, params.seed)
        advised = evaluate(actor, tasks, params.seed, experience_for=true_advice_experience)
        report |= {"plain_success": plain.success, "advised_success": advised.success,
                   "advice_gap": advised.success - plain.success,
                   "retention": retention(plain.success, advised.success),
                   "plain": plain.to_dict(), "advised": advised.to_dict()}
    report["seconds"] = time.perf_counter() - started
    save_policy(policy, out_dir)
    (out_dir / "warmup.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
