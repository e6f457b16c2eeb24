"""The words of WebShop's data, for the tiny model's word-level tokenizer.

Everything a policy must tell apart is in: the page text, every goal instruction, every suggested
query, every product's asin, title, price and option names and values, and the actions that click
them. Descriptions and feature bullets are long free text that only the sub-pages show; of their
words we keep the ``text_words`` most frequent, since the output layer's cost grows with the
vocabulary (the full 1,000-product catalog's descriptions alone hold tens of thousands of words).
A word outside the vocabulary becomes the tokenizer's unknown token; it never fails.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from pathlib import Path

from edge.envs.shop.vocab import FIXED_CLICKS, PAGE_TEXT
from edge.envs.webshop.data import WebShopData, load_data
from edge.envs.webshop.goals import SPLITS, GoalKind, generate_tasks
from edge.text import split_words

TEXT_WORDS = 2000
"""How many of the most frequent description and feature words to keep."""


@lru_cache(maxsize=4)
def _vocabulary(data: WebShopData, goals: GoalKind, text_words: int) -> frozenset[str]:
    texts: list[str] = [*PAGE_TEXT, *(f"click[{label}]" for label in FIXED_CLICKS), "a an"]
    texts += [str(i) for i in range(1000)] + [f"{i:02d}" for i in range(100)]  # pages, counts, scores, prices
    for product in data.products:
        texts += [product.asin, f"click[{product.asin.lower()}]", product.title, product.price_text,
                  product.category, product.product_type, *product.attributes]
        for name, values in product.options.items():
            texts += [name, *values, *(f"click[{v.lower()}]" for v in values)]
    for split in SPLITS:
        try:
            tasks = generate_tasks(split, 10**9, data_dir=data.folder, goals=goals)
        except ValueError:  # a folder too small for a train split still has test goals
            continue
        for task in tasks:
            texts += [task.instruction, *task.spec["attributes"], *task.spec["options"].values()]
            texts += [f"search[{q}]" for q in task.spec["search_queries"]]
    words = {w for text in texts for w in split_words(text)}
    counts = Counter(w for p in data.products for text in (p.description, *p.features) for w in split_words(text)
                     if w not in words)
    return frozenset(words | {w for w, _ in counts.most_common(text_words)})


def vocabulary(data_dir: str | Path | None = None, goals: GoalKind = "auto", text_words: int = TEXT_WORDS) -> set[str]:
    """Every word the WebShop pages, goals and actions use (see the module doc for what is capped)."""
    return set(_vocabulary(load_data(data_dir), goals, text_words))
