"""WebShop on its own data files: the real catalog and goals behind the shop's pages and reward.

An adapter for WebShop (Yao et al., 2022) that needs none of WebShop's code or services: it reads
the JSON files WebShop's ``setup.sh`` downloads from a folder (``data_dir`` or ``$WEBSHOP_DATA``),
builds goals and the literature's split as WebShop does, indexes the catalog with the shop's BM25
engine and plays it through the shop's pages and reward. Modules, one concept each:

* ``data``: finding, reading and checking the files; products as the shop's ``Product``;
* ``goals``: human and synthetic goals, WebShop's shuffle, ``test_seen`` (first 500) and ``train``;
* ``search``: the BM25 index over WebShop's product documents;
* ``env``: the environment (the shop's ``StoreEnv`` over this catalog);
* ``agents``: the scripted expert (plus the shared random agent);
* ``vocab``: the words of the data, for the tiny model's tokenizer;
* knowledge: the shop's (``edge.envs.shop.knowledge.StoreKnowledge``: same pages, same failures and
  advice); no scripted demonstrators, so the warm start uses the expert and random agents.

Where it differs from WebShop, and why:

* the reward is the shop's (one implementation for both environments): its type factor is 1 for
  the goal's ``query`` (WebShop's product type), 0.5 for the goal's top category, 0.1 otherwise,
  where WebShop compares spaCy nouns of the titles and breadcrumb overlap; attributes count when
  listed or fuzzy-found in the title and bullets, options by ``token_set_ratio >= 85`` without
  WebShop's colour normalisation;
* BM25 is ``bm25s`` over the same document text, not Pyserini/Lucene, so rankings can differ a little;
* a product's scored price and every goal's price bound come from streams seeded by the asin, where
  WebShop draws them from Python's unseeded global generator (so its own runs differ from each other);
* there are no reviews (WebShop's text environment has none loaded either) and the search page offers
  a few suggested queries as admissible actions (any query is still accepted), as the shop does.
"""

from edge.envs.shop.knowledge import StoreKnowledge
from edge.envs.webshop.agents import AGENTS, ExpertAgent
from edge.envs.webshop.data import DATA_ENV_VAR, WebShopData, WebShopDataError, load_data
from edge.envs.webshop.env import WebShopEnv, make_env
from edge.envs.webshop.goals import SPLITS, TEST_GOALS, Goal, build_goals, generate_tasks, split_goals
from edge.envs.webshop.search import search_engine
from edge.envs.webshop.vocab import vocabulary

DESCRIPTION = "WebShop on its own data files (folder from $WEBSHOP_DATA)"

__all__ = [
    "AGENTS", "DESCRIPTION", "DATA_ENV_VAR", "KNOWLEDGE", "SPLITS", "TEST_GOALS", "ExpertAgent", "Goal",
    "WebShopData", "WebShopDataError",
    "WebShopEnv", "build_goals", "generate_tasks", "load_data", "make_env", "search_engine", "split_goals",
    "vocabulary",
]

KNOWLEDGE = StoreKnowledge()
