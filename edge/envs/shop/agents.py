"""Scripted shoppers: an expert that always buys the goal's target, and the random floor."""

from __future__ import annotations

from edge.envs.agents import RandomAgent
from edge.envs.base import Reset, Task
from edge.envs.shop.catalog import DEFAULT_CATALOG_SEED, Product, build_catalog


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


AGENTS = {"expert": ExpertAgent, "random": RandomAgent}
"""Scripted agents by name; each is built as ``AGENTS[name](seed)``."""
