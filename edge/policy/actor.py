"""Choosing actions with a language model, in two modes behind one interface.

``score`` (the default): the policy is a distribution over the admissible actions,
``pi(a|s) = softmax_a(l(a|s) / T)`` where ``l`` is the summed token log-probability of the action
after the prompt (or, with ``policy.action_score: mean``, its mean per token: an untrained model's
sum favours the shortest action). One *packed row* per state holds the prompt followed by every candidate; a 4-D
attention mask lets each candidate see the prompt and itself only, and positions restart after the
prompt, so one forward pass scores all candidates exactly as separate passes would, with about
ten times fewer tokens.

``generate``: the model samples text; the action is read from ``<action>...</action>`` and matched
to an admissible one. Unparseable or inadmissible output is an invalid action (the environment
answers it as the benchmark would, and the rollout counts it).

Both return the log-probabilities the update needs: the candidate-normalised log-probability of the
chosen action (score), or per-token log-probabilities of the sampled text (generate).

Randomness is per state: ``act`` takes one generator per state (in a rollout, one per episode), and
every draw is one uniform number from that generator turned into a choice by the inverse of the
policy's cumulative distribution (``draw``). So an episode's choices depend on its own stream only,
not on which other episodes share the batch or when they end (common random numbers: a plain and a
scaffolded evaluation of a task that retrieves nothing replay the same episode), and two close
policies given the same number mostly choose the same action. The generators stay on the CPU
whatever device the model is on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from edge.policy.model import Policy
from edge.policy.prompt import AgentState, PromptBuilder
from edge.text import split_words

ACTION_TAG = re.compile(r"<\s*action\s*>(.*?)<\s*/\s*action\s*>", re.S | re.I)


@dataclass
class Decision:
    action: str
    """The text sent to the environment."""
    prompt_ids: list[int]
    candidate_ids: list[list[int]] | None
    """Score mode: every admissible action's tokens (in ``AgentState.admissible`` order)."""
    chosen: int
    """Index of the chosen candidate; -1 when a generated action matched none."""
    response_ids: list[int] | None
    """Generate mode: the sampled tokens."""
    logp: list[float]
    """Score mode: [log pi(a|s)] over candidates; generate mode: one value per sampled token."""
    invalid: bool = False
    entropy: float = 0.0


def action_key(text: str) -> str:
    """A spelling-insensitive key: 'put apple 1 in / on x' and 'put apple 1 in/on x' match."""
    return " ".join(split_words(text))


def parse_action(text: str, admissible: list[str]) -> tuple[str, int]:
    """(action text to send, index in ``admissible`` or -1)."""
    found = ACTION_TAG.search(text)
    if not found:
        return text.strip(), -1
    wanted = action_key(found.group(1))
    for i, action in enumerate(admissible):
        if action_key(action) == wanted:
            return action, i
    return found.group(1).strip(), -1


def uniforms(generators: list[torch.Generator], device: torch.device | str = "cpu") -> torch.Tensor:
    """One uniform number in [0, 1) from each generator (CPU generators, float64), on ``device``."""
    u = torch.stack([torch.rand((), generator=g, dtype=torch.float64) for g in generators])
    return u.to(device)


def draw(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling: for each row of ``probs`` (batch x choices) the first index whose
    cumulative probability exceeds ``u`` times the row's total (in float64, so rows need not be
    normalised exactly)."""
    cdf = probs.double().cumsum(-1)
    index = torch.searchsorted(cdf, (u.to(cdf.device) * cdf[:, -1])[:, None], right=True)[:, 0]
    return index.clamp(max=probs.shape[-1] - 1)


def pick_positions(hidden: torch.Tensor, rows: list[int], positions: list[int]) -> torch.Tensor:
    """``hidden[rows, positions]`` as one ``index_select`` on the flattened batch. Many candidates are
    predicted from the same position (the prompt's last token), and the backward of advanced indexing
    with repeated indices accumulates in a thread-timing-dependent order on a multi-core CPU, so
    identical updates could differ in the last bits; ``index_select``'s backward sums in a fixed order."""
    batch, width, size = hidden.shape
    flat = torch.tensor(rows, device=hidden.device) * width + torch.tensor(positions, device=hidden.device)
    return hidden.reshape(batch * width, size).index_select(0, flat)


def head_logits(lm_head: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """The output layer's logits in float32. A bf16/fp16 model's own head rounds the logits to its
    dtype (bf16 keeps 8 bits of mantissa: log-probabilities off by ~0.01-0.1), and those logits
    enter PPO ratios and KL terms, so a half-precision plain linear head is applied in float32; a
    float32 model's head is called as it is (same numbers as before)."""
    weight = getattr(lm_head, "weight", None)
    if type(lm_head) is torch.nn.Linear and weight is not None and weight.dtype != torch.float32:
        bias = None if lm_head.bias is None else lm_head.bias.float()
        return torch.nn.functional.linear(hidden.float(), weight.float(), bias)
    return lm_head(hidden).float()


def packed_attention_mask(allowed: torch.Tensor, implementation: str, dtype: torch.dtype) -> torch.Tensor:
    """The 4-D mask (batch x 1 x query x key) in the form the attention kernel honours. sdpa takes a
    boolean mask (True: may attend); eager attention *adds* the mask to its scores, so a boolean mask
    there adds 0 or 1 and masks nothing: it gets 0 where allowed and the dtype's lowest value elsewhere.
    Other kernels (flash attention) ignore a 4-D mask, so they are refused rather than silently
    letting candidates see each other."""
    allowed = allowed[:, None]
    if implementation == "sdpa":
        return allowed
    if implementation == "eager":
        additive = torch.zeros(allowed.shape, dtype=dtype)
        return additive.masked_fill(~allowed, torch.finfo(dtype).min)
    raise ValueError(f"attention implementation {implementation!r} does not honour the packed 4-D mask of "
                     "score mode; set policy.attn_implementation to 'sdpa' or 'eager'")


class Actor:
    def __init__(self, policy: Policy, builder: PromptBuilder | None = None):
        self.policy = policy
        self.builder = builder or PromptBuilder(policy.tokenizer, policy.config)
        self.cfg = policy.config
        model = policy.model
        self.backbone = model.get_decoder()
        self.lm_head = model.get_output_embeddings()
        pad = policy.tokenizer.pad_token_id
        self.pad_id = 0 if pad is None else pad

    def attention_kernel(self) -> str:
        """The attention implementation the model runs with (the reference model's, under
        ``using_reference``, is loaded the same way)."""
        config = getattr(self.backbone, "config", None) or self.policy.model.config
        return getattr(config, "_attn_implementation", None) or "sdpa"

    # ----- acting --------------------------------------------------------------------------
    def act(self, states: list[AgentState], generators: list[torch.Generator], greedy: bool = False) -> list[Decision]:
        """One decision per state; ``generators[i]`` is the random stream of ``states[i]``'s episode."""
        if not states:
            return []
        if len(generators) != len(states):
            raise ValueError(f"act: {len(states)} states need as many generators, got {len(generators)}")
        if self.cfg.mode == "score":
            return self._act_score(states, generators, greedy)
        return self._act_generate(states, generators, greedy)

    def _act_score(self, states, generators, greedy) -> list[Decision]:
        prompts = [self.builder.prompt_ids(s) for s in states]
        candidates = [[self.builder.action_ids(a) for a in s.admissible] for s in states]
        with torch.inference_mode():
            logps = self.action_logprobs(prompts, candidates)
        decisions = []
        for state, prompt, cands, logp, generator in zip(states, prompts, candidates, logps, generators):
            if greedy:
                chosen = int(torch.argmax(logp))
            else:
                chosen = int(draw(logp.exp()[None], uniforms([generator], logp.device))[0])
            entropy = float(-(logp.exp() * logp).sum())
            decisions.append(Decision(state.admissible[chosen], prompt, cands, chosen, None,
                                      [float(logp[chosen])], entropy=entropy))
        return decisions

    def _act_generate(self, states, generators, greedy) -> list[Decision]:
        tok = self.policy.tokenizer
        prompts = [self.builder.prompt_ids(s) for s in states]
        responses = self.generate(prompts, generators, greedy)
        with torch.inference_mode():
            token_logps = self.token_logprobs(prompts, responses)
        decisions = []
        for state, prompt, response, logp in zip(states, prompts, responses, token_logps):
            text = tok.decode(response, skip_special_tokens=True)
            action, index = parse_action(text, state.admissible)
            decisions.append(Decision(action, prompt, None, index, response, logp.tolist(), invalid=index < 0))
        return decisions

    # ----- score mode: packed rows ----------------------------------------------------------
    def candidate_scores(self, prompts: list[list[int]], candidates: list[list[list[int]]]) -> list[torch.Tensor]:
        """Summed token log-probability of every candidate after its prompt (grad follows the
        caller's mode). Rows are processed in micro-batches of ``policy.micro_batch_size``."""
        sizes = [len(p) + sum(map(len, cands)) for p, cands in zip(prompts, candidates)]
        return self._in_micro_batches(self._score_packed, prompts, candidates, sizes)

    def _in_micro_batches(self, forward, prompts: list, others: list, sizes: list[int]) -> list[torch.Tensor]:
        """Apply ``forward`` to rows in micro-batches of similar ``sizes`` (a batch is as wide as its
        longest row, so mixing lengths wastes compute on padding); results come back in input order."""
        order = sorted(range(len(prompts)), key=lambda i: sizes[i])
        out: list[torch.Tensor | None] = [None] * len(prompts)
        step = self.cfg.micro_batch_size
        for start in range(0, len(order), step):
            part = order[start:start + step]
            for i, result in zip(part, forward([prompts[i] for i in part], [others[i] for i in part])):
                out[i] = result
        return out

    def action_logprobs(self, prompts, candidates) -> list[torch.Tensor]:
        """log pi(.|s) over each state's candidates: log-softmax of scores / temperature, the score
        being the summed token log-probability, or its mean per token (``policy.action_score``)."""
        scores = self.candidate_scores(prompts, candidates)
        if self.cfg.action_score == "mean":
            scores = [s / torch.tensor([len(c) for c in cands], device=s.device, dtype=s.dtype)
                      for s, cands in zip(scores, candidates)]
        return [torch.log_softmax(s / self.cfg.temperature, dim=-1) for s in scores]

    def _score_packed(self, prompts, candidates) -> list[torch.Tensor]:
        device = self.policy.device
        # Each token of a row gets a segment (0: prompt, c + 1: candidate c, -1: padding) and a
        # position (candidates restart at the prompt's length). Python lists are built first and
        # turned into tensors once: per-candidate tensor ops cost more than the forward pass here.
        id_rows, pos_rows, seg_rows = [], [], []
        rows, predictors, targets, owners = [], [], [], []
        n_candidates = 0
        for b, (prompt, cands) in enumerate(zip(prompts, candidates)):
            p = len(prompt)
            ids, pos, seg = list(prompt), list(range(p)), [0] * p
            for c, cand in enumerate(cands):
                n, start = len(cand), len(ids)
                ids += cand
                pos += range(p, p + n)
                seg += [c + 1] * n
                # Token j of a candidate is predicted at position j-1; its first token at the
                # prompt's last position.
                predictors += [p - 1, *range(start, start + n - 1)]
                targets += cand
                rows += [b] * n
                owners += [n_candidates] * n
                n_candidates += 1
            id_rows.append(ids)
            pos_rows.append(pos)
            seg_rows.append(seg)
        width = max(len(r) for r in id_rows)
        ids = torch.tensor([r + [self.pad_id] * (width - len(r)) for r in id_rows])
        positions = torch.tensor([r + [0] * (width - len(r)) for r in pos_rows])
        segment = torch.tensor([r + [-1] * (width - len(r)) for r in seg_rows])
        query, key = segment[:, :, None], segment[:, None, :]
        causal = torch.ones((width, width), dtype=torch.bool).tril()
        # A token sees earlier tokens of the prompt and of its own segment; padding sees padding
        # only (so no row of the mask is empty).
        allowed = causal & ((key == query) | ((key == 0) & (query >= 0)))
        dtype = self.backbone.get_input_embeddings().weight.dtype
        mask = packed_attention_mask(allowed, self.attention_kernel(), dtype)
        hidden = self.backbone(input_ids=ids.to(device), attention_mask=mask.to(device),
                               position_ids=positions.to(device), use_cache=False).last_hidden_state
        logits = head_logits(self.lm_head, pick_positions(hidden, rows, predictors))
        token_logp = torch.log_softmax(logits, dim=-1).gather(
            1, torch.tensor(targets, device=device)[:, None]).squeeze(1)
        scores = torch.zeros(n_candidates, device=device, dtype=token_logp.dtype)
        scores = scores.index_add(0, torch.tensor(owners, device=device), token_logp)
        return list(scores.split([len(c) for c in candidates]))

    # ----- generate mode --------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], generators: list[torch.Generator], greedy: bool) -> list[list[int]]:
        """Sample a response per prompt, token by token from exactly softmax(logits / T) (no top-k,
        top-p or penalties: the distribution the update's log-probabilities describe), each row from
        its own generator. Left-padded batch with a KV cache; a response ends with EOS (kept) or at
        ``policy.max_new_tokens``."""
        tok, device = self.policy.tokenizer, self.policy.device
        eos = tok.eos_token_id
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for b, p in enumerate(prompts):
            ids[b, width - len(p):] = torch.tensor(p)
            attention[b, width - len(p):] = 1
        ids, attention = ids.to(device), attention.to(device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        responses: list[list[int]] = [[] for _ in prompts]
        open_rows = list(range(len(prompts)))
        past = None
        with torch.inference_mode():
            for _ in range(self.cfg.max_new_tokens):
                # The backbone and our own head, not ``model.generate``: no processor from the
                # checkpoint's generation_config (repetition penalty, top-k/p) reshapes the
                # distribution, and the logits are float32 as in ``token_logprobs``. transformers 5
                # names the KV cache ``cache`` (``past_key_values`` is deprecated).
                out = self.backbone(input_ids=ids, attention_mask=attention, position_ids=positions,
                                    cache=past, use_cache=True)
                past = out.cache
                # Only rows still open draw: a stream is the episode's for all its steps, so a row that
                # ended must not use up numbers while its batch-mates go on.
                logits = head_logits(self.lm_head, out.last_hidden_state[open_rows, -1, :])
                if greedy:
                    drawn = logits.argmax(-1)
                else:
                    probs = torch.softmax(logits / self.cfg.temperature, dim=-1)
                    drawn = draw(probs, uniforms([generators[b] for b in open_rows], device))
                # Finished rows keep stepping (a batch moves together) on padding, which nothing reads.
                tokens = [self.pad_id] * len(prompts)
                for b, token in zip(list(open_rows), drawn.tolist()):
                    tokens[b] = token
                    responses[b].append(token)
                    if token == eos:
                        open_rows.remove(b)
                if not open_rows:
                    break
                ids = torch.tensor(tokens, device=device)[:, None]
                attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
                positions = positions[:, -1:] + 1
        return [r or [eos] for r in responses]

    def token_logprobs(self, prompts: list[list[int]], responses: list[list[int]]) -> list[torch.Tensor]:
        """Per-token log-probabilities (at the sampling temperature) of each response after its prompt."""
        sizes = [len(p) + len(r) for p, r in zip(prompts, responses)]
        return self._in_micro_batches(self._teacher_forced, prompts, responses, sizes)

    def _teacher_forced(self, prompts, responses) -> list[torch.Tensor]:
        device = self.policy.device
        seqs = [p + r for p, r in zip(prompts, responses)]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(seqs), width), dtype=torch.long)
        for b, s in enumerate(seqs):
            ids[b, :len(s)] = torch.tensor(s)
            attention[b, :len(s)] = 1
        hidden = self.backbone(input_ids=ids.to(device), attention_mask=attention.to(device),
                               use_cache=False).last_hidden_state
        rows, predictors, targets = [], [], []
        for b, (p, r) in enumerate(zip(prompts, responses)):
            rows += [b] * len(r)
            predictors += range(len(p) - 1, len(p) + len(r) - 1)
            targets += r
        logits = head_logits(self.lm_head, pick_positions(hidden, rows, predictors))
        logp = torch.log_softmax(logits / self.cfg.temperature, dim=-1)
        logp = logp.gather(1, torch.tensor(targets, device=device)[:, None]).squeeze(1)
        return list(logp.split([len(r) for r in responses]))
