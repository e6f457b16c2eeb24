"""The generated product catalog of the mini-WebShop.

WebShop ships 1.18M scraped Amazon products; we generate a small catalog in the same shape from a
fixed seed instead, so the environment needs no download and every run sees the same products.

Each product has a WebShop-style ASIN, a title, a category and product type, a few *attributes*
("machine washable", "gluten free", ...), buying *options* (size, color, flavor, ... with several
values each), a price, a description and feature bullets. Goals (see ``goals.py``) are built from a
target product, and the reward (``reward.py``) compares what was bought against that goal.

The option value pools below are chosen so that no two values of one product type fuzzy-match each
other under the reward's option matcher; otherwise buying the wrong size could earn the option
point. A test checks this property for every type.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

DEFAULT_CATALOG_SEED = 2022
"""WebShop's paper year; any fixed number would do. The catalog depends on nothing else."""

PRODUCTS_PER_TYPE = 30
"""40 product types x 30 = 1,200 products."""


@dataclass(frozen=True)
class ProductType:
    """A kind of product ("polo shirt") and everything needed to generate instances of it."""

    name: str
    """Lowercase, singular; goals and the type reward use it."""
    category: str
    attributes: tuple[str, ...]
    """Pool a product draws 3 attributes from."""
    options: tuple[tuple[str, tuple[str, ...]], ...]
    """(option name, pool of values) in page order; a product offers a subset of each pool."""
    price_range: tuple[int, int]
    details: tuple[str, ...]
    """Title endings that tell products of one type apart ("for Men", "Slim Fit")."""
    blurb: str
    """One sentence about the type, used in descriptions."""
    title_noun: str = ""
    """How titles spell the type; defaults to the name in title case."""

    @property
    def noun(self) -> str:
        return self.title_noun or string.capwords(self.name)


@dataclass(frozen=True)
class Product:
    """One item for sale. ``options`` maps an option name to the values offered, in page order."""

    asin: str
    title: str
    category: str
    product_type: str
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: float
    description: str
    features: tuple[str, ...]
    price_tag: str = ""
    """How pages show the price when it is not just ``price`` (WebShop shows ranges such as
    "$10.99 to $15.99" while scoring one price drawn from the range); empty for shop products."""

    @property
    def price_text(self) -> str:
        return self.price_tag or f"${self.price:.2f}"


class ProductSource(Protocol):
    """What the pages and the search index need of a catalog: shop's generated one or WebShop's files."""

    @property
    def products(self) -> Sequence[Product]: ...

    @property
    def by_asin(self) -> Mapping[str, Product]: ...


@dataclass
class Catalog:
    """All products of one catalog seed, with the look-ups the environment needs."""

    seed: int
    products: list[Product]
    by_asin: dict[str, Product] = field(init=False)
    by_type: dict[str, list[Product]] = field(init=False)

    def __post_init__(self) -> None:
        self.by_asin = {p.asin: p for p in self.products}
        self.by_type = {}
        for p in self.products:
            self.by_type.setdefault(p.product_type, []).append(p)

    def __len__(self) -> int:
        return len(self.products)


# --------------------------------------------------------------------------------------------
# Vocabulary of the catalog. Option pools are shared between similar types on purpose: it makes
# search results for one type contain look-alike products, as in the real WebShop.
# --------------------------------------------------------------------------------------------

APPAREL_COLORS = ("black", "white", "navy", "heather grey", "burgundy", "olive", "khaki", "pink")
APPAREL_SIZES = ("x-small", "small", "medium", "large", "x-large")
SHOE_SIZES = ("6", "7", "8", "9", "10", "11", "12")
HOME_COLORS = ("ivory", "charcoal", "sage green", "dusty rose", "mustard yellow", "teal", "cream")
TECH_COLORS = ("black", "white", "silver", "space gray", "midnight blue", "rose gold")
LIQUID_SIZES = ("1.7 fl oz", "3.4 fl oz", "8 fl oz", "16 fl oz")
FOOD_WEIGHTS = ("8 ounce", "12 ounce", "1 pound", "2.5 pound")
COUNTS = ("6 count", "18 count", "40 count")
CABLE_LENGTHS = ("3 feet", "6 feet", "10 feet")

CATEGORIES = ("fashion", "beauty", "grocery", "electronics", "home")

PRODUCT_TYPES: tuple[ProductType, ...] = (
    # fashion ----------------------------------------------------------------------------------
    ProductType("polo shirt", "fashion",
                ("machine washable", "moisture wicking", "wrinkle free", "breathable", "slim fit",
                 "short sleeve"),
                (("color", APPAREL_COLORS), ("size", APPAREL_SIZES)), (14, 45),
                ("for Men", "for Women", "Classic Fit", "Pique Cotton", "Golf Style"),
                "A collared shirt that works at the office and on the course."),
    ProductType("hoodie", "fashion",
                ("machine washable", "fleece lined", "relaxed fit", "long sleeve", "breathable",
                 "pill resistant"),
                (("color", APPAREL_COLORS), ("size", APPAREL_SIZES)), (22, 65),
                ("Pullover", "Full Zip", "for Men", "for Women", "Heavyweight"),
                "A warm layer for cool mornings and lazy weekends."),
    ProductType("running shoe", "fashion",
                ("non slip", "lightweight", "breathable", "arch support", "memory foam",
                 "water resistant"),
                (("color", APPAREL_COLORS), ("size", SHOE_SIZES)), (35, 120),
                ("for Men", "for Women", "Trail Edition", "Road Edition", "Wide Toe Box"),
                "A cushioned shoe built for daily miles."),
    ProductType("rain jacket", "fashion",
                ("water resistant", "packable", "lightweight", "hooded", "windproof",
                 "machine washable"),
                (("color", APPAREL_COLORS), ("size", APPAREL_SIZES)), (30, 110),
                ("for Men", "for Women", "Travel Shell", "Hiking Shell", "City Cut"),
                "A shell that keeps showers out and packs down small."),
    ProductType("backpack", "fashion",
                ("water resistant", "lightweight", "padded straps", "laptop compartment",
                 "anti theft", "durable"),
                (("color", APPAREL_COLORS), ("style", ("daypack", "rolltop", "commuter"))), (25, 90),
                ("for Travel", "for School", "20 Liter", "30 Liter", "Minimalist"),
                "A bag with room for a day's worth of gear."),
    ProductType("beanie", "fashion",
                ("soft", "stretchy", "warm", "cuffed", "hand knit", "unisex"),
                (("color", APPAREL_COLORS), ("style", ("ribbed knit", "cable knit", "slouchy"))), (9, 30),
                ("Winter Hat", "for Men", "for Women", "Merino Blend", "Chunky"),
                "A knit hat for cold days."),
    ProductType("belt", "fashion",
                ("genuine leather", "adjustable", "durable", "reversible", "nickel free"),
                (("color", ("black", "brown", "tan", "cognac", "espresso")),
                 ("size", ("32", "34", "36", "38", "40", "42"))), (12, 55),
                ("for Men", "for Women", "Dress Style", "Casual Style", "Wide Strap"),
                "A strap that holds everything together."),
    ProductType("sundress", "fashion",
                ("machine washable", "flowy", "lightweight", "sleeveless", "pockets", "breathable"),
                (("color", APPAREL_COLORS), ("size", APPAREL_SIZES)), (20, 70),
                ("for Women", "Midi Length", "Maxi Length", "Floral Print", "Wrap Style"),
                "A light dress for warm afternoons."),
    # beauty -----------------------------------------------------------------------------------
    ProductType("shampoo", "beauty",
                ("sulfate free", "paraben free", "cruelty free", "natural ingredients",
                 "color safe", "dry hair"),
                (("size", LIQUID_SIZES), ("scent", ("lavender", "coconut", "argan", "eucalyptus",
                                                    "unscented"))), (6, 32),
                ("for Dry Hair", "for Curly Hair", "Daily Care", "Salon Formula", "Volumizing"),
                "A gentle wash that leaves hair clean and soft."),
    ProductType("lipstick", "beauty",
                ("long lasting", "cruelty free", "paraben free", "moisturizing", "matte finish",
                 "vegan"),
                (("color", ("classic red", "nude", "berry", "coral", "plum", "mauve")),), (5, 28),
                ("Satin Bullet", "Liquid Formula", "Everyday Shade", "Bold Shade", "Travel Size"),
                "A rich color that stays put all day."),
    ProductType("face serum", "beauty",
                ("fragrance free", "dermatologist tested", "anti aging", "hyaluronic acid",
                 "cruelty free", "sensitive skin"),
                (("size", LIQUID_SIZES),), (12, 60),
                ("with Vitamin C", "with Retinol", "Brightening", "Overnight", "Hydrating"),
                "A light serum that absorbs quickly."),
    ProductType("nail polish", "beauty",
                ("long lasting", "quick drying", "cruelty free", "chip resistant", "vegan",
                 "easy to apply"),
                (("color", ("classic red", "nude", "berry", "coral", "plum", "mauve")),), (4, 18),
                ("Gel Effect", "Glossy Finish", "Salon Shade", "Set of One", "Top Coat Ready"),
                "A polish with a smooth, even finish."),
    ProductType("sunscreen", "beauty",
                ("water resistant", "reef safe", "fragrance free", "broad spectrum",
                 "sensitive skin", "non greasy"),
                (("size", LIQUID_SIZES),), (7, 30),
                ("SPF 30", "SPF 50", "Sport Lotion", "Face Lotion", "Mineral Formula"),
                "Everyday protection from the sun."),
    ProductType("body lotion", "beauty",
                ("paraben free", "non greasy", "long lasting", "natural ingredients",
                 "dry skin", "cruelty free"),
                (("size", LIQUID_SIZES), ("scent", ("lavender", "coconut", "shea", "eucalyptus",
                                                    "unscented"))), (6, 30),
                ("Daily Moisture", "Intensive Repair", "Whipped", "Light Feel", "Overnight"),
                "A lotion that keeps skin soft through the day."),
    ProductType("perfume", "beauty",
                ("long lasting", "cruelty free", "travel friendly", "natural ingredients",
                 "vegan"),
                (("size", LIQUID_SIZES), ("scent", ("citrus", "woody", "floral", "vanilla musk",
                                                    "ocean breeze"))), (18, 95),
                ("Eau de Parfum", "Eau de Toilette", "for Women", "for Men", "Rollerball"),
                "A signature scent for every day."),
    ProductType("eyeshadow palette", "beauty",
                ("long lasting", "highly pigmented", "cruelty free", "blendable", "vegan",
                 "talc free"),
                (("style", ("neutral tones", "smoky tones", "sunset tones", "jewel tones")),), (9, 48),
                ("12 Shades", "18 Shades", "Matte and Shimmer", "Travel Palette", "Pro Palette"),
                "A palette for looks from soft to bold."),
    # grocery ----------------------------------------------------------------------------------
    ProductType("ground coffee", "grocery",
                ("usda organic", "fair trade", "non gmo", "kosher", "low acid", "gluten free"),
                (("flavor", ("medium roast", "dark roast", "french vanilla", "hazelnut", "mocha")),
                 ("size", FOOD_WEIGHTS)), (8, 35),
                ("Whole Bean Blend", "Single Origin", "Breakfast Blend", "Espresso Grind",
                 "Cold Brew Grind"),
                "A smooth cup from beans roasted in small batches."),
    ProductType("herbal tea", "grocery",
                ("caffeine free", "usda organic", "non gmo", "kosher", "gluten free", "vegan"),
                (("flavor", ("chamomile", "peppermint", "ginger", "hibiscus", "rooibos")),
                 ("size", COUNTS)), (4, 20),
                ("Tea Bags", "Loose Leaf", "Bedtime Blend", "Wellness Blend", "Sampler"),
                "A calming brew for any time of day."),
    ProductType("granola bar", "grocery",
                ("gluten free", "high protein", "non gmo", "low sugar", "kosher", "vegan"),
                (("flavor", ("peanut butter", "oats and honey", "dark chocolate chip",
                             "blueberry", "almond")), ("size", COUNTS)), (5, 28),
                ("Chewy Bars", "Crunchy Bars", "Snack Pack", "Variety Box", "Kids Size"),
                "A snack bar for the trail or the desk."),
    ProductType("hot sauce", "grocery",
                ("gluten free", "non gmo", "sugar free", "kosher", "small batch", "vegan"),
                (("flavor", ("habanero", "chipotle", "jalapeno", "ghost pepper", "garlic")),
                 ("size", ("5 fl oz", "12 fl oz", "30 fl oz"))), (4, 22),
                ("Extra Hot", "Mild Blend", "Smoky Blend", "Gift Set", "Squeeze Bottle"),
                "A bottle of heat for tacos, eggs and wings."),
    ProductType("protein powder", "grocery",
                ("gluten free", "sugar free", "non gmo", "keto friendly", "high protein",
                 "vegan"),
                (("flavor", ("vanilla", "double chocolate", "strawberry", "cookies and cream",
                             "unflavored")), ("size", FOOD_WEIGHTS)), (18, 70),
                ("Whey Isolate", "Plant Based", "Post Workout", "Meal Shake", "Lean Blend"),
                "A shake that mixes smooth with water or milk."),
    ProductType("olive oil", "grocery",
                ("extra virgin", "cold pressed", "usda organic", "non gmo", "kosher",
                 "gluten free"),
                (("size", ("8.5 fl oz", "16.9 fl oz", "33.8 fl oz")),), (8, 40),
                ("from Italy", "from Spain", "from Greece", "Glass Bottle", "Tin Can"),
                "A fruity oil for dressings and cooking."),
    ProductType("trail mix", "grocery",
                ("gluten free", "high protein", "non gmo", "kosher", "no added sugar", "vegan"),
                (("flavor", ("sweet and salty", "tropical", "nut lovers", "cranberry crunch")),
                 ("size", FOOD_WEIGHTS)), (6, 30),
                ("Snack Pack", "Resealable Bag", "Family Size", "Mountain Blend", "Energy Mix"),
                "A handful of nuts and fruit for the road."),
    ProductType("chocolate bar", "grocery",
                ("fair trade", "usda organic", "non gmo", "gluten free", "kosher", "dairy free"),
                (("flavor", ("sea salt", "raspberry", "orange zest", "toffee crunch",
                             "espresso bean")), ("size", COUNTS)), (5, 32),
                ("70 Percent Cacao", "Milk Chocolate", "Gift Box", "Baking Bar", "Thin Bar"),
                "A bar of rich, smooth chocolate."),
    # electronics ------------------------------------------------------------------------------
    ProductType("phone case", "electronics",
                ("shockproof", "wireless charging compatible", "slim", "scratch resistant",
                 "raised edges", "easy to install"),
                (("color", TECH_COLORS),
                 ("style", ("clear", "leather wallet", "rugged armor", "silicone"))), (8, 40),
                ("for iPhone", "for Galaxy", "for Pixel", "with Kickstand", "with Card Slot"),
                "A case that guards your phone from drops."),
    ProductType("usb cable", "electronics",
                ("fast charging", "braided", "durable", "high speed", "tangle free"),
                (("color", TECH_COLORS), ("length", CABLE_LENGTHS)), (6, 25),
                ("USB C to USB C", "USB C to Lightning", "USB A to USB C", "2 Pack", "Right Angle"),
                "A cable for charging and syncing.", "USB Cable"),
    ProductType("headset", "electronics",
                ("noise cancelling", "wireless", "long battery life", "built in microphone",
                 "lightweight", "foldable"),
                (("color", TECH_COLORS),), (20, 160),
                ("Over Ear", "On Ear", "for Gaming", "for Office", "Bluetooth 5.3"),
                "A headset with clear sound and a comfortable fit."),
    ProductType("bluetooth speaker", "electronics",
                ("water resistant", "portable", "long battery life", "loud bass", "wireless",
                 "dustproof"),
                (("color", TECH_COLORS),), (18, 150),
                ("Mini", "Outdoor Edition", "Party Edition", "with Stereo Pairing", "Shower Size"),
                "A speaker that fills a room and fits a bag."),
    ProductType("power bank", "electronics",
                ("fast charging", "portable", "lightweight", "led display", "dual output"),
                (("color", TECH_COLORS), ("capacity", ("5000mah", "12000mah", "26800mah"))), (15, 80),
                ("Slim", "for Travel", "with USB C", "Magnetic", "Solar Ready"),
                "A battery pack that keeps devices going."),
    ProductType("wireless mouse", "electronics",
                ("ergonomic", "rechargeable", "silent click", "long battery life", "lightweight",
                 "plug and play"),
                (("color", TECH_COLORS),), (9, 70),
                ("for Laptop", "Vertical Grip", "Compact", "for Office", "Travel Size"),
                "A mouse that glides and clicks quietly."),
    ProductType("laptop stand", "electronics",
                ("adjustable", "foldable", "heavy duty", "portable", "ventilated", "non slip"),
                (("color", TECH_COLORS),), (15, 60),
                ("Aluminum", "for Desk", "Ergonomic Riser", "Travel Size", "Dual Arm"),
                "A stand that lifts the screen to eye level."),
    ProductType("webcam", "electronics",
                ("plug and play", "built in microphone", "auto focus", "wide angle",
                 "privacy cover"),
                (("resolution", ("720p", "1080p", "4k")),), (20, 120),
                ("for Streaming", "for Video Calls", "with Ring Light", "USB", "Clip On"),
                "A camera for crisp video calls."),
    # home -------------------------------------------------------------------------------------
    ProductType("throw pillow cover", "home",
                ("machine washable", "hidden zipper", "soft", "fade resistant", "double sided"),
                (("color", HOME_COLORS), ("size", ("18 by 18 inch", "22 by 22 inch",
                                                   "lumbar 12 by 20 inch"))), (8, 32),
                ("Set of 2", "Velvet", "Linen Blend", "Boho Pattern", "Farmhouse Style"),
                "A cover that refreshes a sofa in seconds."),
    ProductType("shower curtain", "home",
                ("water resistant", "machine washable", "mildew resistant", "rust proof",
                 "easy to install"),
                (("color", HOME_COLORS), ("size", ("standard", "stall size", "extra long"))), (10, 40),
                ("with Hooks", "Fabric", "Waffle Weave", "Striped", "Hotel Style"),
                "A curtain that keeps the bathroom dry and bright."),
    ProductType("bath towel", "home",
                ("quick drying", "highly absorbent", "machine washable", "soft", "lint free"),
                (("color", HOME_COLORS), ("size", ("hand towel", "bath sheet", "washcloth"))), (10, 50),
                ("Set of 4", "Turkish Cotton", "Hotel Quality", "Oversized", "Ribbed"),
                "A plush towel that dries fast."),
    ProductType("table lamp", "home",
                ("dimmable", "energy efficient", "usb port", "touch control", "easy to install"),
                (("color", HOME_COLORS), ("style", ("ceramic base", "brass base", "wood base"))),
                (20, 95),
                ("for Bedroom", "for Living Room", "Set of 2", "Modern", "Mid Century"),
                "A lamp that gives a warm, even light."),
    ProductType("garden hose", "home",
                ("heavy duty", "kink free", "lightweight", "expandable", "leak proof"),
                (("length", ("25 feet", "60 feet", "100 feet")),), (15, 70),
                ("with Spray Nozzle", "Flexible", "Hybrid Rubber", "Coiled", "Drinking Water Safe"),
                "A hose that reaches every corner of the yard."),
    ProductType("plant pot", "home",
                ("drainage hole", "indoor outdoor", "lightweight", "frost resistant", "ceramic"),
                (("color", HOME_COLORS), ("size", ("4 inch", "8 inch", "12 inch"))), (9, 48),
                ("with Saucer", "Set of 3", "Self Watering", "Hanging", "Minimalist"),
                "A pot that gives plants room to grow."),
    ProductType("bed sheet set", "home",
                ("deep pocket", "machine washable", "wrinkle free", "breathable", "soft",
                 "fade resistant"),
                (("color", HOME_COLORS), ("size", ("twin", "full", "queen", "king"))), (25, 110),
                ("4 Piece", "6 Piece", "Microfiber", "Cotton Percale", "Bamboo Blend"),
                "Sheets that stay cool and smooth all night."),
    ProductType("doormat", "home",
                ("non slip", "heavy duty", "easy to clean", "water resistant", "indoor outdoor"),
                (("color", HOME_COLORS), ("size", ("17 by 30 inch", "24 by 36 inch",
                                                   "3 by 5 feet"))), (12, 45),
                ("Coir", "Rubber Backed", "Welcome Design", "Low Profile", "Farmhouse Style"),
                "A mat that catches dirt at the door."),
)

TYPES_BY_NAME = {t.name: t for t in PRODUCT_TYPES}

BRANDS = ("Lunaris", "Northwind", "Brightfield", "Oakvale", "Maplecrest", "Silverleaf",
          "Bluepeak", "Copperline", "Driftwood", "Evergreen", "Foxhollow", "Goldcrest",
          "Harborview", "Ironbark", "Juniper", "Kestrel", "Larkspur", "Moonstone", "Nimbus",
          "Orchardly")
STYLE_WORDS = ("Classic", "Premium", "Essential", "Everyday", "Deluxe", "Signature", "Basic",
               "Pro", "Ultra", "Modern")
FEATURE_LINES = (
    "checked for quality before it ships",
    "made to hold up to daily use",
    "a thoughtful gift for friends and family",
    "backed by our satisfaction promise",
    "designed with comfort and convenience in mind",
)
CLOSINGS = (
    "Order today and see the difference.",
    "Loved by customers who care about the details.",
    "Simple, reliable and ready when you are.",
)

_ASIN_ALPHABET = string.ascii_uppercase + string.digits


def _make_product(rng: random.Random, ptype: ProductType, asin: str) -> Product:
    brand = rng.choice(BRANDS)
    style = rng.choice(STYLE_WORDS)
    detail = rng.choice(ptype.details)
    attributes = tuple(rng.sample(ptype.attributes, 3))
    options = {}
    for name, pool in ptype.options:
        k = rng.randint(min(3, len(pool)), len(pool))
        chosen = set(rng.sample(pool, k))
        options[name] = tuple(v for v in pool if v in chosen)  # keep the pool's natural order
    lo, hi = ptype.price_range
    price = rng.randint(lo, hi) + rng.choice((0.99, 0.49, 0.95, 0.0))
    # Two attributes go in the title like Amazon's keyword-stuffed titles; the third is only in
    # the feature bullets, so the reward's fuzzy text match has something to find.
    in_title = ", ".join(string.capwords(a) for a in attributes[:2])
    title = f"{brand} {style} {ptype.noun} {detail}, {in_title}"
    features = tuple(f"{a.capitalize()}: {rng.choice(FEATURE_LINES)}" for a in attributes)
    description = (f"{brand} presents the {style.lower()} {ptype.name} {detail.lower()}. "
                   f"{ptype.blurb} {rng.choice(CLOSINGS)}")
    return Product(asin=asin, title=title, category=ptype.category, product_type=ptype.name,
                   attributes=attributes, options=options, price=round(price, 2),
                   description=description, features=features)


@lru_cache(maxsize=4)
def build_catalog(seed: int = DEFAULT_CATALOG_SEED) -> Catalog:
    """The catalog for ``seed``; cached, so every environment of a process shares one."""
    rng = random.Random(f"shop-catalog|{seed}")
    products: list[Product] = []
    asins: set[str] = set()
    titles: set[str] = set()
    for ptype in PRODUCT_TYPES:
        made = 0
        while made < PRODUCTS_PER_TYPE:
            asin = "B0" + "".join(rng.choices(_ASIN_ALPHABET, k=8))
            product = _make_product(rng, ptype, asin)
            # Unique titles let the expert find its target by searching the title.
            if asin in asins or product.title in titles:
                continue
            asins.add(asin)
            titles.add(product.title)
            products.append(product)
            made += 1
    return Catalog(seed=seed, products=products)
