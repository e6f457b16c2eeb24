"""Loading the policy's language model: the built-in tiny model or any Hugging Face causal LM.

``policy.model: tiny`` builds a small Llama from a transformers config with a word-level tokenizer;
anything else is a hub id or local path loaded with the ``Auto*`` classes. LoRA goes through peft.
Both kinds are saved with ``save_pretrained`` and come back with the same loader, so a checkpoint
folder is all a later stage needs.
"""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformers.utils import logging as transformers_logging

from edge.config import LoraConfig, PolicyConfig, TinyModelConfig
from edge.files import IntegrityError, seal_folder, verify_folder
from edge.policy.tokenizer import build_word_tokenizer
from edge.text import split_words

# Words the prompt itself uses (section labels, separators, generate-mode tags).
PROMPT_WORDS = split_words(
    "task : experience : history : observation : actions : action : > | ; , . <action> </action> "
    "try avoid recover step"
)
# Words of advice every tiny model carries, whatever its environments: the words the guidance of the
# first built-in environments used. Frozen, because the tokenizer's ids (so every warm start and
# result) depend on the word set; an environment's own guidance words come from its knowledge.
ADVICE_WORDS = split_words(
    "a above after already an and attributes back before buy buying clean click closed cool every find for "
    "going heat if in inside instruction is it item lamp look names now one open option place price put "
    "receptacle search searched second take the to use whose with x y you z"
)

transformers_logging.disable_progress_bar()  # per-load bars would drown the training progress

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Policy:
    """A language model with its tokenizer, ready to score or generate actions."""

    model: torch.nn.Module
    tokenizer: object
    config: PolicyConfig

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def uses_lora(self) -> bool:
        return hasattr(self.model, "peft_config")

    @contextmanager
    def reference(self):
        """The frozen reference for the KL term: the base with the adapter disabled under LoRA,
        otherwise ``_reference`` if the caller set one (training sets the warm-started base), else a
        frozen copy of the current weights taken the first time it is asked for."""
        if self.uses_lora:
            with self.model.disable_adapter():
                yield self.model
            return
        if not hasattr(self, "_reference"):
            self._reference = copy.deepcopy(self.model).eval().requires_grad_(False)
        yield self._reference


def tiny_vocabulary(envs: list[str]) -> set[str]:
    """Every word of the given environments, the prompt and the guidance templates. The output
    layer costs in proportion to the vocabulary, so a model for one environment carries only its
    words (household: a few hundred; shop adds product ids and prices: a few thousand)."""
    from edge.envs.registry import get_entry
    from edge.guidance import guidance_vocabulary

    words = set(PROMPT_WORDS) | set(ADVICE_WORDS) | guidance_vocabulary(envs)
    for env in envs:
        module = get_entry(env).load()
        if not hasattr(module, "vocabulary"):
            raise ValueError(f"environment {env!r} has no fixed vocabulary; use a pretrained model for it")
        words |= module.vocabulary()
    return words


def build_tiny_model(cfg: TinyModelConfig, vocab_size: int, seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads, max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=True, pad_token_id=0, bos_token_id=2, eos_token_id=3,
    )
    return LlamaForCausalLM(config)


def _apply_lora(model, cfg: LoraConfig):
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    lora = PeftLoraConfig(r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                          target_modules=list(cfg.target_modules), task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def load_policy(cfg: PolicyConfig, checkpoint: Path | str | None = None, seed: int = 0,
                envs: list[str] = ("household", "shop")) -> Policy:
    """Build or load the policy.

    - ``checkpoint`` given: the folder a previous ``save_policy`` wrote (full model or adapter).
    - else ``cfg.model == "tiny"``: a fresh tiny model with a word-level tokenizer over ``envs``.
    - else: ``cfg.model`` as a hub id or local path, with LoRA if ``cfg.lora.enabled``.
    """
    dtype = DTYPES[cfg.dtype]
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        if not checkpoint.is_dir():
            raise FileNotFoundError(f"checkpoint folder {checkpoint} does not exist")
        verify_folder(checkpoint)  # every file as save_policy wrote it (a model from elsewhere has no manifest)
        try:
            tokenizer = AutoTokenizer.from_pretrained(checkpoint)
            adapter_file = checkpoint / "adapter_config.json"
            if adapter_file.exists():
                from peft import PeftModel

                base_path = json.loads(adapter_file.read_text())["base_model_name_or_path"]
                base = AutoModelForCausalLM.from_pretrained(base_path, dtype=dtype)
                model = PeftModel.from_pretrained(base, checkpoint, is_trainable=True)
            else:
                model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype)
        except Exception as err:  # whatever the loaders raise for a damaged folder, said in one line
            first = (str(err).strip().splitlines() or [""])[0][:300]
            raise IntegrityError(f"{checkpoint}: cannot be loaded as a model ({type(err).__name__}: {first})") from err
    elif cfg.model == "tiny":
        tokenizer = build_word_tokenizer(tiny_vocabulary(list(envs)))
        model = build_tiny_model(cfg.tiny, len(tokenizer), seed).to(dtype)
        if cfg.lora.enabled:
            raise ValueError("policy.lora.enabled needs a saved base model: save the tiny model first "
                             "(edge warmup does) and load it by path")
    else:
        try:
            tokenizer = AutoTokenizer.from_pretrained(cfg.model)
            model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=dtype)
        except OSError as err:
            raise ValueError(f"policy.model {cfg.model!r} is neither 'tiny' nor a loadable Hugging Face "
                             f"model id or local folder: {err}") from None
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if cfg.lora.enabled:
            model = _apply_lora(model, cfg.lora)
    pin_attention(model, cfg.attn_implementation)
    if cfg.gradient_checkpointing:
        # Non-reentrant checkpointing needs no input that requires grad, so it works under LoRA with
        # frozen embeddings as it does for full fine-tuning.
        # (transformers >= 5.2x names it activation checkpointing; older 5.x only gradient checkpointing.)
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.to(cfg.device)
    return Policy(model=model, tokenizer=tokenizer, config=cfg)


def pin_attention(model, implementation: str) -> None:
    """Run ``model`` with ``implementation`` whatever its saved config asks for: a checkpoint saved
    with ``attn_implementation: flash_attention_2`` would otherwise ignore score mode's packed mask."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(base.config, "_attn_implementation", None) != implementation:
        base.set_attn_implementation(implementation)
    if base.config._attn_implementation != implementation:
        raise ValueError(f"policy.attn_implementation {implementation!r} could not be set on {type(base).__name__}")


def save_policy(policy: Policy, folder: Path | str) -> Path:
    """``save_pretrained`` for model (or adapter) and tokenizer."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    policy.model.save_pretrained(folder)
    policy.tokenizer.save_pretrained(folder)
    seal_folder(folder)
    return folder

