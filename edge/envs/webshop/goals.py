"""WebShop's goals, built from its data files the way WebShop builds them, and the literature's split.

Two kinds of goal, as in WebShop's ``get_goals``:

* **human** (used when ``items_human_ins.json`` is in the folder, the literature's setting): one goal
  per crowd-written instruction of a catalog product, skipping instructions that name no attribute.
  The text is the instruction without a trailing period plus the price clause; the goal options are
  the instruction's ``instruction_options``.
* **synthetic**: for every product with an instruction in the attribute file, one goal per
  combination of its option values (option names sorted), the text being the instruction,
  ``" with name: value, and name: value"`` and the price clause.

The price bound is WebShop's: of the first four multiples of ten above the product's price, two are
drawn and the larger is the bound (``", and price lower than 40.00 dollars"``); a product too dear
for that (over 960 dollars) gets no bound and no price clause. We draw from a stream seeded by the
asin and instruction instead of WebShop's unseeded global one, so every process builds the same goals.

Goals are listed in catalog order and shuffled as WebShop's text environment shuffles them
(``random.seed(233); random.shuffle(goals)``). The literature evaluates on the first 500 of that
list and trains on the rest (WebShop's baselines and later agents on it), so:

* ``test_seen`` = goals ``[0, test_goals)`` (``test_goals`` = 500);
* ``train`` = goals ``[test_goals, end)``;
* there is no ``test_unseen``: WebShop has no held-out product types, and repeating the test split
  under a second name would report one result twice. Asking for it is an error naming the splits.

Goals are fixed, so ``seed`` does not change which goals a split holds: task ``i`` of a split is
always its ``i``-th goal. Asking for more tasks than a split holds returns the whole split.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from edge.envs.base import Task
from edge.envs.shop.catalog import Product
from edge.envs.shop.goals import without_price
from edge.envs.shop.reward import option_values_match
from edge.envs.webshop.data import HUMAN_GOALS_FILE, WebShopData, WebShopDataError, load_data

ENV_NAME = "webshop"

SPLITS = ("train", "test_seen")
"""The splits WebShop has (see the module doc for why there is no ``test_unseen``)."""

TEST_GOALS = 500
"""The literature's test set: the first 500 goals after WebShop's shuffle."""

SHUFFLE_SEED = 233
"""WebShop's text environment shuffles its goal list with ``random.seed(233)``."""

PRICE_STEPS = [10.0 * i for i in range(1, 100)]
"""WebShop's candidate price bounds: 10, 20, ..., 990 dollars."""

NO_PRICE_BOUND = 1_000_000.0
"""WebShop's bound when none is drawn: every price is within it."""

GoalKind = Literal["auto", "human", "synthetic"]


@dataclass(frozen=True)
class Goal:
    """One shopping goal: what to buy (``asin``) and what the reward checks."""

    index: int
    """Position in WebShop's shuffled goal list; the split boundary is on this index."""
    asin: str
    instruction: str
    attributes: tuple[str, ...]
    options: dict[str, str]
    """Option name -> wanted value. Human goals list values only; each is filed under the target's
    option it matches (or ``option k`` when none does), which the reward does not look at."""
    price_upper: float
    kind: str
    """``human`` or ``synthetic``."""


def price_upper(price: float, rng: random.Random) -> float:
    """WebShop's bound above ``price``: the larger of two draws among the next four multiples of ten."""
    steps = [p for p in PRICE_STEPS if p > price][:4]
    if len(steps) < 2:
        return NO_PRICE_BOUND
    return max(rng.sample(steps, 2))


def price_clause(bound: float) -> str:
    return "" if bound >= NO_PRICE_BOUND else f", and price lower than {bound:.2f} dollars"


def _name_human_options(values: tuple[str, ...], product: Product) -> dict[str, str]:
    """File each wanted value under the product option that offers it (exactly, else fuzzily)."""
    named: dict[str, str] = {}
    for k, value in enumerate(values, 1):
        exact = [n for n, offered in product.options.items() if value.lower() in offered]
        fuzzy = [n for n, offered in product.options.items() if any(option_values_match(value, v) for v in offered)]
        named[next((n for n in exact + fuzzy if n not in named), f"option {k}")] = value
    return named


def _human_goals(data: WebShopData) -> list[Goal]:
    goals = []
    for product in data.products:
        for j, human in enumerate(data.human.get(product.asin, [])):
            if not human.attributes:  # WebShop skips these too
                continue
            bound = price_upper(product.price, random.Random(f"webshop-bound|{product.asin}|{j}"))
            goals.append(Goal(index=-1, asin=product.asin,
                              instruction=human.instruction.strip(".") + price_clause(bound),
                              attributes=human.attributes, options=_name_human_options(human.options, product),
                              price_upper=bound, kind="human"))
    return goals


def _synthetic_goals(data: WebShopData) -> list[Goal]:
    goals = []
    for product in data.products:
        source = data.synthetic.get(product.asin)
        if source is None or not source.attributes:
            continue
        bound = price_upper(product.price, random.Random(f"webshop-bound|{product.asin}"))
        names = sorted(product.options)
        for combination in itertools.product(*(product.options[n] for n in names)):
            options = dict(zip(names, combination))
            option_text = ", and ".join(f"{k}: {v}" for k, v in options.items())
            text = source.instruction + (f" with {option_text}" if option_text else "") + price_clause(bound)
            goals.append(Goal(index=-1, asin=product.asin, instruction=text, attributes=source.attributes,
                              options=options, price_upper=bound, kind="synthetic"))
    return goals


def build_goals(data: WebShopData, kind: GoalKind = "auto") -> list[Goal]:
    """Every goal of the folder in WebShop's shuffled order, each carrying its index in that order."""
    if kind == "auto":
        kind = "human" if data.human is not None else "synthetic"
    if kind == "human":
        if data.human is None:
            raise WebShopDataError(f"human goals were asked for, but {data.folder / HUMAN_GOALS_FILE} does not exist")
        goals = _human_goals(data)
    elif kind == "synthetic":
        goals = _synthetic_goals(data)
    else:
        raise ValueError(f"unknown goal kind {kind!r}; valid kinds: auto, human, synthetic")
    if not goals:
        source = data.human_file if kind == "human" else data.attributes_file
        raise WebShopDataError(f"{source}: gives no {kind} goal for any product of {data.products_file.name} "
                               "(goals need an instruction with at least one attribute)")
    random.Random(SHUFFLE_SEED).shuffle(goals)
    return [Goal(i, g.asin, g.instruction, g.attributes, g.options, g.price_upper, g.kind)
            for i, g in enumerate(goals)]


def split_goals(goals: list[Goal], split: str, test_goals: int = TEST_GOALS) -> list[Goal]:
    """The goals of ``split``: the first ``test_goals`` are ``test_seen``, the rest ``train``."""
    if split not in SPLITS:
        raise ValueError(f"WebShop has no split {split!r}; valid splits: {', '.join(SPLITS)} "
                         f"(test_seen = the first {test_goals} goals, train = the rest)")
    if test_goals < 1:
        raise ValueError(f"test_goals must be at least 1, got {test_goals}")
    chosen = goals[:test_goals] if split == "test_seen" else goals[test_goals:]
    if not chosen:
        raise WebShopDataError(f"the WebShop data has {len(goals)} goals, all of them in test_seen (the first "
                               f"{test_goals}); train needs more goals (a bigger catalog or human goal file)")
    return chosen


def search_suggestions(goal: Goal, product: Product, queries: list[str]) -> list[str]:
    """Candidate queries for policies that choose from a finite list, as the shop offers them.

    The instruction without its price, the product's search query (WebShop's ``query``, its product
    type), that query with the goal's attributes, and two other products' queries as distractors,
    in an order shuffled per goal.
    """
    rng = random.Random(f"webshop-queries|{goal.index}")
    others = [q for q in queries if q != product.product_type]
    suggestions = [without_price(goal.instruction), product.product_type,
                   " ".join([product.product_type, *goal.attributes]), *rng.sample(others, min(2, len(others)))]
    suggestions = list(dict.fromkeys(s for s in suggestions if s.strip()))
    rng.shuffle(suggestions)
    return suggestions


def make_task(goal: Goal, split: str, data: WebShopData, queries: list[str]) -> Task:
    product = data.by_asin[goal.asin]
    spec = {
        "asin": goal.asin,
        "product_type": product.product_type,
        "category": product.category,
        "attributes": list(goal.attributes),
        "options": dict(goal.options),
        "price_upper": goal.price_upper,
        "search_queries": search_suggestions(goal, product, queries),
        "goal_index": goal.index,
        "goal_kind": goal.kind,
        "data_folder": str(data.folder),
    }
    return Task(env=ENV_NAME, split=split, task_id=f"{ENV_NAME}-{goal.index:05d}", task_type=product.category,
                instruction=goal.instruction, spec=spec)


@lru_cache(maxsize=8)
def goals_of(data: WebShopData, kind: GoalKind = "auto") -> list[Goal]:
    """Cached :func:`build_goals`; ``load_data`` shares one data object per version of the files."""
    return build_goals(data, kind)


def generate_tasks(split: str, n: int, seed: int = 0, data_dir: str | Path | None = None,
                   goals: GoalKind = "auto", test_goals: int = TEST_GOALS) -> list[Task]:
    """The first ``n`` tasks of ``split`` (all of them when it has fewer); ``seed`` is not used:
    WebShop's goals and split are fixed, and every paper evaluates on the same 500."""
    data = load_data(data_dir)
    chosen = split_goals(goals_of(data, goals), split, test_goals)
    queries = sorted({p.product_type for p in data.products})
    return [make_task(goal, split, data, queries) for goal in chosen[:n]]
