"""The tiny model, prompts, and both action modes."""

import torch

from edge.config import PolicyConfig
from edge.envs.household import generate_tasks, make_env
from edge.policy.actor import Actor, draw, parse_action, uniforms
from edge.policy.model import load_policy, save_policy
from edge.policy.prompt import AgentState, PromptBuilder, PromptTooLong


def household_state(experience=None, history=()):
    task = generate_tasks("train", 1, seed=0)[0]
    first = make_env().reset(task)
    return AgentState(task.instruction, first.observation, first.admissible_actions, list(history), experience)


def tiny_actor(**overrides) -> Actor:
    return Actor(load_policy(PolicyConfig(**overrides), seed=0, envs=["household"]))


def test_tiny_model_and_tokenizer_reload_with_auto_classes(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    actor = tiny_actor()
    save_policy(actor.policy, tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    assert model.config.model_type == "llama" and model.config.hidden_size == 64
    text = "go to fridge 1"
    assert tokenizer(text)["input_ids"] == actor.policy.tokenizer(text)["input_ids"]
    ids = tokenizer("take apple 1 from countertop 1", add_special_tokens=False)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    ids = torch.tensor([[2, 5, 6, 7]])
    assert torch.allclose(model(ids).logits, actor.policy.model(ids).logits)


def test_score_mode_probabilities_sum_to_one_and_packing_matches_separate_scoring():
    actor = tiny_actor()
    state = household_state()
    prompt = actor.builder.prompt_ids(state)
    candidates = [actor.builder.action_ids(a) for a in state.admissible]
    with torch.no_grad():
        logp = actor.action_logprobs([prompt], [candidates])[0]
        packed = actor.candidate_scores([prompt], [candidates])[0]
        separate = torch.stack([actor.candidate_scores([prompt], [[c]])[0][0] for c in candidates])
    assert len(logp) == len(state.admissible)
    assert abs(float(logp.exp().sum()) - 1.0) < 1e-5
    assert torch.allclose(packed, separate, atol=1e-4)
    # Packing shares one prompt across candidates: far fewer tokens than one row per candidate.
    assert len(prompt) + sum(map(len, candidates)) < 0.3 * sum(len(prompt) + len(c) for c in candidates)


def test_micro_batches_of_mixed_lengths_return_each_row_in_input_order():
    actor = tiny_actor(micro_batch_size=2)
    history = [("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed.")]
    states = [household_state(), household_state(history=history * 3), household_state(history=history),
              household_state(experience="try : look in the fridge .")]
    prompts = [actor.builder.prompt_ids(s) for s in states]
    candidates = [[actor.builder.action_ids(a) for a in s.admissible[:k]] for s, k in zip(states, (5, 2, 9, 3))]
    assert len({len(p) for p in prompts}) == 4  # rows of different widths, so the order is reshuffled
    with torch.no_grad():
        together = actor.candidate_scores(prompts, candidates)
        alone = [actor.candidate_scores([p], [c])[0] for p, c in zip(prompts, candidates)]
    assert [len(t) for t in together] == [5, 2, 9, 3]
    for a, b in zip(together, alone):
        assert torch.allclose(a, b, atol=1e-4)


def test_act_samples_admissible_actions_reproducibly():
    actor = tiny_actor()
    states = [household_state()] * 6
    a = actor.act(states, [torch.Generator().manual_seed(i) for i in range(6)])
    b = actor.act(states, [torch.Generator().manual_seed(i) for i in range(6)])
    assert [d.action for d in a] == [d.action for d in b]
    assert all(d.action in states[0].admissible and d.chosen == states[0].admissible.index(d.action) for d in a)
    # A state's choice depends on its own stream only, not on the batch it is in.
    alone = actor.act(states[3:4], [torch.Generator().manual_seed(3)])[0]
    assert alone.action == a[3].action
    greedy = actor.act(states[:1], [torch.Generator().manual_seed(5)], greedy=True)[0]
    logp = actor.action_logprobs([greedy.prompt_ids], [greedy.candidate_ids])[0]
    assert greedy.chosen == int(torch.argmax(logp))


def test_prompt_budget_drops_old_history_first_and_keeps_task_experience_actions():
    tok = tiny_actor().policy.tokenizer
    history = [(f"go to drawer {i}", f"You arrive at drawer {i}. The drawer {i} is closed.") for i in range(1, 6)]
    base = household_state(experience="try : look for apple in fridge , countertop .")
    state = AgentState(base.instruction, "You arrive at drawer 5. The drawer 5 is closed.", base.admissible,
                       history, base.experience)
    roomy = PromptBuilder(tok, PolicyConfig(history_steps=5, max_prompt_tokens=1000, list_actions=True))
    full = roomy.prompt_ids(state)
    one_step = len(tok("\n> go to drawer 1 | You arrive at drawer 1. The drawer 1 is closed.",
                       add_special_tokens=False)["input_ids"])
    budget = len(full) - 2 * one_step  # room for all but the two oldest steps
    tight = PromptBuilder(tok, PolicyConfig(history_steps=5, max_prompt_tokens=budget, list_actions=True))
    ids = tight.prompt_ids(state)
    text = tok.decode(ids)
    assert len(ids) <= budget
    assert "look for apple in fridge" in text and "task :" in text
    assert " ; ".join(state.admissible).split(" ; ")[-1] in text and text.count(" ; ") == len(state.admissible) - 1
    assert "drawer 5 |" in text and "drawer 3 |" in text  # newest history kept
    assert "drawer 1 |" not in text and "drawer 2 |" not in text  # oldest dropped first
    assert "drawer 1 |" in tok.decode(full)
    too_small = PromptBuilder(tok, PolicyConfig(max_prompt_tokens=40, list_actions=True))
    try:
        too_small.prompt_ids(state)
        raise AssertionError("a budget below task + experience + actions must be refused")
    except PromptTooLong as err:
        assert "max_prompt_tokens" in str(err)


def test_parse_action_matches_admissible_spelling_insensitively():
    admissible = ["go to fridge 1", "put apple 1 in/on countertop 1"]
    assert parse_action("<action> put apple 1 in / on countertop 1 </action>", admissible) == (admissible[1], 1)
    assert parse_action("<action>Go to fridge 1</action> extra", admissible) == (admissible[0], 0)
    assert parse_action("<action>fly</action>", admissible) == ("fly", -1)
    assert parse_action("go to fridge 1", admissible) == ("go to fridge 1", -1)  # no tags: invalid


def test_inverse_cdf_draw_follows_the_distribution_and_never_picks_impossible_actions():
    probs = torch.tensor([[0.0, 0.25, 0.0, 0.75]])
    generator = torch.Generator().manual_seed(0)
    picks = [int(draw(probs, uniforms([generator]))[0]) for _ in range(4000)]
    assert set(picks) == {1, 3}
    assert abs(picks.count(3) / len(picks) - 0.75) < 0.03
    # The same uniform number picks the same action from two close distributions (common random numbers).
    near = torch.tensor([[0.0, 0.26, 0.0, 0.74]])
    u = torch.tensor([0.5], dtype=torch.float64)
    assert int(draw(probs, u)[0]) == int(draw(near, u)[0]) == 3


def test_generate_mode_samples_per_row_streams_and_greedy_matches_transformers_generate():
    policy = load_policy(PolicyConfig(mode="generate", max_new_tokens=6), seed=0, envs=["household"])
    actor = Actor(policy)
    state = household_state()
    prompts = [actor.builder.prompt_ids(state), actor.builder.prompt_ids(state)[:-3]]
    gens = lambda: [torch.Generator().manual_seed(7), torch.Generator().manual_seed(8)]  # noqa: E731
    both = actor.generate(prompts, gens(), greedy=False)
    assert both == actor.generate(prompts, gens(), greedy=False)
    # Row 1 alone, from its own stream, samples what it sampled beside row 0 (left padding and the
    # KV cache change nothing).
    assert actor.generate(prompts[1:], gens()[1:], greedy=False)[0] == both[1]
    greedy = actor.generate(prompts[:1], gens()[:1], greedy=True)[0]
    ids = torch.tensor([prompts[0]])
    with torch.inference_mode():
        reference = policy.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                          max_new_tokens=6, pad_token_id=actor.pad_id,
                                          eos_token_id=policy.tokenizer.eos_token_id)[0, ids.shape[1]:].tolist()
    eos = policy.tokenizer.eos_token_id
    assert greedy == (reference[: reference.index(eos) + 1] if eos in reference else reference)
