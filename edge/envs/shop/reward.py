"""WebShop's purchase reward, computed from a goal and what was bought.

WebShop scores a purchase ``Y`` against the goal ``U`` as

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price])
              / (|U_att| + |U_opt| + 1)

* An attribute of the goal counts when the product lists it, or else when it fuzzy-matches the
  product's title and feature text (rapidfuzz ``partial_ratio`` >= 85), as WebShop falls back on
  text matching for attributes its annotations missed.
* An option of the goal counts when some selected option value equals it (case-insensitive) or
  fuzzy-matches it (``token_set_ratio`` >= 85). Like WebShop, a goal value is compared with every
  selected value, not only the one under the same option name. We lowercase but do not strip
  punctuation before matching, so "x-small" does not collapse into "small".
* ``r_type`` is our tiering of WebShop's text-match type reward: 1.0 when the bought product has
  the goal's product type, 0.5 when only the category matches, 0.1 otherwise.

A purchase is a success (``won``) only when the reward is exactly 1.0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from edge.envs.shop.catalog import Product

FUZZY_THRESHOLD = 85.0

TYPE_REWARD_SAME_TYPE = 1.0
TYPE_REWARD_SAME_CATEGORY = 0.5
TYPE_REWARD_OTHER = 0.1


@dataclass(frozen=True)
class RewardBreakdown:
    """The parts of the reward, so tests and logs can see why a purchase scored what it did."""

    r_type: float
    attribute_matches: int
    num_attributes: int
    option_matches: int
    num_options: int
    price_ok: bool

    @property
    def reward(self) -> float:
        hits = self.attribute_matches + self.option_matches + int(self.price_ok)
        total = self.num_attributes + self.num_options + 1
        return self.r_type * hits / total


def attribute_matches(attribute: str, product: Product) -> bool:
    """Does the product have this goal attribute (listed, or written in its title/features)?"""
    attribute = attribute.lower()
    if attribute in (a.lower() for a in product.attributes):
        return True
    text = " ".join((product.title, *product.features)).lower()
    return fuzz.partial_ratio(attribute, text) >= FUZZY_THRESHOLD


def option_values_match(goal_value: str, chosen_value: str) -> bool:
    """Is a selected option value the goal's value (exactly, or up to a small fuzzy difference)?"""
    a, b = goal_value.lower().strip(), chosen_value.lower().strip()
    return a == b or fuzz.token_set_ratio(a, b) >= FUZZY_THRESHOLD


def type_reward(goal: Mapping[str, Any], product: Product) -> float:
    if product.product_type == goal["product_type"]:
        return TYPE_REWARD_SAME_TYPE
    if product.category == goal["category"]:
        return TYPE_REWARD_SAME_CATEGORY
    return TYPE_REWARD_OTHER


def reward_breakdown(goal: Mapping[str, Any], product: Product,
                     selected_options: Mapping[str, str]) -> RewardBreakdown:
    """Score buying ``product`` with ``selected_options`` (option name -> value) against ``goal``.

    ``goal`` is a shop task's ``spec``: it needs ``product_type``, ``category``, ``attributes``
    (list), ``options`` (option name -> value) and ``price_upper``.
    """
    goal_attributes = list(goal["attributes"])
    goal_options = list(goal["options"].values())
    chosen = list(selected_options.values())
    return RewardBreakdown(
        r_type=type_reward(goal, product),
        attribute_matches=sum(attribute_matches(a, product) for a in goal_attributes),
        num_attributes=len(goal_attributes),
        option_matches=sum(any(option_values_match(g, c) for c in chosen) for g in goal_options),
        num_options=len(goal_options),
        price_ok=product.price <= float(goal["price_upper"]),
    )


def shop_reward(goal: Mapping[str, Any], product: Product,
                selected_options: Mapping[str, str]) -> float:
    """WebShop's reward in [0, 1] for buying ``product`` with ``selected_options``; see module doc."""
    return reward_breakdown(goal, product, selected_options).reward
