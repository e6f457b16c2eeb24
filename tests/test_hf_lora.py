"""The path GPU users take: a Hugging Face causal LM from a local folder, LoRA via peft, generate
mode. Tested with a small Qwen2 saved locally (no downloads), with a chat template."""

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from edge.algorithms.grpo import UpdateConfig, grpo_samples, policy_update, sample_logprobs
from edge.config import LoraConfig, PolicyConfig
from edge.envs.household import generate_tasks
from edge.policy.actor import Actor
from edge.policy.model import load_policy, save_policy, tiny_vocabulary
from edge.policy.tokenizer import build_word_tokenizer
from edge.rollout import rollout

CHAT_TEMPLATE = ("{% for m in messages %}[BOS] {{ m['role'] }} : {{ m['content'] }} [EOS]{% endfor %}"
                 "{% if add_generation_prompt %}[BOS] assistant :{% endif %}")


def save_small_model(folder):
    tokenizer = build_word_tokenizer(tiny_vocabulary(["household"]) | {"user", "assistant"})
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         tie_word_embeddings=True, pad_token_id=0, bos_token_id=2, eos_token_id=3)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def test_local_model_trains_in_generate_mode_with_lora_and_adapter_reloads(tmp_path):
    base = tmp_path / "small-qwen2"
    save_small_model(base)
    cfg = PolicyConfig(model=str(base), mode="generate", max_new_tokens=8, temperature=1.0,
                       lora=LoraConfig(enabled=True, r=4, alpha=8))
    policy = load_policy(cfg)
    assert policy.uses_lora
    actor = Actor(policy)
    assert actor.builder.chat  # the chat template wraps the prompt
    tasks = generate_tasks("train", 2, seed=0)
    trajs = rollout(actor, tasks, 3, 0, max_steps=3)
    assert all(len(t.steps) == 3 for t in trajs)
    # An untrained model mostly emits no <action> tag: invalid, counted, penalised, never raised.
    assert sum(t.invalid_actions for t in trajs) > 0
    assert all(t.reward == -cfg.invalid_penalty * t.invalid_actions for t in trajs)
    for i, t in enumerate(trajs):
        t.reward = float(i % 2)
    samples, _ = grpo_samples(trajs)
    assert samples and all(s.response_ids and len(s.old_logp) == len(s.response_ids) for s in samples)
    lora_before = {n: p.detach().clone() for n, p in policy.model.named_parameters() if p.requires_grad}
    frozen_before = {n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad}
    optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=1e-2)
    update = UpdateConfig(lr=1e-2, epochs=1, minibatches=2, clip_low=0.2, clip_high=0.28, beta=0.05,
                          loss_agg="token-mean", max_grad_norm=1.0)
    metrics = policy_update(actor, optimizer, samples, update, torch.Generator().manual_seed(0))
    assert metrics["grad_norm"] > 0
    named = dict(policy.model.named_parameters())
    assert set(lora_before) <= set(named)
    assert any(not torch.equal(named[n], p) for n, p in lora_before.items())  # the adapter learnt
    assert all(torch.equal(named[n], p) for n, p in frozen_before.items())  # the base did not move
    with torch.no_grad():
        expected = sample_logprobs(actor, samples[:5])
    adapter = save_policy(policy, tmp_path / "adapter")
    assert (adapter / "adapter_config.json").exists() and not (adapter / "model.safetensors").exists()
    reloaded = Actor(load_policy(cfg, checkpoint=adapter))
    with torch.no_grad():
        again = sample_logprobs(reloaded, samples[:5])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(expected, again))


def test_reference_is_the_base_with_adapter_disabled(tmp_path):
    base = tmp_path / "small-qwen2"
    save_small_model(base)
    cfg = PolicyConfig(model=str(base), lora=LoraConfig(enabled=True, r=4, alpha=8))
    policy = load_policy(cfg)
    for p in policy.model.parameters():  # perturb the adapter so policy and base differ
        if p.requires_grad:
            torch.nn.init.normal_(p, std=0.5)
    ids = torch.tensor([[2, 10, 11, 12]])
    plain_base = load_policy(PolicyConfig(model=str(base))).model
    with torch.no_grad(), policy.reference() as ref:
        ref_logits = ref(ids).logits
    with torch.no_grad():
        assert torch.allclose(ref_logits, plain_base(ids).logits, atol=1e-5)
        assert not torch.allclose(policy.model(ids).logits, ref_logits, atol=1e-3)
