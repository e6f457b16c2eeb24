"""mini-WebShop: search and click through a generated catalog to buy what the instruction asks.

A pure-Python stand-in for WebShop (Yao et al., 2022) that speaks its text protocol and scores
purchases with its reward. Modules, one concept each:

* ``catalog``: the seeded product catalog (1,200 products, 5 categories, 40 product types);
* ``search``: BM25 search over it (``bm25s``);
* ``goals``: WebShop-style instructions and the train / test_seen / test_unseen splits;
* ``reward``: WebShop's purchase reward;
* ``env``: the pages and actions;
* ``agents``: the scripted expert (plus the shared random agent);
* ``vocab``: every word the environment can show, for a word-level tokenizer;
* ``knowledge``: failures, guidance, the oracle's advice and the warm start's demonstrators.
"""

from edge.envs.shop.agents import AGENTS, ExpertAgent
from edge.envs.shop.catalog import DEFAULT_CATALOG_SEED, Catalog, Product, build_catalog
from edge.envs.shop.env import ShopEnv, make_env, parse_action
from edge.envs.shop.goals import UNSEEN_TYPES, generate_tasks
from edge.envs.shop.knowledge import ShopKnowledge
from edge.envs.shop.reward import RewardBreakdown, reward_breakdown, shop_reward
from edge.envs.shop.search import search_engine
from edge.envs.shop.vocab import split_words, vocabulary

DESCRIPTION = "mini-WebShop: search and click in a generated catalog"

__all__ = [
    "AGENTS", "DESCRIPTION", "KNOWLEDGE", "DEFAULT_CATALOG_SEED", "UNSEEN_TYPES", "Catalog", "ExpertAgent", "Product",
    "RewardBreakdown", "ShopEnv", "build_catalog", "generate_tasks", "make_env", "parse_action",
    "reward_breakdown", "search_engine", "shop_reward", "split_words", "vocabulary",
]

KNOWLEDGE = ShopKnowledge()
