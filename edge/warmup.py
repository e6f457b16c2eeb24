"""Warm start: behaviour cloning of the tiny model on scripted demonstrations.

A base policy for RL must be partly competent (so rewards are not all zero) and must *use advice*
in its prompt, as an instruction-tuned LLM would; otherwise a retrieved-experience scaffold carries
no signal. Three kinds of demonstration give it both, played by the environment's demonstrators
(``Knowledge.demonstrators``, in the environment's folder):

- plain, by an explorer: knows the rules and the goal, not the regularities;
- plain, by a competent agent;
- advised: the oracle's true advice (``Knowledge.oracle_advice``) in the prompt, by a demonstrator
  that follows it. This is where "advice helps" is learnt.

An environment without demonstrators of its own is demonstrated by its scripted agents: ``random``
(or ``explore``) explores, ``expert`` is the competent agent, and the expert plays the advised
episodes too when the environment has an oracle (else there are none, and the warm start says so).

The explorer's and competent agent's episodes can be played again as trajectories
(``demonstration_trajectories``), from which ``bank.bootstrap: demonstrations`` writes a run's first bank
entries: the same data every method's warm start was cloned from, not the oracle's advised episodes.

The loss is either the policy's own, ``-log pi(a|s)`` normalised over the admissible candidates
(``objective: candidates``), or plain supervised fine-tuning on the action's tokens (``sft``), which
raises the same score without packing the other candidates and so costs fewer tokens per state.
"""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path

import torch
from rich.progress import Progress

from edge.config import EdgeParams, WarmupConfig
from edge.envs.base import Demonstrators, Task
from edge.envs.registry import agent_names, generate_tasks, knowledge, make_agent, make_env
from edge.evaluate import evaluate, retention
from edge.files import atomic_folder, seal_folder
from edge.guidance import block_after, experience_block, has_oracle, true_advice
from edge.policy.actor import Actor, Decision
from edge.policy.model import load_policy, save_policy
from edge.policy.prompt import AgentState
from edge.rollout import Experience, StepRecord, Trajectory

log = logging.getLogger(__name__)


def play_trajectory(task: Task, agent, traj_id: str) -> Trajectory:
    """One episode of a scripted agent, recorded as a plain rollout (what the bank's evidence reads:
    observations, actions, the outcome), won or lost."""
    env = make_env(task.env)
    first = env.reset(task)
    agent.reset(task, first)
    trajectory = Trajectory(traj_id, task, group_id=traj_id, member=0, conditioned=False, experience=None)
    observation, admissible = first.observation, first.admissible_actions
    while True:
        action = agent.act(observation, admissible)
        chosen = admissible.index(action) if action in admissible else -1
        trajectory.steps.append(StepRecord(observation, admissible, Decision(action, [], None, chosen, None, [])))
        out = env.step(action)
        trajectory.invalid_actions += out.info.invalid_action
        if out.done:
            trajectory.won, trajectory.score = out.info.won, out.info.score
            trajectory.reward = trajectory.score
            return trajectory
        observation, admissible = out.observation, out.info.admissible_actions


def record_demo(task: Task, agent, advice: str | None, history_steps: int,
                keep_failures: bool = False, follow_progress: bool = False) -> list[tuple[AgentState, str]]:
    """Play one episode with a scripted agent; return (state, action) pairs as the policy sees them
    (none for a lost episode unless ``keep_failures``). ``follow_progress``: the advice as
    ``bank.block_follows_progress`` shows a block, without the stages done so far."""
    played = play_trajectory(task, agent, task.task_id)
    if not (played.won or keep_failures):
        return []
    actions = [step.decision.action for step in played.steps]
    pairs = []
    for i, step in enumerate(played.steps):
        history = played.history_before(i)[-history_steps:] if history_steps else []
        shown = block_after(advice, task, actions[:i]) if advice and follow_progress and i else advice
        pairs.append((AgentState(task.instruction, step.observation, step.admissible, history, shown), actions[i]))
    return pairs


def demonstrators(cfg: WarmupConfig) -> Demonstrators:
    """The environment's demonstrators, or ones made of its scripted agents (see the module's doc)."""
    env = knowledge(cfg.env)
    if env.has("demonstrators"):
        return env.demonstrators(cfg)
    agents = agent_names(cfg.env)
    explorer = next((a for a in ("explore", "random") if a in agents), None)
    if "expert" not in agents or explorer is None:
        raise ValueError(f"warmup.env {cfg.env!r}: the environment has no demonstrators (KNOWLEDGE.demonstrators) "
                         f"and not both an 'expert' and a 'random' agent (it has: {', '.join(agents)}); give it "
                         "those, or start from a pretrained model (policy.model) instead")
    oracle = has_oracle(cfg.env)
    log.warning("environment %r has no demonstrators of its own: the warm start clones its %r and 'expert' "
                "agents%s", cfg.env, explorer, "" if oracle else ", with no advised episodes (it has no oracle)")
    return Demonstrators(explorer=lambda task, s: make_agent(cfg.env, explorer, s),
                         competent=lambda task, s: make_agent(cfg.env, "expert", s),
                         advised=(lambda task, s: make_agent(cfg.env, "expert", s)) if oracle else None)


def other_placing(cfg: WarmupConfig, tasks: list[Task], seed: int) -> list[Task]:
    """``tasks`` as ``warmup.advised_env`` generates them: the same tasks (instructions), objects elsewhere."""
    try:
        others = generate_tasks(cfg.advised_env, "train", len(tasks), seed)
    except ValueError as err:
        raise ValueError(f"warmup.advised_env: {err}") from None
    for ours, theirs in zip(tasks, others):
        if ours.instruction != theirs.instruction:
            raise ValueError(f"warmup.advised_env {cfg.advised_env!r} does not play warmup.env {cfg.env!r}'s tasks: "
                             f"{ours.task_id} is {ours.instruction!r} there, {theirs.instruction!r} here; expected an "
                             "environment of the same tasks with objects elsewhere")
    return others


def demonstration_plan(cfg: WarmupConfig, seed: int, demo: Demonstrators) -> list[tuple[str, Task, int]]:
    """The warm start's episodes in the order it plays them: (kind, task, agent seed), the kind one of
    ``explorer``, ``competent`` and ``advised`` (none without ``demo.advised``), on ``seed``'s train tasks."""
    advised_episodes = cfg.advised_episodes if demo.advised else 0
    total = cfg.explore_episodes + cfg.noisy_expert_episodes + advised_episodes
    order = list(range(total))
    rng = random.Random(seed)
    rng.shuffle(order)
    generated = generate_tasks(cfg.env, "train", total, seed)
    tasks = [generated[j] for j in order]  # as rng.shuffle(generated) would, drawing the same numbers
    if cfg.advised_env:  # the same tasks with their objects placed by the advised environment's world
        others = other_placing(cfg, generated, seed)
        advised_tasks = [others[j] for j in order]
    plan = []
    for i, task in enumerate(tasks):
        agent_seed = rng.randrange(2**31)
        if i < cfg.explore_episodes:
            plan.append(("explorer", task, agent_seed))
        elif i < cfg.explore_episodes + cfg.noisy_expert_episodes:
            plan.append(("competent", task, agent_seed))
        else:
            plan.append(("advised", advised_tasks[i] if cfg.advised_env else task, agent_seed))
    return plan


def demonstrations(cfg: WarmupConfig, history_steps: int, seed: int,
                   follow_progress: bool = False) -> list[tuple[AgentState, str]]:
    """The behaviour-cloning pairs: explorer, competent and advised episodes on ``seed``'s train tasks;
    ``follow_progress``: the advised episodes' block as ``bank.block_follows_progress`` shows it."""
    demo = demonstrators(cfg)
    pairs: list[tuple[AgentState, str]] = []
    for kind, task, agent_seed in demonstration_plan(cfg, seed, demo):
        if kind == "explorer":
            pairs += record_demo(task, demo.explorer(task, agent_seed), None, history_steps,
                                 demo.keep_explorer_failures)
        elif kind == "competent":
            pairs += record_demo(task, demo.competent(task, agent_seed), None, history_steps)
        else:
            advice = experience_block(true_advice(task))
            pairs += record_demo(task, demo.advised(task, agent_seed), advice, history_steps,
                                 follow_progress=follow_progress)
    return pairs


def demonstration_trajectories(cfg: WarmupConfig, seed: int) -> list[Trajectory]:
    """The warm start's plain demonstrations (its explorer's and competent agent's episodes, the same tasks
    and agent seeds as ``demonstrations``), won or lost, as trajectories: what ``bank.bootstrap:
    demonstrations`` writes a run's first entries from. The advised episodes are left out: they follow the
    oracle's advice, and a learned bank must not be written from it."""
    demo = demonstrators(cfg)
    plain = {"explorer": demo.explorer, "competent": demo.competent}
    return [play_trajectory(task, plain[kind](task, agent_seed), f"demo-{i}")
            for i, (kind, task, agent_seed) in enumerate(demonstration_plan(cfg, seed, demo)) if kind in plain]


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
    # The advised episodes show the block as the runs will (bank.block_follows_progress): a small model
    # reads a block in the format it was warm-started on (block_order.md; o25 in internalization.md).
    follow = params.bank.block_follows_progress
    pairs = demonstrations(cfg, params.policy.history_steps, params.seed, follow_progress=follow)
    generator = torch.Generator().manual_seed(params.seed)
    with Progress() as progress:
        losses = behaviour_clone(actor, pairs, cfg, generator, progress)
    report: dict = {"demonstration_states": len(pairs), "epoch_losses": losses,
                    "train_seconds": time.perf_counter() - started}
    if cfg.eval_episodes:
        tasks = generate_tasks(cfg.env, "test_seen", cfg.eval_episodes, params.seed)
        plain = evaluate(actor, tasks, params.seed)
        if has_oracle(cfg.env):
            advised = evaluate(actor, tasks, params.seed, experience_for=true_advice_experience,
                               follow_progress=follow)
            report |= {"plain_success": plain.success, "advised_success": advised.success,
                       "advice_gap": advised.success - plain.success,
                       "retention": retention(plain.success, advised.success),
                       "plain": plain.to_dict(), "advised": advised.to_dict()}
        else:  # without an oracle there is no advice whose reading to check
            report |= {"plain_success": plain.success, "plain": plain.to_dict()}
    report["seconds"] = time.perf_counter() - started
    # Into a temporary folder that replaces ``out_dir`` whole: a killed warm start never leaves half a model
    # where the next command would load it.
    with atomic_folder(out_dir) as tmp:
        save_policy(policy, tmp)
        (tmp / "warmup.json").write_text(json.dumps(report, indent=2) + "\n")
        seal_folder(tmp)
    return report
