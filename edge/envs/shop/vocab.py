"""Every word the shop can show or accept, for building a word-level tokenizer.

Words are what :func:`split_words` makes of a text: lowercased runs of word characters, and runs
of other non-space characters (``[``, ``]``, ``$``, ``:``, and ``[<`` in ``click[< prev]``). This is
the split of ``edge.policy.tokenizer.split_words`` (the tokenizer's ``Whitespace`` pre-tokenizer),
repeated here so the environment does not import the model stack.

Free-text search queries are the one thing outside the vocabulary: the environment accepts any
query but never echoes it back.
"""

from __future__ import annotations

import re
from functools import lru_cache

from edge.envs.shop.catalog import CATEGORIES, DEFAULT_CATALOG_SEED, PRODUCT_TYPES, build_catalog
from edge.envs.shop.goals import PRICE_CLAUSE, TEMPLATES
from edge.text import split_words

# Fixed text of the pages (see env.py).
PAGE_TEXT = (
    "WebShop [SEP] Instruction: [SEP] Search",
    "Back to Search [SEP] Page 1 (Total results: 50) [SEP] < Prev [SEP] Next >",
    "Price: $1.00 [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now",
    "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0)",
)
FIXED_CLICKS = ("back to search", "< prev", "next >", "description", "features", "reviews", "buy now")


@lru_cache(maxsize=4)
def _vocabulary(catalog_seed: int) -> frozenset[str]:
    texts: list[str] = [*PAGE_TEXT, *CATEGORIES]
    instruction_parts = [re.sub(r"\{\w+\}", " ", t) for t in (*TEMPLATES, PRICE_CLAUSE)]
    texts += instruction_parts + ["a an"]
    # Action strings are written out whole because brackets glue onto neighbouring punctuation.
    phrases = [p.split()[0] for p in instruction_parts[:-1]]  # how suggested queries start
    for ptype in PRODUCT_TYPES:
        phrases += [ptype.name, *ptype.attributes]
        for name, values in ptype.options:
            phrases += [name, *values]
    texts += phrases + [f"search[{p}]" for p in phrases] + [f"click[{p}]" for p in phrases]
    texts += [f"click[{label}]" for label in FIXED_CLICKS]
    for product in build_catalog(catalog_seed).products:
        texts += [product.asin, f"click[{product.asin.lower()}]", product.title,
                  product.description, *product.features]
    # Numbers: prices, price bounds, page numbers, result counts and the final score's digits.
    texts += [str(i) for i in range(1000)] + [f"{i:02d}" for i in range(100)]
    words: set[str] = set()
    for text in texts:
        words.update(split_words(text))
    return frozenset(words)


def vocabulary(catalog_seed: int = DEFAULT_CATALOG_SEED) -> set[str]:
    """Every word that can appear in the shop's observations, instructions and admissible actions."""
    return set(_vocabulary(catalog_seed))
