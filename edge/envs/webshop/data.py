"""WebShop's own data files, read from a folder the user supplies, checked and turned into products.

WebShop (Yao et al., 2022) ships its data as JSON files that its ``setup.sh`` downloads into
``data/``; this module reads them without importing any of WebShop's code:

* the catalog, ``items_shuffle_1000.json`` (``setup.sh -d small``) or ``items_shuffle.json``
  (``-d all``): a JSON list of scraped products, each an object with ``asin``, ``name``,
  ``category``, ``query`` and, optionally, ``full_description``, ``small_description`` (the feature
  bullets: a string or a list of strings), ``pricing`` (``"$12.99"`` or ``"$12.99 - $15.99"``),
  ``customization_options`` (option name -> list of ``{"value": ..., "image": ...}``) and more
  fields we do not use (``images``, ``product_category``, ``average_rating``, ...);
* the attribute file, ``items_ins_v2_1000.json`` or ``items_ins_v2.json``: an object mapping an
  asin to ``{"attributes": [...], "instruction": "...", "instruction_attributes": [...]}``; the
  ``attributes`` are the product's, the other two make its *synthetic* goal;
* the human goals, ``items_human_ins.json`` (optional): an object mapping an asin to a list of
  ``{"instruction": "...", "instruction_attributes": [...], "instruction_options": [...]}``.

Products are cleaned the way WebShop's engine cleans them, so goals and pages see the same text:
asins that are ``"nan"`` or longer than 10 characters and repeated asins are skipped; option names
and values are lowercased and ``/`` in a value becomes `` | ``; the query is lowercased. A product
whose pricing gives a range is sold at one price drawn uniformly from it (seeded by its asin, so it
is the same in every process) while pages show the range, as WebShop does; a product without a
price costs 100 dollars.

Anything malformed is a :class:`WebShopDataError` that names the file, the entry and what was
expected, so a user with a truncated download learns which file to fetch again.
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from edge.envs.shop.catalog import Product

DATA_ENV_VAR = "WEBSHOP_DATA"
"""Environment variable naming the data folder when no ``data_dir`` is passed."""

PRODUCT_FILES = ("items_shuffle_1000.json", "items_shuffle.json")
"""Catalog file names, in order of preference: the 1,000-product catalog loads in a second, the full
1.18M-product one needs far more memory than a laptop has; pass ``products_file`` to choose."""
ATTRIBUTE_FILES = ("items_ins_v2_1000.json", "items_ins_v2.json")
HUMAN_GOALS_FILE = "items_human_ins.json"

DEFAULT_PRICE = 100.0
"""WebShop's price for a product whose pricing is missing or empty."""

_REQUIRED_PRODUCT_FIELDS = ("asin", "name", "category", "query")


class WebShopDataError(ValueError):
    """A WebShop data file is missing or not in the shape WebShop writes it."""


@dataclass(frozen=True)
class SyntheticInstruction:
    """A product's synthetic goal text and the attributes it asks for (from the attribute file)."""

    instruction: str
    attributes: tuple[str, ...]


@dataclass(frozen=True)
class HumanInstruction:
    """One goal written by a crowd worker for a product (from ``items_human_ins.json``)."""

    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]


@dataclass(eq=False)
class WebShopData:
    """Everything read from one data folder: products in catalog order and the goal sources.

    Compared and hashed by identity: :func:`load_data` returns one object per version of the files,
    and caches further down key on it."""

    folder: Path
    products_file: Path
    attributes_file: Path
    human_file: Path | None
    products: list[Product]
    synthetic: dict[str, SyntheticInstruction]
    """asin -> its synthetic instruction, for products whose attribute entry has one."""
    human: dict[str, list[HumanInstruction]] | None
    """asin -> its human instructions; None when the folder has no human goal file."""

    def __post_init__(self) -> None:
        self.by_asin: dict[str, Product] = {p.asin: p for p in self.products}


# ----- locating the folder and its files ------------------------------------------------------
def resolve_folder(data_dir: str | Path | None) -> Path:
    """``data_dir``, else ``$WEBSHOP_DATA``; an error that says how to fix it when neither is usable."""
    given = data_dir if data_dir not in (None, "") else os.environ.get(DATA_ENV_VAR)
    if not given:
        raise WebShopDataError(
            f"no WebShop data folder: set {DATA_ENV_VAR} to the folder holding {PRODUCT_FILES[0]} and "
            f"{ATTRIBUTE_FILES[0]} (WebShop's `setup.sh -d small` downloads them into its data/), "
            "or pass data_dir")
    folder = Path(given).expanduser().resolve()
    if not folder.is_dir():
        source = "data_dir" if data_dir not in (None, "") else DATA_ENV_VAR
        raise WebShopDataError(f"WebShop data folder {folder} (from {source}) does not exist")
    return folder


def _pick(folder: Path, names: tuple[str, ...], chosen: str | None, what: str) -> Path:
    if chosen:
        path = folder / chosen
        if not path.is_file():
            raise WebShopDataError(f"{path} does not exist; expected WebShop's {what} there")
        return path
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise WebShopDataError(f"WebShop data folder {folder} has no {what}: expected {' or '.join(names)}")


# ----- reading and checking -------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as err:
        raise WebShopDataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except UnicodeDecodeError as err:
        raise WebShopDataError(f"{path}: not UTF-8 text ({err.reason})") from None


def _strings(value: Any, where: str, field: str) -> tuple[str, ...]:
    """A JSON list of strings as a tuple; anything else is an error naming ``field``."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WebShopDataError(f"{where}: field {field!r} must be a list of strings, got {type(value).__name__}")
    return tuple(value)


def _parse_pricing(pricing: Any, where: str) -> list[float]:
    """WebShop's reading of ``pricing``: every dollar amount in the text, at most two (low, high)."""
    if pricing is None or pricing == "" or pricing == []:
        return []
    if isinstance(pricing, int | float) and not isinstance(pricing, bool):
        return [float(pricing)]
    if isinstance(pricing, list) and all(isinstance(p, int | float) and not isinstance(p, bool) for p in pricing):
        return [float(p) for p in pricing[:2]]
    if not isinstance(pricing, str):
        raise WebShopDataError(f"{where}: field 'pricing' must be a string such as \"$12.99\" or "
                               f"\"$12.99 - $15.99\", got {type(pricing).__name__}")
    amounts = []
    for part in pricing.split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", part)
        try:
            amounts.append(float(digits))
        except ValueError:
            raise WebShopDataError(f"{where}: field 'pricing' {pricing!r} has a '$' not followed by an "
                                   "amount") from None
    return amounts[:2]


def _options(raw: Any, where: str) -> dict[str, tuple[str, ...]]:
    """``customization_options`` as option name -> values, cleaned as WebShop's engine cleans them."""
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, dict):
        raise WebShopDataError(f"{where}: field 'customization_options' must be an object mapping an "
                               f"option name to a list of {{\"value\", \"image\"}} objects, got {type(raw).__name__}")
    options: dict[str, tuple[str, ...]] = {}
    for name, contents in raw.items():
        if contents is None:
            continue
        if not isinstance(contents, list):
            raise WebShopDataError(f"{where}: customization option {name!r} must be a list of "
                                   f"{{\"value\", \"image\"}} objects, got {type(contents).__name__}")
        values = []
        for content in contents:
            if not isinstance(content, dict) or not isinstance(content.get("value"), str):
                raise WebShopDataError(f"{where}: every entry of customization option {name!r} needs a string "
                                       f"field 'value', got {content!r:.80}")
            values.append(content["value"].strip().replace("/", " | ").lower())
        options[name.lower()] = tuple(values)
    return options


def _product_price(asin: str, amounts: list[float]) -> tuple[float, str]:
    """(the price the reward compares, the text pages show)."""
    if not amounts:
        return DEFAULT_PRICE, f"${DEFAULT_PRICE:.2f}"
    if len(amounts) == 1:
        return round(amounts[0], 2), f"${amounts[0]:.2f}"
    low, high = amounts
    drawn = random.Random(f"webshop-price|{asin}").uniform(low, high)
    return round(drawn, 2), f"${low:.2f} to ${high:.2f}"


def _bullets(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    bullets = _strings(raw, where, "small_description")
    return tuple(b.strip() for b in bullets if b.strip())


def _read_products(path: Path, attributes: dict[str, tuple[str, ...]]) -> list[Product]:
    raw = _read_json(path)
    if not isinstance(raw, list):
        raise WebShopDataError(f"{path}: expected a JSON list of product objects (asin, name, category, query, "
                               f"...), got a JSON {type(raw).__name__}")
    products: list[Product] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"{path}: product {i}"
        if not isinstance(item, dict):
            raise WebShopDataError(f"{where}: expected an object, got {type(item).__name__}")
        missing = [f for f in _REQUIRED_PRODUCT_FIELDS if f not in item]
        if missing:
            raise WebShopDataError(f"{where}: lacks field(s) {missing}; every product needs "
                                   f"{', '.join(_REQUIRED_PRODUCT_FIELDS)}")
        for field in _REQUIRED_PRODUCT_FIELDS:
            if not isinstance(item[field], str):
                raise WebShopDataError(f"{where}: field {field!r} must be a string, got {type(item[field]).__name__}")
        asin = item["asin"]
        where = f"{path}: product {i} (asin {asin})"
        # WebShop's engine drops these rather than failing: keep the same catalog.
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        description = item.get("full_description") or ""
        if not isinstance(description, str):
            raise WebShopDataError(f"{where}: field 'full_description' must be a string")
        price, price_tag = _product_price(asin, _parse_pricing(item.get("pricing"), where))
        products.append(Product(
            asin=asin, title=item["name"], category=item["category"].strip().lower(),
            product_type=item["query"].strip().lower(), attributes=attributes.get(asin, ()),
            options=_options(item.get("customization_options"), where), price=price,
            description=description, features=_bullets(item.get("small_description"), where),
            price_tag=price_tag,
        ))
    if not products:
        raise WebShopDataError(f"{path}: holds no usable product (each needs an asin of at most 10 characters)")
    return products


def _read_attributes(path: Path) -> tuple[dict[str, tuple[str, ...]], dict[str, SyntheticInstruction]]:
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise WebShopDataError(f"{path}: expected a JSON object mapping an asin to {{\"attributes\": [...], "
                               f"\"instruction\": ..., \"instruction_attributes\": [...]}}, got a JSON "
                               f"{type(raw).__name__}")
    attributes: dict[str, tuple[str, ...]] = {}
    synthetic: dict[str, SyntheticInstruction] = {}
    for asin, entry in raw.items():
        where = f"{path}: asin {asin}"
        if not isinstance(entry, dict):
            raise WebShopDataError(f"{where}: expected an object with 'attributes', 'instruction' and "
                                   f"'instruction_attributes', got {type(entry).__name__}")
        if entry.get("attributes") is not None:
            attributes[asin] = _strings(entry["attributes"], where, "attributes")
        text = entry.get("instruction")
        if text is None:
            continue
        if not isinstance(text, str):
            raise WebShopDataError(f"{where}: field 'instruction' must be a string, got {type(text).__name__}")
        wanted = _strings(entry.get("instruction_attributes") or [], where, "instruction_attributes")
        synthetic[asin] = SyntheticInstruction(text.strip(), wanted)
    return attributes, synthetic


def _read_human(path: Path) -> dict[str, list[HumanInstruction]]:
    raw = _read_json(path)
    shape = ("a JSON object mapping an asin to a list of {\"instruction\", \"instruction_attributes\", "
             "\"instruction_options\"} objects")
    if not isinstance(raw, dict):
        raise WebShopDataError(f"{path}: expected {shape}, got a JSON {type(raw).__name__}")
    human: dict[str, list[HumanInstruction]] = {}
    for asin, entries in raw.items():
        if not isinstance(entries, list):
            raise WebShopDataError(f"{path}: asin {asin}: expected a list of instruction objects, "
                                   f"got {type(entries).__name__}")
        goals = []
        for j, entry in enumerate(entries):
            where = f"{path}: asin {asin}, instruction {j}"
            if not isinstance(entry, dict) or not isinstance(entry.get("instruction"), str):
                raise WebShopDataError(f"{where}: needs a string field 'instruction'")
            if "instruction_attributes" not in entry:
                raise WebShopDataError(f"{where}: lacks field 'instruction_attributes' (a list of strings)")
            goals.append(HumanInstruction(
                instruction=entry["instruction"],
                attributes=_strings(entry["instruction_attributes"], where, "instruction_attributes"),
                options=_strings(entry.get("instruction_options") or [], where, "instruction_options"),
            ))
        human[asin] = goals
    return human


def load_data(data_dir: str | Path | None = None, products_file: str | None = None,
              attributes_file: str | None = None) -> WebShopData:
    """Read and check the WebShop files of ``data_dir`` (or ``$WEBSHOP_DATA``); cached per file version."""
    folder = resolve_folder(data_dir)
    products_path = _pick(folder, PRODUCT_FILES, products_file, "product catalog")
    attributes_path = _pick(folder, ATTRIBUTE_FILES, attributes_file, "attribute file")
    human_path = folder / HUMAN_GOALS_FILE
    paths = (products_path, attributes_path, human_path if human_path.is_file() else None)
    # The files' sizes and modification times are part of the key: a re-downloaded file is re-read.
    stamps = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) if p else None for p in paths)
    return _load(stamps)


@lru_cache(maxsize=4)
def _load(stamps: tuple) -> WebShopData:
    products_path, attributes_path = Path(stamps[0][0]), Path(stamps[1][0])
    human_path = Path(stamps[2][0]) if stamps[2] else None
    attributes, synthetic = _read_attributes(attributes_path)
    products = _read_products(products_path, attributes)
    return WebShopData(folder=products_path.parent, products_file=products_path, attributes_file=attributes_path,
                       human_file=human_path, products=products, synthetic=synthetic,
                       human=_read_human(human_path) if human_path else None)
