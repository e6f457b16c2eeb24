"""The mini-WebShop environment: search, browse, pick options, buy.

``StoreEnv`` holds the pages and actions over any catalog and search engine; ``ShopEnv`` runs them
on the generated catalog, and ``edge.envs.webshop`` on WebShop's own data files.

It speaks WebShop's text protocol. Actions are ``search[query]`` and ``click[label]`` with the
label lowercased as WebShop does (``click[b0abc12345]``, ``click[next >]``, ``click[buy now]``,
``click[large]``). Observations are WebShop's ``text`` mode: the page's visible strings joined by
`` [SEP] ``, with the instruction near the top of every page, where WebShop's templates put it:

* search page:  ``WebShop [SEP] Instruction: [SEP] <goal> [SEP] Search``
* results page: ``Instruction: [SEP] <goal> [SEP] Back to Search [SEP] Page 1 (Total results: 50)
  [SEP] Next > [SEP] B0... [SEP] <title> [SEP] $12.99 [SEP] ...`` (10 per page, at most 50)
* item page:    ``Instruction: [SEP] <goal> [SEP] Back to Search [SEP] < Prev [SEP] size [SEP]
  small [SEP] ... [SEP] <title> [SEP] Price: $12.99 [SEP] Rating: N.A. [SEP] Description [SEP]
  Features [SEP] Reviews [SEP] Buy Now``
* description, features and reviews pages, whose ``< Prev`` returns to the item page.

Differences from WebShop, kept small on purpose: ``Next >`` is shown only when there is a next
page; ``search[...]`` works only on the search page; the search page offers a few suggested
queries as admissible actions (any query is still accepted); products have no reviews. As in
WebShop's text mode, the page does not show which options are selected, but they are remembered
until the agent leaves the item for the results or the search page.

An inadmissible or malformed action re-renders the current page, sets ``info.invalid_action`` and
still costs a step. Buying ends the episode with WebShop's reward; reaching ``max_steps`` without
buying ends it with reward 0 and ``info.truncated``.
"""

from __future__ import annotations

import re
from typing import Any

from edge.envs.base import Reset, Step, StepInfo, Task, check_can_step
from edge.envs.shop.catalog import DEFAULT_CATALOG_SEED, Product, ProductSource, build_catalog
from edge.envs.shop.goals import ENV_NAME, without_price
from edge.envs.shop.reward import RewardBreakdown, reward_breakdown
from edge.envs.shop.search import SearchEngine, search_engine

SEP = " [SEP] "
RESULTS_PER_PAGE = 10
DEFAULT_MAX_STEPS = 15

_ACTION = re.compile(r"^\s*(search|click)\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


def parse_action(action: str) -> tuple[str, str] | None:
    """``"click[Next >]"`` -> ``("click", "next >")``; None when it is not an action at all."""
    match = _ACTION.match(action) if isinstance(action, str) else None
    if match is None:
        return None
    return match.group(1).lower(), match.group(2).strip().lower()


class StoreEnv:
    """The pages and actions of a WebShop-style store over any catalog and search engine.

    Subclasses name the environment and say which tasks fit their catalog (:meth:`check_task`);
    the shop over its generated catalog and the adapter over WebShop's own files share everything
    else, so both speak exactly the same protocol and score with the same reward.
    """

    name = "store"

    def __init__(self, catalog: ProductSource, engine: SearchEngine, max_steps: int = DEFAULT_MAX_STEPS):
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.max_steps = max_steps
        self.catalog = catalog
        self.engine = engine
        self.task: Task | None = None
        self.purchase: RewardBreakdown | None = None
        """Why the last purchase scored what it did (None until something is bought)."""

    def check_task(self, task: Task) -> None:
        """Raise ValueError when ``task`` cannot be played on this catalog (its env name is checked already)."""

    # -- episode ------------------------------------------------------------------------------

    def reset(self, task: Task) -> Reset:
        if task.env != self.name:
            raise ValueError(f"task {task.task_id} is for environment {task.env!r}, not {self.name!r}")
        self.check_task(task)
        self.task = task
        self.goal = task.spec
        self.queries = list(task.spec.get("search_queries") or [without_price(task.instruction)])
        self.steps = 0
        self.done = False
        self.truncated = False
        self.purchase = None
        self._go_to_search()
        return Reset(observation=self._obs, instruction=task.instruction, task_type=task.task_type,
                     admissible_actions=self.admissible_actions())

    def admissible_actions(self) -> list[str]:
        if self.done:
            return []
        if self.page == "search":
            return [f"search[{q}]" for q in self.queries]
        return [f"click[{label}]" for label in self._clickables]

    def step(self, action: str) -> Step:
        check_can_step(self.task, self.done)
        self.steps += 1
        reward = 0.0
        valid = self._apply(parse_action(action))
        if self.done:
            reward = self.purchase.reward
        elif self.steps >= self.max_steps:
            self.done = True
        self.truncated = self.done and self.purchase is None
        info = StepInfo(won=reward == 1.0, score=reward, invalid_action=not valid,
                        admissible_actions=self.admissible_actions(), steps=self.steps,
                        truncated=self.truncated)
        return Step(self._obs, reward, self.done, info)

    # -- actions ------------------------------------------------------------------------------

    def _apply(self, parsed: tuple[str, str] | None) -> bool:
        """Carry out a parsed action; False (and nothing changes) when it is not admissible."""
        if parsed is None:
            return False
        verb, arg = parsed
        if verb == "search":
            if self.page != "search" or not arg:
                return False
            self.results = self.engine.search(arg)
            self._go_to_results(1)
            return True
        target = self._clickables.get(arg)
        if target is None:
            return False
        kind, value = target
        if kind == "back to search":
            self._go_to_search()
        elif kind == "results":
            self._go_to_results(value)
        elif kind == "product":
            self._go_to_item(value, {})
        elif kind == "option":
            name, option_value = value
            self.selected[name] = option_value
            self._go_to_item(self.asin, self.selected)
        elif kind == "item":
            self._go_to_item(self.asin, self.selected)
        elif kind == "sub page":
            self._go_to_sub_page(value)
        elif kind == "buy":
            self._buy()
        return True

    def _buy(self) -> None:
        product = self.catalog.by_asin[self.asin]
        self.purchase = reward_breakdown(self.goal, product, self.selected)
        self.done = True
        self.page = "done"
        self._clickables = {}
        self._obs = SEP.join(("Thank you for shopping with us!", "Your score (min 0.0, max 1.0)",
                              f"{self.purchase.reward:.2f}"))

    # -- pages: each sets the observation and the clickable labels of the new page -------------

    def _header(self) -> list[str]:
        return ["Instruction:", self.task.instruction, "Back to Search"]

    def _go_to_search(self) -> None:
        self.page = "search"
        self.results: tuple[str, ...] = ()
        self.asin: str | None = None
        self.selected: dict[str, str] = {}
        self._clickables: dict[str, tuple[str, Any]] = {}
        self._obs = SEP.join(("WebShop", "Instruction:", self.task.instruction, "Search"))

    def _go_to_results(self, page: int) -> None:
        self.page = "results"
        self.results_page = page
        self.asin = None
        self.selected = {}  # WebShop forgets options when the results page is shown
        total = len(self.results)
        parts = self._header() + [f"Page {page} (Total results: {total})"]
        clicks: dict[str, tuple[str, Any]] = {"back to search": ("back to search", None)}
        if page > 1:
            parts.append("< Prev")
            clicks["< prev"] = ("results", page - 1)
        if page * RESULTS_PER_PAGE < total:
            parts.append("Next >")
            clicks["next >"] = ("results", page + 1)
        start = (page - 1) * RESULTS_PER_PAGE
        for asin in self.results[start:start + RESULTS_PER_PAGE]:
            product = self.catalog.by_asin[asin]
            parts += [asin, product.title, product.price_text]
            clicks[asin.lower()] = ("product", asin)
        self._clickables = clicks
        self._obs = SEP.join(parts)

    def _go_to_item(self, asin: str, selected: dict[str, str]) -> None:
        self.page = "item"
        self.asin = asin
        self.selected = selected
        product: Product = self.catalog.by_asin[asin]
        parts = self._header() + ["< Prev"]
        clicks: dict[str, tuple[str, Any]] = {"back to search": ("back to search", None),
                                              "< prev": ("results", self.results_page)}
        for name, values in product.options.items():
            parts.append(name)
            for value in values:
                parts.append(value)
                clicks[value.lower()] = ("option", (name, value))
        parts += [product.title, f"Price: {product.price_text}", "Rating: N.A.",
                  "Description", "Features", "Reviews", "Buy Now"]
        for sub_page in ("description", "features", "reviews"):
            clicks[sub_page] = ("sub page", sub_page)
        clicks["buy now"] = ("buy", None)
        self._clickables = clicks
        self._obs = SEP.join(parts)

    def _go_to_sub_page(self, sub_page: str) -> None:
        self.page = sub_page
        product = self.catalog.by_asin[self.asin]
        parts = self._header() + ["< Prev"]
        if sub_page == "description":
            parts.append(product.description)
        elif sub_page == "features":
            parts += product.features
        self._clickables = {"back to search": ("back to search", None), "< prev": ("item", None)}
        self._obs = SEP.join(parts)


class ShopEnv(StoreEnv):
    """One shopper session at a time on the generated catalog; reset it to a task from ``generate_tasks``."""

    name = ENV_NAME

    def __init__(self, max_steps: int = DEFAULT_MAX_STEPS, catalog_seed: int = DEFAULT_CATALOG_SEED):
        super().__init__(build_catalog(catalog_seed), search_engine(catalog_seed), max_steps)
        self.catalog_seed = catalog_seed

    def check_task(self, task: Task) -> None:
        task_catalog = task.spec.get("catalog_seed", DEFAULT_CATALOG_SEED)
        if task_catalog != self.catalog_seed:
            raise ValueError(f"task {task.task_id} was made for catalog seed {task_catalog}, "
                             f"but this environment uses catalog seed {self.catalog_seed}")


def make_env(max_steps: int = DEFAULT_MAX_STEPS, catalog_seed: int = DEFAULT_CATALOG_SEED) -> ShopEnv:
    """A fresh shop environment; all instances of one catalog seed share catalog and index."""
    return ShopEnv(max_steps=max_steps, catalog_seed=catalog_seed)
