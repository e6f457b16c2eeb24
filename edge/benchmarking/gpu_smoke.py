"""The real-model path end to end: a Qwen2-style model with a byte-level BPE tokenizer, LoRA, bf16 and
gradient checkpointing, two rounds of GRPO and of ``edge-oracle-bank`` in score and in generate mode.

    python benchmarks/gpu_smoke.py --size small --out-dir benchmarks/results   # on a GPU (~0.15B params)
    python benchmarks/gpu_smoke.py --size tiny --device cpu --out-dir /tmp/s   # what the tests run

The model is built from a config with random weights and its tokenizer is trained here on the
household environment's own text (``tokenizers``' BPE, saved as a ``PreTrainedTokenizerFast`` with a
chat template), so nothing is downloaded; both are saved to a folder and loaded by path, the way a
user's hub model is. It needs torch, transformers, peft, pyarrow and pydantic (no LanceDB, MLflow or
Prefect: the oracle control keeps no bank), so it runs on a bare GPU image with a few carried wheels.

What it reports, per (mode, method) run (``gpu_smoke.json`` and ``gpu_smoke.md``):
- tokens per second of the rollouts (every token the decoder processed while collecting, padding
  included, over the collect stage's wall time) and of the update (the same over the update stage);
- the share of the collect stage's time spent inside the decoder's forward passes (the rest is the
  environment, prompt building and Python);
- peak GPU memory (``torch.cuda.max_memory_allocated``), or the process's peak RSS on CPU;
- the plain policy's success and invalid-action rate after the last round (a random model: near zero
  and, in generate mode, near one; this measures the path, not learning: the rewards the updates
  see are seeded coin flips, ``with_stand_in_rewards``);
- on a GPU: the agreement of the first round's log-probabilities between CPU and CUDA, both float32,
  on the same states (max and mean absolute difference, tolerance ``LOGP_TOLERANCE``), and how far
  the bf16 log-probabilities recorded while collecting are from the float32 ones.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

LOGP_TOLERANCE = 1e-3
"""Largest |log pi_cpu - log pi_cuda| (float32, nats per action or token) counted as agreement."""

SIZES = {
    # hidden, intermediate, layers, heads, kv heads, BPE vocabulary
    "tiny": (32, 64, 2, 4, 2, 600),
    "small": (1024, 2816, 12, 16, 4, 4000),  # ~0.15B parameters with the embeddings
}

CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@dataclass
class SmokeConfig:
    size: str = "tiny"
    """``tiny`` (CPU, the tests) or ``small`` (~0.15B, a GPU)."""
    device: str = "cuda" if torch.cuda.is_available() else "cpu"
    dtype: str = "bfloat16"
    modes: tuple[str, ...] = ("score", "generate")
    methods: tuple[str, ...] = ("grpo", "edge-oracle-bank")
    rounds: int = 2
    tasks_per_round: int = 4
    group_size: int = 4
    max_steps: int = 8
    eval_episodes: int = 2
    micro_batch_size: int = 16
    max_new_tokens: int = 16
    lora_r: int = 16
    gradient_checkpointing: bool = True
    seed: int = 0
    out_dir: Path = Path("benchmarks/results")
    work_dir: Path | None = None
    """Model and run folders (default: ``<out_dir>/gpu_smoke_work``)."""


# ----- the model ------------------------------------------------------------------------------
def household_corpus(n_tasks: int = 40, seed: int = 0) -> list[str]:
    """Text the policy will read and write: instructions, observations, actions and the oracle's advice of
    expert-played household episodes, and the prompt's own labels."""
    from edge.envs.registry import generate_tasks, make_agent, make_env
    from edge.guidance import has_oracle, true_advice
    from edge.policy.model import ADVICE_WORDS, PROMPT_WORDS

    lines = [" ".join(PROMPT_WORDS), " ".join(ADVICE_WORDS), "<action> look </action>"]
    env = make_env("household")
    for i, task in enumerate(generate_tasks("household", "train", n_tasks, seed)):
        agent = make_agent("household", "expert", seed + i)
        first = env.reset(task)
        agent.reset(task, first)
        lines += [task.instruction, first.observation, *first.admissible_actions]
        if has_oracle("household"):
            lines += true_advice(task)
        observation, admissible = first.observation, first.admissible_actions
        for _ in range(30):
            action = agent.act(observation, admissible)
            out = env.step(action)
            observation, admissible = out.observation, out.info.admissible_actions
            lines += [f"<action> {action} </action>", observation]
            if out.done:
                break
    return lines


def build_tokenizer(corpus: list[str], vocab_size: int):
    """A byte-level BPE tokenizer trained on ``corpus``, with ChatML-style special tokens and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(folder: Path, size: str, seed: int = 0) -> int:
    """Save a random-weight Qwen2 and its tokenizer to ``folder``; returns the parameter count."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    hidden, intermediate, layers, heads, kv_heads, vocab = SIZES[size]
    tokenizer = build_tokenizer(household_corpus(seed=seed), vocab)
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=4096, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"))
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


# ----- measuring the stages -------------------------------------------------------------------
@dataclass
class StageMeter:
    """Tokens through the decoder and seconds inside its forward passes, per stage."""

    cuda: bool
    tokens: dict[str, int] = field(default_factory=dict)
    forward_seconds: dict[str, float] = field(default_factory=dict)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    _stage: str | None = None
    _started: float = 0.0

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def before_forward(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if self._stage is not None and ids is not None:
            self._sync()
            self.tokens[self._stage] = self.tokens.get(self._stage, 0) + ids.numel()
            self._started = time.perf_counter()

    def after_forward(self, module, args, kwargs, output):
        if self._stage is not None:
            self._sync()
            self.forward_seconds[self._stage] = (self.forward_seconds.get(self._stage, 0.0)
                                                 + time.perf_counter() - self._started)

    def wrap(self, name: str, stage, policy_round):
        """``stage(run, k)`` measured as ``name``, with hooks on the decoder of the policy it uses."""

        def measured(run, k):
            policy, _ = run.policy_for(policy_round(k))
            decoder = policy.model.get_decoder()
            hooks = [decoder.register_forward_pre_hook(self.before_forward, with_kwargs=True),
                     decoder.register_forward_hook(self.after_forward, with_kwargs=True)]
            self._stage = name
            self._sync()
            started = time.perf_counter()
            try:
                return stage(run, k)
            finally:
                self._sync()
                self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + time.perf_counter() - started
                self._stage = None
                for h in hooks:
                    h.remove()

        return measured


def smoke_params(cfg: SmokeConfig, model_folder: Path, mode: str, method: str, runs_dir: Path):
    from edge.config import parse_params

    return parse_params({
        "seed": cfg.seed,
        "data": {"envs": ["household"], "train_tasks": 200},
        "policy": {"model": str(model_folder), "mode": mode, "dtype": cfg.dtype, "device": cfg.device,
                   "lora": {"enabled": True, "r": cfg.lora_r, "alpha": 2 * cfg.lora_r},
                   "gradient_checkpointing": cfg.gradient_checkpointing, "micro_batch_size": cfg.micro_batch_size,
                   "max_new_tokens": cfg.max_new_tokens, "history_steps": 1},
        "rollout": {"tasks_per_round": cfg.tasks_per_round, "group_size": cfg.group_size,
                    "max_steps": cfg.max_steps},
        "grpo": {"epochs": 1, "minibatches": 2, "lr": 1e-4},
        # The sampled estimator is the one generate mode has (no finite action set to sum over).
        "distill": {"estimator": "exact" if mode == "score" else "sampled"},
        "eval": {"episodes": cfg.eval_episodes, "every": cfg.rounds, "base_cache_dir": str(runs_dir / "base-evals")},
        "train": {"env": "household", "method": method, "rounds": cfg.rounds, "base_checkpoint": None,
                  "runs_dir": str(runs_dir), "run_name": f"{mode}-{method}"},
    })


def with_stand_in_rewards(collect, seed: int):
    """``collect`` followed by a seeded coin flip as every trajectory's reward. A random-weight model
    never wins, so every group's rewards would be equal, no state would carry a gradient and the
    update would do nothing; with coin-flip rewards every update runs at its real size. This measures
    the path and its speed, not learning (and is used nowhere else)."""
    import hashlib

    from edge.rollout import read_rollouts, write_rollouts

    def collect_and_reward(run, k):
        out = collect(run, k)
        marker = out.with_name("stand_in_rewards")
        if not marker.exists():
            trajectories = read_rollouts(out)
            for t in trajectories:
                digest = hashlib.sha256(f"{seed}/{t.traj_id}".encode()).digest()
                t.reward = float(digest[0] % 2)
            write_rollouts(trajectories, out)
            # These rewritten rollouts are the round's now: sealed again, so the next stages accept them.
            counts = {"rows": sum(len(t.steps) for t in trajectories), "trajectories": len(trajectories),
                      "groups": len({t.group_id for t in trajectories})}
            run.seal(k, "collect", ["collect.json", "rollouts.parquet"], {"rollouts.parquet": counts})
            marker.touch()
        return out

    return collect_and_reward


def run_one(cfg: SmokeConfig, model_folder: Path, mode: str, method: str, runs_dir: Path) -> dict:
    from edge.train import STAGES, train

    cuda = cfg.device.startswith("cuda")
    meter = StageMeter(cuda)
    stages = {"collect": meter.wrap("collect", with_stand_in_rewards(STAGES["collect"], cfg.seed), lambda k: k),
              "distill": meter.wrap("update", STAGES["distill"], lambda k: k)}
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    run = train(smoke_params(cfg, model_folder, mode, method, runs_dir), stages=stages)
    seconds = time.perf_counter() - started
    rounds = [json.loads((run.round_dir(k) / "train_metrics.json").read_text()) for k in range(cfg.rounds)]
    evals = [json.loads((run.round_dir(k) / "eval.json").read_text()) for k in range(cfg.rounds)
             if (run.round_dir(k) / "eval.json").exists()]

    def rate(stage):
        s = meter.stage_seconds.get(stage, 0.0)
        return meter.tokens.get(stage, 0) / s if s else 0.0

    return {
        "mode": mode, "method": method, "run_folder": str(run.folder), "seconds": seconds,
        "rollout_tokens": meter.tokens.get("collect", 0), "rollout_seconds": meter.stage_seconds.get("collect", 0.0),
        "rollout_tokens_per_s": rate("collect"),
        "rollout_forward_share": (meter.forward_seconds.get("collect", 0.0) / meter.stage_seconds["collect"]
                                  if meter.stage_seconds.get("collect") else 0.0),
        "update_tokens": meter.tokens.get("update", 0), "update_seconds": meter.stage_seconds.get("update", 0.0),
        "update_tokens_per_s": rate("update"),
        "optimizer_steps": sum(r["optimizer_steps"] for r in rounds),
        "samples": sum(r["samples"] for r in rounds),
        "invalid_rate_plain": [e["test_seen"]["plain"]["invalid_rate"] for e in evals if "test_seen" in e],
        "peak_gpu_memory_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
        "peak_rss_mb": max(r["peak_memory_mb"] for r in rounds),
        "success_plain": [e["test_seen"]["plain"]["success"] for e in evals if "test_seen" in e],
    }


# ----- CPU vs CUDA ----------------------------------------------------------------------------
def logprob_agreement(cfg: SmokeConfig, model_folder: Path, run_folder: Path, mode: str, n_states: int = 64,
                      devices: tuple[str, str] = ("cpu", "cuda")) -> dict:
    """The first round's states scored by the round-0 policy in float32 on two devices (CPU and CUDA)."""
    from edge.algorithms.grpo import grpo_samples, sample_logprobs
    from edge.config import PolicyConfig
    from edge.policy.actor import Actor
    from edge.policy.model import load_policy
    from edge.rollout import read_rollouts

    trajectories = read_rollouts(run_folder / "round_000" / "rollouts.parquet")
    samples, _ = grpo_samples(trajectories, drop_zero_advantage=False)
    samples = samples[:n_states]
    values = {}
    for device in devices:
        pcfg = PolicyConfig(model=str(model_folder), mode=mode, dtype="float32", device=device,
                            micro_batch_size=cfg.micro_batch_size, max_new_tokens=cfg.max_new_tokens, history_steps=1)
        actor = Actor(load_policy(pcfg))
        with torch.inference_mode():
            values[device] = torch.cat([u.float().cpu() for u in sample_logprobs(actor, samples)])
        del actor
    recorded = torch.tensor([v for s in samples for v in s.old_logp])
    diff = (values[devices[0]] - values[devices[1]]).abs()
    return {"mode": mode, "units": int(diff.numel()), "max_abs_diff": float(diff.max()),
            "mean_abs_diff": float(diff.mean()), "tolerance": LOGP_TOLERANCE,
            "agree": bool(float(diff.max()) <= LOGP_TOLERANCE),
            "bf16_recorded_vs_fp32_max_abs_diff": float((recorded - values[devices[0]]).abs().max())}


# ----- the report -----------------------------------------------------------------------------
def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads)"


def render_markdown(report: dict) -> str:
    c = report["config"]
    lines = [
        "# The real-model path: smoke benchmark",
        "",
        f"Device: **{report['device_name']}**; torch {report['torch']}, transformers {report['transformers']}; "
        f"{report['date']}.",
        f"Model: random-weight Qwen2, {report['parameters'] / 1e6:.2f}M parameters, byte-level BPE "
        f"({report['vocab_size']} tokens), LoRA r={c['lora_r']}, {c['dtype']}, gradient checkpointing "
        f"{'on' if c['gradient_checkpointing'] else 'off'}; {c['rounds']} rounds of {c['tasks_per_round']} tasks x "
        f"{c['group_size']}, up to {c['max_steps']} steps.",
        "",
        f"Command: `{report['command']}`",
        "",
        "| mode | method | rollout tokens/s | forward share of rollout time | update tokens/s | optimizer steps "
        "| peak GPU MiB | peak RSS MiB | plain success / invalid rate (last round) | wall s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in report["runs"]:
        gpu = f"{r['peak_gpu_memory_mb']:.0f}" if r["peak_gpu_memory_mb"] is not None else "-"
        success = (f"{r['success_plain'][-1]:.0%} / {r['invalid_rate_plain'][-1]:.0%}"
                   if r["success_plain"] else "-")
        lines.append(f"| {r['mode']} | {r['method']} | {r['rollout_tokens_per_s']:,.0f} | "
                     f"{r['rollout_forward_share']:.0%} | {r['update_tokens_per_s']:,.0f} | {r['optimizer_steps']} | "
                     f"{gpu} | {r['peak_rss_mb']:.0f} | {success} | {r['seconds']:.0f} |")
    lines += ["", "Tokens are every token the decoder processed (padding included); rollout tokens/s is over the "
              "whole collect stage (environment and prompt building included), update tokens/s over the whole "
              "update stage (teacher and reference passes, backward and optimizer included).", ""]
    if report["agreement"]:
        lines += ["## CPU vs CUDA log-probabilities (float32, the first round's states)", "",
                  "| mode | units | max abs diff | mean abs diff | within tolerance | bf16 recorded vs fp32 (max) |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for a in report["agreement"]:
            lines.append(f"| {a['mode']} | {a['units']} | {a['max_abs_diff']:.2e} | {a['mean_abs_diff']:.2e} | "
                         f"{'yes' if a['agree'] else 'NO'} (<= {a['tolerance']:g}) | "
                         f"{a['bf16_recorded_vs_fp32_max_abs_diff']:.2e} |")
    else:
        lines += ["CPU vs CUDA agreement: not measured (no CUDA device in this run)."]
    return "\n".join(lines) + "\n"


def run_smoke(cfg: SmokeConfig, command: str = "") -> dict:
    import transformers

    work = cfg.work_dir or cfg.out_dir / "gpu_smoke_work"
    model_folder = work / f"model-{cfg.size}"
    if not (model_folder / "config.json").exists():
        build_model(model_folder, cfg.size, cfg.seed)
    from transformers import AutoTokenizer

    parameters = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_pretrained(model_folder).parameters())
    runs = []
    for mode in cfg.modes:
        for method in cfg.methods:
            print(f"gpu smoke: {mode} / {method} on {cfg.device}", flush=True)
            runs.append(run_one(cfg, model_folder, mode, method, work / "runs"))
    agreement = []
    if torch.cuda.is_available() and cfg.device.startswith("cuda"):
        for mode in cfg.modes:
            folder = next(Path(r["run_folder"]) for r in runs if r["mode"] == mode)
            agreement.append(logprob_agreement(cfg, model_folder, folder, mode))
    report = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "command": command, "device_name": device_name(cfg.device), "torch": torch.__version__,
        "transformers": transformers.__version__, "date": time.strftime("%Y-%m-%d"),
        "parameters": parameters, "vocab_size": len(AutoTokenizer.from_pretrained(model_folder)),
        "runs": runs, "agreement": agreement,
    }
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    (cfg.out_dir / "gpu_smoke.json").write_text(json.dumps(report, indent=2) + "\n")
    (cfg.out_dir / "gpu_smoke.md").write_text(render_markdown(report))
    return report


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = SmokeConfig()
    parser.add_argument("--size", choices=sorted(SIZES), default=defaults.size)
    parser.add_argument("--device", default=defaults.device)
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=defaults.dtype)
    parser.add_argument("--rounds", type=int, default=defaults.rounds)
    parser.add_argument("--tasks-per-round", type=int, default=defaults.tasks_per_round)
    parser.add_argument("--group-size", type=int, default=defaults.group_size)
    parser.add_argument("--max-steps", type=int, default=defaults.max_steps)
    parser.add_argument("--eval-episodes", type=int, default=defaults.eval_episodes)
    parser.add_argument("--modes", default=",".join(defaults.modes))
    parser.add_argument("--methods", default=",".join(defaults.methods))
    parser.add_argument("--out-dir", type=Path, default=defaults.out_dir)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    cfg = SmokeConfig(size=args.size, device=args.device, dtype=args.dtype, rounds=args.rounds,
                      tasks_per_round=args.tasks_per_round, group_size=args.group_size, max_steps=args.max_steps,
                      eval_episodes=args.eval_episodes, modes=tuple(args.modes.split(",")),
                      methods=tuple(args.methods.split(",")), out_dir=args.out_dir, work_dir=args.work_dir)
    command = "python benchmarks/gpu_smoke.py " + " ".join(argv if argv is not None else __import__("sys").argv[1:])
    report = run_smoke(cfg, command)
    print(render_markdown(report))
    return report
