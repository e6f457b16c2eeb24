"""Keyword search over the catalog with BM25, as WebShop's search engine does (it uses Pyserini).

Each product is indexed by its title, product type, attributes and feature bullets (another catalog
may say what its documents are: WebShop's own files index different fields). A query returns at most
``MAX_RESULTS`` product ids, best first; products that share no word with the query are left out, so
a query of unknown words returns nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import bm25s
import numpy as np

from edge.envs.shop.catalog import DEFAULT_CATALOG_SEED, Product, ProductSource, build_catalog

MAX_RESULTS = 50
"""WebShop shows the top 50 results, 10 per page."""


def _tokenize(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


def _document(product: Product) -> str:
    return " ".join((product.title, product.product_type, *product.attributes, *product.features))


class SearchEngine:
    """A BM25 index over one catalog; build it with :func:`search_engine` to share it.

    ``document`` turns a product into the text that is indexed (default: the shop's fields).
    """

    def __init__(self, catalog: ProductSource, document: Callable[[Product], str] = _document):
        self.catalog = catalog
        self._asins = [p.asin for p in catalog.products]
        self._bm25 = bm25s.BM25()
        self._bm25.index(_tokenize([document(p) for p in catalog.products]), show_progress=False)
        # Queries repeat a lot (every episode of a group starts with the same few), so remember
        # answers; a per-instance cache keeps engines of different catalogs apart.
        self.search = lru_cache(maxsize=65536)(self._search)

    def _search(self, query: str) -> tuple[str, ...]:
        """The ids of the best-matching products for ``query`` (case-insensitive), best first."""
        tokens = _tokenize([query.lower()])[0]
        if not tokens:
            return ()
        scores = self._bm25.get_scores(tokens)
        # A stable sort breaks score ties by catalog order, so results never depend on numpy's
        # choice among equals.
        order = np.argsort(-scores, kind="stable")[:MAX_RESULTS]
        return tuple(self._asins[i] for i in order if scores[i] > 0)


@lru_cache(maxsize=4)
def search_engine(catalog_seed: int = DEFAULT_CATALOG_SEED) -> SearchEngine:
    """The shared search engine of a catalog seed (built once per process)."""
    return SearchEngine(build_catalog(catalog_seed))
