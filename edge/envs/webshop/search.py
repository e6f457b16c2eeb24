"""BM25 search over WebShop's catalog with the shop's engine (``bm25s``), over WebShop's documents.

WebShop indexes each product (with Pyserini) as its title, description, first feature bullet and
option text ``"name: v1, v2, and name: ..."``, lowercased; we index the same text with the same
engine, stop words and result count as the shop, so only the catalog differs between the two.
"""

from __future__ import annotations

from functools import lru_cache

from edge.envs.shop.catalog import Product
from edge.envs.shop.search import SearchEngine
from edge.envs.webshop.data import WebShopData


def document(product: Product) -> str:
    """The indexed text of a product, as WebShop's index builder composes it."""
    options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product.options.items())
    first_bullet = product.features[0] if product.features else ""
    return " ".join((product.title, product.description, first_bullet, options)).lower()


@lru_cache(maxsize=4)
def search_engine(data: WebShopData) -> SearchEngine:
    """The shared index of one version of the data files (built once per process)."""
    return SearchEngine(data, document=document)
