"""What would break or silently change the method on a GPU, checked where CUDA is absent.

Each test here failed on the code before the fix it names: sampling through a CPU generator handed
to a device kernel, generate mode inheriting a checkpoint's generation processors, eager attention
adding a boolean packed mask (which masks nothing), half-precision logits in the log-probabilities.
The CUDA-only test runs where a GPU is present and is skipped (saying so) elsewhere."""

import pytest
import torch
from pydantic import ValidationError
from test_policy import household_state, tiny_actor
from transformers import GenerationConfig

from edge.algorithms.grpo import UpdateConfig, grpo_samples, policy_update
from edge.config import PolicyConfig
from edge.envs.household import generate_tasks
from edge.policy.actor import Actor, draw, packed_attention_mask
from edge.policy.model import load_policy, save_policy
from edge.rollout import rollout


def states_and_candidates(actor):
    state = household_state()
    prompt = actor.builder.prompt_ids(state)
    return state, prompt, [actor.builder.action_ids(a) for a in state.admissible]


def test_sampling_draws_on_the_cpu_and_hands_no_generator_to_a_device_kernel(monkeypatch):
    """On CUDA, ``torch.multinomial(probs_on_gpu, generator=cpu_generator)`` is refused. Every draw must
    be a CPU uniform from the episode's stream, moved to the tensors' device."""
    seen = []
    real_rand = torch.rand

    def checked_rand(*args, generator=None, **kwargs):
        seen.append((generator.device.type if generator is not None else None, kwargs.get("device")))
        return real_rand(*args, generator=generator, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("torch.multinomial with a generator fails on CUDA; use draw(probs, uniforms(...))")

    monkeypatch.setattr(torch, "multinomial", refuse)
    monkeypatch.setattr(torch, "rand", checked_rand)
    for mode in ("score", "generate"):
        actor = tiny_actor(mode=mode, max_new_tokens=4)
        decisions = actor.act([household_state()] * 3, [torch.Generator().manual_seed(i) for i in range(3)])
        assert len(decisions) == 3
    assert seen and all(gen == "cpu" and device in (None, "cpu") for gen, device in seen)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run on a GPU machine)")
def test_on_cuda_both_modes_act_and_match_the_cpu_choices():
    for mode in ("score", "generate"):
        cpu = tiny_actor(mode=mode, max_new_tokens=4)
        gpu = tiny_actor(mode=mode, max_new_tokens=4, device="cuda")
        states = [household_state()] * 4
        a = cpu.act(states, [torch.Generator().manual_seed(i) for i in range(4)])
        b = gpu.act(states, [torch.Generator().manual_seed(i) for i in range(4)])
        assert [d.action for d in a] == [d.action for d in b]


def test_generate_mode_samples_exactly_softmax_over_temperature_whatever_the_generation_config(tmp_path):
    """A checkpoint whose generation_config sets a repetition penalty, top-k and top-p: the sampled
    tokens are still the inverse-CDF draws of softmax(logits / T) that ``token_logprobs`` describes."""
    policy = load_policy(PolicyConfig(), seed=0, envs=["household"])
    policy.model.generation_config = GenerationConfig(do_sample=True, repetition_penalty=8.0, top_k=2, top_p=0.5,
                                                      temperature=0.3)
    save_policy(policy, tmp_path / "ckpt")
    cfg = PolicyConfig(mode="generate", max_new_tokens=8, temperature=0.7)
    actor = Actor(load_policy(cfg, checkpoint=tmp_path / "ckpt"))
    assert actor.policy.model.generation_config.repetition_penalty == 8.0
    prompt = actor.builder.prompt_ids(household_state())
    checked = 0
    for seed in range(6):
        response = actor.generate([prompt], [torch.Generator().manual_seed(seed)], greedy=False)[0]
        # Replay the stream: the same uniforms through the teacher-forced distribution at T.
        stream = torch.Generator().manual_seed(seed)
        with torch.inference_mode():
            logp = actor.token_logprobs([prompt], [response])[0]
            ids = torch.tensor([prompt + response])
            hidden = actor.backbone(input_ids=ids).last_hidden_state[0]
            logits = actor.lm_head(hidden[len(prompt) - 1:len(prompt) - 1 + len(response)]).float()
        probs = torch.softmax(logits / 0.7, dim=-1)
        replay = draw(probs, torch.stack([torch.rand((), generator=stream, dtype=torch.float64)
                                          for _ in response]))
        assert replay.tolist() == response
        assert torch.allclose(logp, probs.log().gather(1, torch.tensor(response)[:, None])[:, 0], atol=1e-5)
        checked += len(response)
    assert checked >= 12


def test_eager_attention_honours_the_packed_mask_and_loading_pins_the_configured_kernel(tmp_path):
    for kernel in ("sdpa", "eager"):
        actor = tiny_actor(attn_implementation=kernel)
        assert actor.attention_kernel() == kernel
        _, prompt, candidates = states_and_candidates(actor)
        with torch.no_grad():
            packed = actor.candidate_scores([prompt], [candidates])[0]
            separate = torch.stack([actor.candidate_scores([prompt], [[c]])[0][0] for c in candidates])
        assert torch.allclose(packed, separate, atol=1e-4), kernel
    # A boolean mask under eager attention is added to the scores (0 or 1): nothing is masked.
    allowed = torch.tensor([[True, False], [True, True]])[None]
    eager = packed_attention_mask(allowed, "eager", torch.float32)
    assert eager.dtype == torch.float32 and eager[0, 0, 0, 1] == torch.finfo(torch.float32).min
    assert eager[0, 0, 1].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="policy.attn_implementation"):
        packed_attention_mask(allowed, "flash_attention_2", torch.float32)
    with pytest.raises(ValidationError, match="attn_implementation"):
        PolicyConfig(attn_implementation="flash_attention_2")
    # Whatever kernel a checkpoint was trained with, it is loaded with the configured one.
    policy = load_policy(PolicyConfig(attn_implementation="eager"), seed=0, envs=["household"])
    save_policy(policy, tmp_path / "eager")
    for kernel in ("sdpa", "eager"):
        reloaded = load_policy(PolicyConfig(attn_implementation=kernel), checkpoint=tmp_path / "eager")
        assert reloaded.model.config._attn_implementation == kernel


def test_half_precision_models_give_float32_log_probabilities_from_a_float32_head():
    actor = tiny_actor(dtype="bfloat16")
    assert actor.lm_head.weight.dtype == torch.bfloat16
    _, prompt, candidates = states_and_candidates(actor)
    with torch.no_grad():
        logp = actor.action_logprobs([prompt], [candidates])[0]
        # Reference: the same bf16 hidden states through the head in float64, for the first candidate.
        ids = torch.tensor([prompt + candidates[0]])
        hidden = actor.backbone(input_ids=ids).last_hidden_state[0, len(prompt) - 1:-1].double()
        exact_logits = hidden @ actor.lm_head.weight.double().T
        exact = torch.log_softmax(exact_logits, -1).gather(1, torch.tensor(candidates[0])[:, None]).sum()
        rounded = torch.log_softmax(actor.lm_head(hidden.bfloat16()).float(), -1)
        rounded = rounded.gather(1, torch.tensor(candidates[0])[:, None]).sum()
    assert logp.dtype == torch.float32
    assert abs(float(logp.exp().sum()) - 1) < 1e-5
    with torch.no_grad():
        first = actor.candidate_scores([prompt], [candidates[:1]])[0][0]
    # The float32 head is within float32 rounding of the exact value; the bf16 head was not.
    assert abs(float(first) - float(exact)) < 1e-3
    assert abs(float(rounded) - float(exact)) > 3 * abs(float(first) - float(exact)), (first, rounded, exact)


def test_gradient_checkpointing_gives_the_same_update():
    tasks = generate_tasks("train", 2, seed=0)
    results = []
    for checkpointing in (False, True):
        actor = tiny_actor(gradient_checkpointing=checkpointing)
        model = actor.policy.model
        active = getattr(model, "is_activation_checkpointing", None)
        assert (active if active is not None else model.is_gradient_checkpointing) == checkpointing
        trajs = rollout(actor, tasks, 4, 0, max_steps=4)
        for i, t in enumerate(trajs):
            t.reward = float(i % 2)
        samples, _ = grpo_samples(trajs)
        optimizer = torch.optim.AdamW(actor.policy.model.parameters(), lr=1e-3)
        cfg = UpdateConfig(lr=1e-3, epochs=1, minibatches=2, clip_low=0.2, clip_high=0.28, beta=0.0,
                           loss_agg="token-mean", max_grad_norm=1.0)
        before = [p.detach().clone() for p in actor.policy.model.parameters()]
        metrics = policy_update(actor, optimizer, samples, cfg, torch.Generator().manual_seed(0))
        after = list(actor.policy.model.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(after, before))
        results.append((metrics["grad_norm"], [p.detach().clone() for p in after]))
    assert abs(results[0][0] - results[1][0]) < 1e-5
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(results[0][1], results[1][1]))
