"""Fingerprints of what the built-in environments' knowledge produces, to pin it across refactors.

Everything here is free of floating point: a scripted actor (draws from the episodes' own torch
generators, which are bit-exact on every machine) plays rollouts through the real rollout code; the
template synthesizer writes the bank from them; the oracle's advice, the warm start's demonstrations
and the tiny model's vocabulary are text. So the pins hold on any machine, and a change to any of
them fails ``tests/test_env_knowledge.py``. ``python tests/builtin_pins.py`` rewrites the pins file
(only do that when a change of behaviour is intended, and say so in the commit).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from edge.bank.synthesis import TemplateSynthesizer, synthesize
from edge.config import WarmupConfig
from edge.envs.registry import generate_tasks, make_agent, make_env
from edge.guidance import experience_block, true_advice
from edge.policy.actor import Decision
from edge.policy.model import tiny_vocabulary
from edge.rollout import Experience, StepRecord, Trajectory, rollout
from edge.text import split_words
from edge.warmup import demonstrations

PINS = Path(__file__).parent / "data" / "builtin_pins.json"
ENVS = ("household", "shop")


@dataclass
class _ScriptedConfig:
    history_steps: int = 2
    invalid_penalty: float = 0.0
    mode: str = "score"


class ScriptedActor:
    """Acts like the rollout's actor without a model: a uniform draw among the admissible actions
    from the episode's generator; with an experience block, half the time a draw among the actions
    that share a word with it (so advice changes behaviour, as it does for the warm-started model)."""

    cfg = _ScriptedConfig()

    def act(self, states, generators, greedy=False):
        decisions = []
        for state, gen in zip(states, generators):
            options = state.admissible
            if state.experience:
                words = {w for w in split_words(state.experience) if len(w) > 3}
                advised = [a for a in options if words & set(split_words(a))]
                if advised and int(torch.randint(2, (1,), generator=gen)) == 1:
                    options = advised
            action = options[int(torch.randint(len(options), (1,), generator=gen))]
            decisions.append(Decision(action, [], None, state.admissible.index(action), None, [0.0]))
        return decisions


def expert_trajectory(env: str, task):
    """The scripted expert's episode as a trajectory (the rollout's actors rarely win in 15 steps)."""
    agent, game = make_agent(env, "expert", 0), make_env(env)
    first = game.reset(task)
    agent.reset(task, first)
    trajectory = Trajectory(f"{task.task_id}/expert", task, task.task_id, 9, False, None)
    observation, admissible = first.observation, first.admissible_actions
    while True:
        action = agent.act(observation, admissible)
        trajectory.steps.append(StepRecord(observation, admissible, Decision(action, [], None, -1, None, [0.0])))
        out = game.step(action)
        observation, admissible = out.observation, out.info.admissible_actions
        if out.done:
            trajectory.won, trajectory.score = out.info.won, out.info.score
            return trajectory


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def env_fingerprint(env: str) -> dict[str, str]:
    tasks = generate_tasks(env, "train", 12, seed=5)
    advised = {t.task_id: Experience(experience_block(true_advice(t)), ["oracle"]) for t in tasks[::2]}
    trajectories = rollout(ScriptedActor(), tasks, 4, seed=7, experiences=advised, conditioned_per_group=2,
                           max_steps=15)
    trajectories += [expert_trajectory(env, t) for t in tasks[1::3]]  # successes to contrast with
    counter = iter(range(1, 10_000))
    entries = synthesize(trajectories, TemplateSynthesizer(), 0, lambda: f"g{next(counter):06d}")
    cfg = WarmupConfig(env=env, explore_episodes=6, noisy_expert_episodes=4, advised_episodes=6)
    pairs = demonstrations(cfg, history_steps=2, seed=3)
    test_tasks = generate_tasks(env, "test_unseen", 20, seed=0)
    return {
        "rollouts": digest([(t.traj_id, t.conditioned, [s.decision.action for s in t.steps], t.won, t.score)
                            for t in trajectories]),
        "bank": digest([(e.id, e.text, e.kind, e.task_type, e.signature, e.key, e.provenance) for e in entries]),
        "bank_size": str(len(entries)),
        "oracle_advice": digest([true_advice(t) for t in test_tasks]),
        "demonstrations": digest([(s.instruction, s.observation, s.admissible, s.history, s.experience, a)
                                  for s, a in pairs]),
        "tiny_vocabulary": digest(sorted(tiny_vocabulary([env]))),
    }


def fingerprints() -> dict[str, dict[str, str]]:
    return {env: env_fingerprint(env) for env in ENVS}


if __name__ == "__main__":
    PINS.parent.mkdir(exist_ok=True)
    PINS.write_text(json.dumps(fingerprints(), indent=2, sort_keys=True) + "\n")
    print(PINS.read_text(), file=sys.stderr)
