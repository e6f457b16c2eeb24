"""Scripted shoppers: an expert that always buys the goal's target, a shopper that chooses only
among the admissible actions (the warm start's demonstrator), and the random floor."""

from __future__ import annotations

import random

from edge.envs.agents import RandomAgent
from edge.envs.base import Reset, Task
from edge.envs.shop.catalog import DEFAULT_CATALOG_SEED, Product, build_catalog
from edge.envs.shop.reward import attribute_matches


class ExpertAgent:
    """Reads the target product from the task spec and buys it with the goal's options.

    It searches for the target's title (titles are unique in the catalog, so BM25 ranks the target
    at or near the top), pages forward until the target is listed, opens it, clicks each goal
    option and buys: at most 1 + 4 + 1 + options + 1 steps, well within WebShop's 15.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed  # scripted and deterministic; kept for the common agent signature

    def reset(self, task: Task, first: Reset) -> None:
        target, option_values = self.plan(task)
        self.query = target.title.lower()
        self.target = f"click[{target.asin.lower()}]"
        self.pending: list[str] = []
        self.options = [f"click[{value.lower()}]" for value in option_values]

    def plan(self, task: Task) -> tuple[Product, list[str]]:
        """The product to buy and the option values to click on its page (another catalog overrides this)."""
        spec = task.spec
        catalog = build_catalog(spec.get("catalog_seed", DEFAULT_CATALOG_SEED))
        return catalog.by_asin[spec["asin"]], list(spec["options"].values())

    def act(self, observation: str, admissible_actions: list[str]) -> str:
        if any(a.startswith("search[") for a in admissible_actions):
            return f"search[{self.query}]"
        if self.target in admissible_actions:
            self.pending = list(self.options)
            return self.target
        if "click[buy now]" in admissible_actions:
            return self.pending.pop(0) if self.pending else "click[buy now]"
        if "click[next >]" in admissible_actions:
            return "click[next >]"
        return "click[back to search]"


NAVIGATION = ("click[back to search]", "click[< prev]", "click[next >]", "click[buy now]",
              "click[description]", "click[features]", "click[reviews]")


class Shopper:
    """Shops with only the admissible actions, as a policy in ``score`` mode must.

    ``careful`` shoppers do what the shop's true advice says (``edge.guidance.true_advice``): search
    the product type with the instruction's attributes, open a listed product of that type within
    the budget (preferring one whose listing shows the attributes), click every option the
    instruction names, then buy. A careless shopper picks a suggested query and a listed product at
    random and clicks each named option only with probability ``option_prob``: it knows the rules
    but not what makes a purchase score. The warm start clones both, so that the base policy is
    partly competent and *reads* the advice block.
    """

    def __init__(self, seed: int, careful: bool = False, option_prob: float = 0.5):
        self.rng = random.Random(seed)
        self.careful = careful
        self.option_prob = option_prob

    def reset(self, task: Task, first: Reset) -> None:
        spec = task.spec
        self.spec = spec
        self.catalog = build_catalog(spec.get("catalog_seed", DEFAULT_CATALOG_SEED))
        self.to_click: list[str] | None = None
        self.pages_left = 2  # how far a careful shopper pages before settling for less

    def _query(self, admissible: list[str]) -> str:
        if self.careful:
            wanted = "search[" + " ".join([self.spec["product_type"], *self.spec["attributes"]]) + "]"
            if wanted in admissible:
                return wanted
        return self.rng.choice(admissible)

    def _listed(self, admissible: list[str]) -> list:
        asins = [a[len("click["):-1] for a in admissible if a not in NAVIGATION]
        return [self.catalog.by_asin[a.upper()] for a in asins if a.upper() in self.catalog.by_asin]

    def _pick(self, admissible: list[str]) -> str:
        products = self._listed(admissible)
        if not self.careful:
            return f"click[{self.rng.choice(products).asin.lower()}]" if products else admissible[0]
        spec = self.spec
        fits = [p for p in products if p.product_type == spec["product_type"] and p.price <= spec["price_upper"]]
        full = [p for p in fits if all(attribute_matches(a, p) for a in spec["attributes"])]
        if not full and self.pages_left and "click[next >]" in admissible:
            self.pages_left -= 1
            return "click[next >]"
        choice = (full or fits or products)[0] if (full or fits or products) else None
        return f"click[{choice.asin.lower()}]" if choice else admissible[0]

    def act(self, observation: str, admissible_actions: list[str]) -> str:
        if any(a.startswith("search[") for a in admissible_actions):
            return self._query(admissible_actions)
        if "click[buy now]" in admissible_actions:
            if self.to_click is None:
                wanted = [f"click[{v.lower()}]" for v in self.spec["options"].values()]
                self.to_click = [a for a in wanted if a in admissible_actions
                                 and (self.careful or self.rng.random() < self.option_prob)]
            return self.to_click.pop(0) if self.to_click else "click[buy now]"
        self.to_click = None  # a new item page: decide its options afresh
        return self._pick(admissible_actions)


class CarefulShopper(Shopper):
    def __init__(self, seed: int):
        super().__init__(seed, careful=True)


AGENTS = {"expert": ExpertAgent, "shopper": Shopper, "careful": CarefulShopper, "random": RandomAgent}
"""Scripted agents by name; each is built as ``AGENTS[name](seed)``."""
