"""What EDGE asks of a store environment (the shop, and WebShop on its own data, which share its
pages and goals): how a lost purchase failed, how guidance reads, the oracle's advice and, for the
generated shop, the warm start's demonstrators."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edge.envs.base import Demonstrators, Knowledge, Task
from edge.guidance import entry
from edge.text import split_words

if TYPE_CHECKING:
    from edge.bank.synthesis import Failure
    from edge.config import WarmupConfig
    from edge.rollout import Trajectory

RESULTS_NAVIGATION = ("click[next >]", "click[< prev]", "click[back to search]")
NOT_OPTIONS = ("click[buy now]", "click[description]", "click[features]", "click[reviews]", "click[< prev]")


# ----- how guidance reads --------------------------------------------------------------------
def search_type_and_attributes(product_type: str) -> str:
    return entry("try", f"search for {product_type} with the attributes the instruction names")


def click_options_first() -> str:
    return entry("try", "click every option the instruction names before buy now")


def avoid_over_budget() -> str:
    return entry("avoid", "buying an item whose price is above the price in the instruction")


def failure_pattern(traj: Trajectory) -> str:
    """No purchase, a purchase without the named options, or the wrong item."""
    actions = [s.decision.action for s in traj.steps]
    if "click[buy now]" not in actions:
        return "no_purchase"
    # The bought item is the last one opened from a results page (WebShop's asins need not start "B0").
    item = max((i for i, s in enumerate(traj.steps)
                if "(Total results:" in s.observation and s.decision.action not in RESULTS_NAVIGATION), default=-1)
    clicked_options = [a for a in actions[item + 1:] if a.startswith("click[") and a not in NOT_OPTIONS]
    return "missing_options" if not clicked_options else "wrong_item"


class StoreKnowledge(Knowledge):
    """Failures, guidance and the oracle for tasks with ``spec["product_type"]``."""

    generic_guidance = frozenset({click_options_first(), avoid_over_budget()})

    def read_failure(self, trajectory: Trajectory) -> tuple[str, str]:
        return failure_pattern(trajectory), trajectory.task.spec["product_type"]

    def write_guidance(self, failure: Failure, evidence, successes: list[Trajectory]) -> tuple[str, str]:
        if failure.pattern == "missing_options":
            return "try", click_options_first()
        return "try", search_type_and_attributes(failure.subject)  # no_purchase, wrong_item

    def oracle_advice(self, task: Task) -> list[str]:
        """How to search and what to click: the shop's regularities, true for every task."""
        return [search_type_and_attributes(task.spec["product_type"]), click_options_first(), avoid_over_budget()]

    def guidance_vocabulary(self) -> set[str]:
        samples = [search_type_and_attributes("x"), click_options_first(), avoid_over_budget()]
        return {w for s in samples for w in split_words(s)}


class ShopKnowledge(StoreKnowledge):
    """The store knowledge plus the generated shop's demonstrators."""

    def demonstrators(self, cfg: WarmupConfig) -> Demonstrators:
        """A careless shopper (its lost episodes kept: they still show how the shop works), and the
        careful one both plain and with the advice."""
        from edge.envs.shop.agents import Shopper

        return Demonstrators(explorer=lambda task, s: Shopper(s, careful=False, option_prob=cfg.option_prob),
                             competent=lambda task, s: Shopper(s, careful=True),
                             advised=lambda task, s: Shopper(s, careful=True),
                             keep_explorer_failures=True)
