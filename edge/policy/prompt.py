"""Turning an agent's state into prompt tokens, under a token budget.

The prompt has five parts: the task, an optional experience block (text retrieved from the bank),
the last K (action, observation) steps, the current observation, and optionally the admissible
actions. Parts are tokenized separately and cached (observations repeat a lot), then joined. When
the budget is exceeded, the oldest history goes first, then the front of the current observation;
the task, the experience block and the action list are never cut.

Models with a chat template get the same body wrapped in their template (user turn, then the
assistant's turn begins), so the same code drives the tiny model and an instruction-tuned LLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from edge.config import PolicyConfig


@dataclass
class AgentState:
    """What the agent knows when it must act."""

    instruction: str
    observation: str
    admissible: list[str]
    history: list[tuple[str, str]] = field(default_factory=list)
    """Earlier (action, observation) pairs, oldest first."""
    experience: str | None = None
    """The experience block, or None for the plain policy."""


class PromptTooLong(ValueError):
    pass


class PromptBuilder:
    def __init__(self, tokenizer, cfg: PolicyConfig):
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.eos_id = tokenizer.eos_token_id
        self._encode = lru_cache(maxsize=200_000)(self._encode_uncached)
        self.chat = bool(getattr(tokenizer, "chat_template", None))
        self.prefix, self.suffix = self._template_wrappers()

    def _encode_uncached(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _template_wrappers(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Token ids before and after the user's text in the model's chat template (if any)."""
        tok = self.tokenizer
        if self.chat:
            marker = "@@BODY@@"
            text = tok.apply_chat_template([{"role": "user", "content": marker}], tokenize=False,
                                           add_generation_prompt=True)
            before, _, after = text.partition(marker)
            return self._encode(before), self._encode(after)
        bos = (tok.bos_token_id,) if tok.bos_token_id is not None else ()
        return bos, ()

    def action_ids(self, action: str) -> list[int]:
        """A candidate's tokens as scored after the prompt: the action, then end-of-sequence."""
        # Without a chat template the action continues the prompt's line, hence the space.
        ids = list(self._encode(action if self.chat else f" {action}"))
        return ids + ([self.eos_id] if self.eos_id is not None else [])

    def prompt_ids(self, state: AgentState) -> list[int]:
        enc = self._encode
        head = enc(f"task : {state.instruction}")
        if state.experience:
            head += enc(f"\nexperience : {state.experience}")
        tail = ()
        if self.cfg.list_actions:
            tail += enc("\nactions : " + " ; ".join(state.admissible))
        generate = self.cfg.mode == "generate"
        tail += enc("\nanswer with <action> ... </action> .\naction :" if generate else "\naction :")
        obs_label, observation = enc("\nobservation :"), enc(f" {state.observation}")
        fixed = len(self.prefix) + len(head) + len(obs_label) + len(observation) + len(tail) + len(self.suffix)
        budget = self.cfg.max_prompt_tokens
        if fixed > budget:
            # Keep the end of the observation: in long pages the newest content comes last.
            keep = budget - (fixed - len(observation))
            if keep < 8:
                raise PromptTooLong(
                    f"policy.max_prompt_tokens={budget} cannot hold the task, experience and action list "
                    f"({fixed - len(observation)} tokens); raise it")
            observation = observation[-keep:]
            fixed = budget
        observation = obs_label + observation
        history: tuple[int, ...] = ()
        label = enc("\nhistory :")
        for action, obs in reversed(state.history[-self.cfg.history_steps:] if self.cfg.history_steps else []):
            step = enc(f"\n> {action} | {obs}")
            if fixed + len(label) + len(history) + len(step) > budget:
                break
            history = step + history
        if history:
            history = label + history
        return list(self.prefix + head + history + observation + tail + self.suffix)
