"""A word-level tokenizer for the tiny model, built offline from the environments' vocabulary.

A 32k-piece vocabulary makes a 64-wide model spend most of its time in the output layer; the
built-in environments use a few thousand words, so one token per word keeps the model tiny and
makes every action a short, exact token sequence.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

PAD, UNK, BOS, EOS = "[PAD]", "[UNK]", "[BOS]", "[EOS]"
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS)


def build_word_tokenizer(words: Iterable[str]) -> PreTrainedTokenizerFast:
    """One id per word; ids are assigned in sorted order so the same words give the same ids."""
    vocab_words = sorted({w.lower() for w in words} - set(SPECIAL_TOKENS))
    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *vocab_words])}
    core = Tokenizer(WordLevel(vocab, unk_token=UNK))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, unk_token=UNK,
                                   bos_token=BOS, eos_token=EOS)
