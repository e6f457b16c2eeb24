"""Scripted shoppers on WebShop's catalog: the expert that buys the goal's product, and the random floor."""

from __future__ import annotations

from edge.envs.agents import RandomAgent
from edge.envs.base import Task
from edge.envs.shop.agents import ExpertAgent as ShopExpert
from edge.envs.shop.catalog import Product
from edge.envs.shop.reward import option_values_match
from edge.envs.webshop.data import load_data


class ExpertAgent(ShopExpert):
    """The shop's expert (search the target's title, page to it, click the options, buy) on WebShop's data.

    Human goals name option values as people wrote them, which need not be spelled as the product
    offers them; for each wanted value the expert clicks the offered value that the reward would
    count (an exact match first, else a fuzzy one). A value the product does not offer is skipped:
    no click could earn it.
    """

    def __init__(self, seed: int = 0, data_dir: str | None = None):
        super().__init__(seed)
        self.data_dir = data_dir

    def plan(self, task: Task) -> tuple[Product, list[str]]:
        product = load_data(self.data_dir).by_asin[task.spec["asin"]]
        offered = [v for values in product.options.values() for v in values]
        clicks = []
        for wanted in task.spec["options"].values():
            exact = [v for v in offered if v == wanted.lower()]
            fuzzy = [v for v in offered if option_values_match(wanted, v)]
            if exact or fuzzy:
                clicks.append((exact or fuzzy)[0])
        return product, clicks


AGENTS = {"expert": ExpertAgent, "random": RandomAgent}
"""Scripted agents by name; each is built as ``AGENTS[name](seed)``."""
