"""Shopping goals in WebShop's style, and the three task splits.

A goal is built from a *target* product: a subset of its attributes, one value of each of its
option types, and a price bound above its price, written as an instruction such as

    i need a polo shirt that is machine washable and breathable, with color: navy and size:
    large, and price lower than 40.00 dollars

Splits:

* ``train`` and ``test_seen`` target products of the *seen* product types. Their target products
  are disjoint: every fifth product of each seen type (by catalog order) is held out for
  ``test_seen``, the rest belong to ``train``. Their random streams differ too (the split name is
  part of each task's seed).
* ``test_unseen`` targets only the product types in ``UNSEEN_TYPES`` (two per category), which no
  ``train`` or ``test_seen`` goal, and no search suggestion of those splits, ever names. Their
  products are still in the catalog and can turn up in any search, as in a real shop.
"""

from __future__ import annotations

import random

from edge.envs.base import SPLITS, Task
from edge.envs.shop.catalog import (
    DEFAULT_CATALOG_SEED,
    PRODUCT_TYPES,
    TYPES_BY_NAME,
    Catalog,
    Product,
    build_catalog,
)

ENV_NAME = "shop"

UNSEEN_TYPES = frozenset({
    "rain jacket", "beanie",          # fashion
    "nail polish", "perfume",         # beauty
    "hot sauce", "trail mix",         # grocery
    "laptop stand", "webcam",         # electronics
    "garden hose", "doormat",         # home
})
SEEN_TYPES = tuple(t.name for t in PRODUCT_TYPES if t.name not in UNSEEN_TYPES)

TEST_SEEN_EVERY = 5
"""Every fifth product of a seen type is a ``test_seen`` target, the others ``train`` targets."""

PRICE_CLAUSE = ", and price lower than {price}.00 dollars"

# The attribute phrase either follows the type ("that is x and y") or precedes it ("a x and y
# ..."), like the mix of phrasings in WebShop's goals.
TEMPLATES = (
    "i need {a} {type} that is {attrs}, with {opts}",
    "i am looking for {a} {type} that is {attrs} with {opts}",
    "i want {a} {attrs} {type} with {opts}",
    "find me {a} {attrs} {type} with {opts}",
    "i'm looking for {a} {type} that is {attrs}, with {opts}",
)


def _article(word: str) -> str:
    # "usb" and "usda" are read letter by letter: "a usb cable".
    return "an" if word[0] in "aeiou" and not word.startswith("us") else "a"


def _join(items: list[str]) -> str:
    """["a"] -> "a"; ["a", "b"] -> "a and b"; ["a", "b", "c"] -> "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def price_bound(price: float, rng: random.Random) -> int:
    """A whole-ten bound above ``price``: one of the first four multiples of 10 that exceed it."""
    first = (int(price) // 10 + 1) * 10
    return rng.choice([first + 10 * k for k in range(4)])


def instruction_text(product_type: str, attributes: list[str], options: dict[str, str],
                     price_upper: int, template: int) -> str:
    """The goal sentence; ``template`` indexes ``TEMPLATES``."""
    pattern = TEMPLATES[template]
    # The article goes with whichever word follows it in this template.
    follows = attributes[0] if pattern.index("{attrs}") < pattern.index("{type}") else product_type
    body = pattern.format(a=_article(follows), type=product_type, attrs=_join(attributes),
                          opts=_join([f"{k}: {v}" for k, v in options.items()]))
    return body + PRICE_CLAUSE.format(price=price_upper)


def without_price(instruction: str) -> str:
    """The instruction minus its price clause: a natural first search query."""
    return instruction.split(", and price lower than")[0]


def target_pool(catalog: Catalog, split: str) -> list[Product]:
    """The products whose goals belong to ``split``, in catalog order."""
    pool = []
    for ptype in PRODUCT_TYPES:
        products = catalog.by_type[ptype.name]
        if split == "test_unseen":
            if ptype.name in UNSEEN_TYPES:
                pool.extend(products)
        elif ptype.name not in UNSEEN_TYPES:
            held_out = split == "test_seen"
            pool.extend(p for i, p in enumerate(products) if (i % TEST_SEEN_EVERY == 0) == held_out)
    return pool


def search_suggestions(product: Product, attributes: list[str], instruction: str, split: str,
                       rng: random.Random) -> list[str]:
    """A few candidate queries for the search page, for policies that choose from a finite list.

    The goal without its price, the type alone, the type with the goal's attributes, and two
    queries about other product types (distractors), in a per-task shuffled order. Distractors
    of ``train``/``test_seen`` tasks never name an unseen type.
    """
    allowed = [t for t in (TYPES_BY_NAME if split == "test_unseen" else SEEN_TYPES)
               if t != product.product_type]
    distractors = [f"{name} {rng.choice(TYPES_BY_NAME[name].attributes)}"
                   for name in rng.sample(sorted(allowed), 2)]
    queries = [without_price(instruction), product.product_type,
               " ".join([product.product_type, *attributes]), *distractors]
    rng.shuffle(queries)
    return queries


def make_task(product: Product, split: str, index: int, rng: random.Random,
              catalog_seed: int) -> Task:
    """One task whose goal is drawn from ``product``."""
    n_attributes = rng.choice((1, 2, 2, 3))
    attributes = rng.sample(list(product.attributes), n_attributes)
    options = {name: rng.choice(values) for name, values in product.options.items()}
    price_upper = price_bound(product.price, rng)
    instruction = instruction_text(product.product_type, attributes, options, price_upper,
                                   rng.randrange(len(TEMPLATES)))
    spec = {
        "asin": product.asin,
        "product_type": product.product_type,
        "category": product.category,
        "attributes": attributes,
        "options": options,
        "price_upper": float(price_upper),
        "search_queries": search_suggestions(product, attributes, instruction, split, rng),
        "catalog_seed": catalog_seed,
    }
    return Task(env=ENV_NAME, split=split, task_id=f"{ENV_NAME}-{split}-{index:05d}",
                task_type=product.category, instruction=instruction, spec=spec)


def generate_tasks(split: str, n: int, seed: int,
                   catalog_seed: int = DEFAULT_CATALOG_SEED) -> list[Task]:
    """The first ``n`` tasks of ``split`` for ``seed``; the same arguments give the same tasks.

    Task ``i`` draws from its own random stream keyed by (split, seed, i), so the first ``n``
    tasks do not change when more are asked for.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    pool = target_pool(build_catalog(catalog_seed), split)
    tasks = []
    for i in range(n):
        rng = random.Random(f"shop-goal|{split}|{seed}|{i}")
        tasks.append(make_task(rng.choice(pool), split, i, rng, catalog_seed))
    return tasks
