"""How text splits into words, everywhere: the word-level tokenizer's ``Whitespace`` pre-tokenizer split
(runs of word characters, runs of punctuation), lower-cased. No heavy imports, so environments and the
bank can use it without loading transformers."""

from __future__ import annotations

import re

_WORDS = re.compile(r"\w+|[^\w\s]+")


def split_words(text: str) -> list[str]:
    """``"click[< prev]"`` -> ``["click", "[<", "prev", "]"]``."""
    return _WORDS.findall(text.lower())
