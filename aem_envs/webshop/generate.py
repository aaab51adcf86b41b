"""A seeded generator of WebShop-style catalogs, written in the original file formats.

Why generate: the original catalog (1.18M scraped products) cannot be redistributed or
downloaded here, so aem ships a realistic stand-in. Products come in *families*: one brand's
product type in several near-duplicate variants that differ in one attribute, their option
values and their price, so that finding the goal's product takes search *and* choice, as in
the original. Every goal is a human-style instruction naming the product type, some of the
target's attributes (always the one that sets it apart from its siblings) and option values;
the loader appends the original ``, and price lower than X dollars`` text.

Run ``python -m aem_envs.webshop.generate --out DIR`` to write a catalog (the defaults make
the bundled one); :func:`generate_catalog` gives the same catalog in memory.
"""

from __future__ import annotations

import argparse
import random
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aem_envs.core.errors import DataError
from aem_envs.core.io import atomic_write_json
from aem_envs.webshop.catalog import Catalog
from aem_envs.webshop.data import OriginalRecords, build_catalog, write_original

BUNDLED_PRODUCTS = 10_000
BUNDLED_GOALS = 3_000
BUNDLED_SEED = 2022

# ------------------------------------------------------------------------------ vocabulary
# Option pools, referenced by the product types below. Values never contain "/" (the loader
# shows it as " | ") and never repeat across the groups of one product type.

_COLORS = (
    "black", "white", "navy blue", "grey", "red", "pink", "beige", "olive green", "burgundy",
    "light blue", "brown", "khaki", "purple", "teal", "mustard yellow", "charcoal", "ivory",
)  # fmt: skip
_APPAREL_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large")
_SHOE_SIZES = ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12")
_WAIST_SIZES = ("26", "27", "28", "29", "30", "31", "32", "34", "36")
_WOOD_COLORS = ("walnut", "espresso", "white", "black", "natural oak", "rustic brown", "grey")
_UPHOLSTERY = ("dark grey", "light grey", "navy blue", "beige", "green velvet", "cream", "rust")
_DEVICE_COLORS = ("black", "white", "silver", "rose gold", "midnight blue", "space grey", "red")
_BED_SIZES = ("twin", "twin xl", "full", "queen", "king", "california king")
_PACKS = ("pack of 1", "pack of 2", "pack of 3", "pack of 4", "pack of 6", "pack of 12")
_SETS = ("set of 1", "set of 2", "set of 4")
_FLUID = ("8 fl oz", "12 fl oz", "16 fl oz", "25.4 fl oz", "33.8 fl oz")
_CREAM = ("1 ounce", "1.7 ounce", "2.5 ounce", "3.4 ounce")
_LIP_COLORS = ("ruby red", "nude pink", "berry", "coral", "mauve", "plum", "brick red", "peach")
_NAIL_COLORS = ("cherry red", "ballet pink", "jet black", "lilac", "teal", "gold glitter", "nude")
_PALETTES = ("nude", "smoky", "warm sunset", "rose", "bronze", "pastel", "galaxy")
_SCENTS = ("lavender", "coconut", "citrus", "unscented", "eucalyptus mint", "rose", "vanilla")
_BAR_FLAVORS = (
    "chocolate chip", "peanut butter", "almond butter", "blueberry", "sea salt caramel",
    "cookie dough", "lemon", "dark chocolate", "cinnamon roll",
)  # fmt: skip
_COFFEE_FLAVORS = (
    "hazelnut", "french vanilla", "colombian", "breakfast blend", "mocha", "caramel", "espresso",
)  # fmt: skip
_TEA_FLAVORS = ("jasmine", "peppermint", "lemon ginger", "matcha", "honey", "chamomile", "chai")
_JERKY_FLAVORS = (
    "teriyaki", "original", "peppered", "sweet and spicy", "hickory smoked", "sriracha",
)  # fmt: skip
_CANDY_FLAVORS = (
    "assorted fruit", "sour cherry", "watermelon", "peach rings", "strawberry", "tropical",
)  # fmt: skip
_SPICE_FLAVORS = ("garlic herb", "lemon pepper", "cajun", "taco", "everything bagel", "italian")
_PASTA_STYLES = ("spaghetti", "penne", "rotini", "fusilli", "elbow", "linguine", "farfalle")
_FOOD_WEIGHTS = ("2 ounce", "4 ounce", "8 ounce", "12 ounce", "1 pound", "2 pound")
_COUNTS = ("6 count", "12 count", "20 count", "24 count", "40 count", "100 count")
_CAPACITIES = ("5000mah", "10000mah", "20000mah", "26800mah")
_CABLE_LENGTHS = ("3 feet", "6 feet", "10 feet", "15 feet", "25 feet")
_SCREENS = ("32 inch", "43 inch", "50 inch", "55 inch", "65 inch", "75 inch")
_PHONES = ("iphone 13", "iphone 14", "iphone 14 pro", "iphone 15", "galaxy s23", "pixel 8")
_TIERS = ("3-tier", "4-tier", "5-tier")
_SOFA_SIZES = ("loveseat", "3-seat sofa", "sectional", "sleeper sofa")
_TABLE_SIZES = ("39 inch", "43 inch", "47 inch", "55 inch")
_RUG_SIZES = ("2 x 3 feet", "3 x 5 feet", "5 x 7 feet", "8 x 10 feet", "runner 2 x 6 feet")
_ARMS = ("with armrests", "without armrests", "with footrest")
_CAMERA_PACKS = ("1 camera", "2 cameras", "4 cameras")


@dataclass(frozen=True)
class ProductType:
    """One kind of product and the vocabulary its listings draw from."""

    noun: str
    #: The query the original products were scraped under.
    query: str
    #: Breadcrumb levels below the category's root.
    path: tuple[str, ...]
    attributes: tuple[str, ...]
    #: Option group name (as on the product page) → the pool of values.
    options: Mapping[str, tuple[str, ...]]
    price: tuple[float, float]
    #: Phrases appended to some titles, e.g. "for Women".
    audiences: tuple[str, ...] = ()


@dataclass(frozen=True)
class Category:
    """One of WebShop's five top-level categories."""

    name: str
    root: str
    #: Description sentences; ``{noun}`` and ``{brand}`` are filled in.
    sentences: tuple[str, ...]
    types: tuple[ProductType, ...]


def _type(
    noun: str,
    path: str,
    attributes: str,
    options: Mapping[str, tuple[str, ...]],
    price: tuple[float, float],
    *,
    query: str | None = None,
    audiences: tuple[str, ...] = (),
) -> ProductType:
    return ProductType(
        noun=noun,
        query=query or noun,
        path=tuple(level.strip() for level in path.split("›")),
        attributes=tuple(a.strip() for a in attributes.split(",")),
        options=options,
        price=price,
        audiences=audiences,
    )


CATEGORIES: tuple[Category, ...] = (
    Category(
        "beauty",
        "Beauty & Personal Care",
        (
            "{brand} {noun} is made with care for everyday use.",
            "Dermatologist tested and suitable for all skin types.",
            "Not tested on animals and packed in recyclable materials.",
            "Apply as needed and enjoy salon quality results at home.",
            "Our formula is gentle enough for daily use.",
        ),
        (
            _type(
                "shampoo",
                "Hair Care › Shampoo & Conditioner › Shampoos",
                "sulfate free, paraben free, natural ingredients, dry hair, hair growth, "
                "argan oil, tea tree, coconut oil, color treated hair, cruelty free",
                {"size": _FLUID, "scent": _SCENTS},
                (6, 40),
                audiences=("for Women", "for Men", "for Dry Damaged Hair"),
            ),
            _type(
                "face moisturizer",
                "Skin Care › Face › Creams & Moisturizers › Face Moisturizers",
                "hyaluronic acid, dry skin, sensitive skin, fine lines, oil free, spf 30, "
                "fragrance free, vitamin c, non greasy, anti aging",
                {"size": _CREAM},
                (10, 70),
                query="face moisturizer cream",
            ),
            _type(
                "lipstick",
                "Makeup › Lips › Lipstick",
                "long lasting, matte finish, highly pigmented, cruelty free, vegan, "
                "paraben free, moisturizing, waterproof",
                {"color": _LIP_COLORS, "item package quantity": _PACKS[:3]},
                (5, 30),
            ),
            _type(
                "nail polish",
                "Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish",
                "long lasting, quick dry, non toxic, gel polish, high gloss, chip resistant",
                {"color": _NAIL_COLORS, "size": _PACKS[:4]},
                (4, 25),
            ),
            _type(
                "hair dryer",
                "Hair Care › Styling Tools & Appliances › Hair Dryers & Accessories",
                "ionic technology, fast drying, low noise, lightweight, ceramic tourmaline, "
                "cool shot, diffuser attachment, foldable handle",
                {"color": _DEVICE_COLORS},
                (20, 150),
                query="blow dryer",
            ),
            _type(
                "eyeshadow palette",
                "Makeup › Eyes › Eyeshadow",
                "highly pigmented, long lasting, shimmer, matte finish, easy blend, "
                "cruelty free, travel size",
                {"color": _PALETTES},
                (8, 45),
            ),
            _type(
                "body lotion",
                "Skin Care › Body › Moisturizers › Lotions",
                "shea butter, dry skin, non greasy, fragrance free, natural ingredients, "
                "cocoa butter, fast absorbing, paraben free",
                {"size": _FLUID, "scent": _SCENTS},
                (5, 30),
            ),
            _type(
                "makeup brush set",
                "Tools & Accessories › Makeup Brushes & Tools › Brush Sets",
                "synthetic hair, cruelty free, soft bristles, travel case, easy clean, "
                "wooden handle",
                {"color": _DEVICE_COLORS, "size": ("8 piece", "12 piece", "16 piece")},
                (8, 40),
            ),
            _type(
                "electric toothbrush",
                "Oral Care › Toothbrushes & Accessories › Powered Toothbrushes",
                "rechargeable, long battery life, travel case, soft bristles, waterproof, "
                "smart timer, teeth whitening",
                {"color": _DEVICE_COLORS},
                (20, 120),
            ),
        ),
    ),
    Category(
        "food",
        "Grocery & Gourmet Food",
        (
            "Enjoy {brand} {noun} at home, at work or on the go.",
            "Made in a facility that follows strict quality standards.",
            "Store in a cool, dry place and enjoy within six months of opening.",
            "A pantry favorite for families and busy professionals.",
            "Great for sharing, gifting and everyday snacking.",
        ),
        (
            _type(
                "protein bars",
                "Snacks › Snack Bars › Protein Bars",
                "gluten free, high protein, low sugar, non gmo, keto friendly, plant based, "
                "dairy free, kosher, individually wrapped",
                {"flavor name": _BAR_FLAVORS, "size": _COUNTS[:4]},
                (8, 45),
                query="protein snack bars",
            ),
            _type(
                "ground coffee",
                "Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
                "medium roast, dark roast, fair trade, usda organic, single origin, "
                "low acid, freshly roasted",
                {"flavor name": _COFFEE_FLAVORS, "size": _FOOD_WEIGHTS[3:]},
                (8, 40),
            ),
            _type(
                "green tea",
                "Beverages › Coffee, Tea & Cocoa › Tea › Green",
                "usda organic, non gmo, individually wrapped, sugar free, gluten free, "
                "caffeine free, antioxidant rich",
                {"flavor name": _TEA_FLAVORS, "size": _COUNTS[2:]},
                (5, 25),
                query="green tea bags",
            ),
            _type(
                "beef jerky",
                "Snacks › Jerky & Dried Meats › Jerky",
                "high protein, low fat, gluten free, grass fed, low carb, keto friendly, "
                "no preservatives",
                {"flavor name": _JERKY_FLAVORS, "size": _FOOD_WEIGHTS[:4]},
                (10, 45),
            ),
            _type(
                "olive oil",
                "Pantry Staples › Cooking & Baking › Oils › Olive",
                "extra virgin, cold pressed, usda organic, non gmo, kosher, gluten free, "
                "first harvest",
                {"size": _FLUID[2:], "item package quantity": _PACKS[:3]},
                (10, 60),
                query="extra virgin olive oil",
            ),
            _type(
                "gummy candy",
                "Snacks › Candy & Chocolate › Gummy Candy",
                "gluten free, fat free, vegan, individually wrapped, natural flavors, "
                "resealable bag, peanut free",
                {"flavor name": _CANDY_FLAVORS, "size": _FOOD_WEIGHTS[:5]},
                (5, 30),
            ),
            _type(
                "pasta",
                "Pantry Staples › Pasta & Noodles › Dry Pasta",
                "gluten free, whole wheat, high protein, usda organic, non gmo, low carb, "
                "made in italy",
                {"style": _PASTA_STYLES, "item package quantity": _PACKS[2:]},
                (5, 35),
                query="dry pasta",
            ),
            _type(
                "seasoning blend",
                "Pantry Staples › Herbs, Spices & Seasonings › Mixed Spices & Seasonings",
                "salt free, gluten free, non gmo, usda organic, kosher, low sodium, no msg",
                {"flavor name": _SPICE_FLAVORS, "size": _FOOD_WEIGHTS[:4]},
                (4, 25),
                query="spices and seasonings",
            ),
        ),
    ),
    Category(
        "fashion",
        "Clothing, Shoes & Jewelry",
        (
            "The {brand} {noun} pairs well with jeans, shorts or skirts.",
            "Perfect for casual wear, travel, work and weekends.",
            "Please check the size chart before ordering.",
            "Soft fabric keeps you comfortable all day long.",
            "A great gift for family and friends.",
        ),
        (
            _type(
                "t-shirt",
                "Men › Clothing › Shirts › T-Shirts",
                "machine wash, short sleeve, crew neck, relaxed fit, moisture wicking, "
                "quick drying, cotton blend, classic fit",
                {"color": _COLORS, "size": _APPAREL_SIZES},
                (8, 35),
                query="men's t-shirts",
                audiences=("for Men", "for Men Big and Tall"),
            ),
            _type(
                "dress",
                "Women › Clothing › Dresses › Casual",
                "machine wash, long sleeve, v neck, button closure, elastic waist, hand wash, "
                "flowy hem, side pockets",
                {"color": _COLORS, "size": _APPAREL_SIZES},
                (15, 60),
                query="women's casual dresses",
                audiences=("for Women",),
            ),
            _type(
                "running shoes",
                "Men › Shoes › Athletic › Running › Road Running",
                "rubber sole, lace up, memory foam, non slip, breathable mesh, arch support, "
                "lightweight",
                {"color": _COLORS, "size": _SHOE_SIZES},
                (30, 140),
                query="men's running shoes",
                audiences=("for Men",),
            ),
            _type(
                "jeans",
                "Women › Clothing › Jeans",
                "machine wash, high waist, slim fit, button closure, stretch fabric, "
                "zipper closure, skinny leg",
                {
                    "color": ("light wash", "medium wash", "dark wash", "black", "white"),
                    "size": _WAIST_SIZES,
                },
                (20, 70),
                query="women's jeans",
                audiences=("for Women",),
            ),
            _type(
                "hoodie",
                "Men › Clothing › Active › Active Hoodies",
                "machine wash, fleece lined, drawstring closure, long sleeve, kangaroo pocket, "
                "pullover style",
                {"color": _COLORS, "size": _APPAREL_SIZES},
                (18, 60),
                query="men's hoodies",
                audiences=("for Men",),
            ),
            _type(
                "yoga leggings",
                "Women › Clothing › Active › Leggings",
                "high waist, tummy control, moisture wicking, squat proof, four way stretch, "
                "hand wash, hidden pocket",
                {"color": _COLORS, "size": _APPAREL_SIZES[:6]},
                (12, 45),
                query="women's leggings",
                audiences=("for Women",),
            ),
            _type(
                "sandals",
                "Women › Shoes › Sandals › Flat Sandals",
                "open toe, rubber sole, arch support, ankle strap, non slip, memory foam",
                {"color": _COLORS, "size": _SHOE_SIZES},
                (15, 70),
                query="women's sandals",
                audiences=("for Women",),
            ),
            _type(
                "athletic socks",
                "Men › Clothing › Socks › Athletic Socks",
                "moisture wicking, cushioned sole, breathable, arch support, machine wash",
                {
                    "color": _COLORS[:8],
                    "size": ("medium", "large", "x-large"),
                    "item package quantity": ("6 pairs", "10 pairs", "12 pairs"),
                },
                (8, 30),
                query="men's socks",
            ),
        ),
    ),
    Category(
        "furniture",
        "Home & Kitchen",
        (
            "The {brand} {noun} brings a modern look to any room.",
            "All hardware and instructions are included.",
            "Wipe clean with a damp cloth.",
            "Built to last with sturdy materials and careful craftsmanship.",
            "Fits apartments, dorms, offices and family homes.",
        ),
        (
            _type(
                "office chair",
                "Furniture › Home Office Furniture › Home Office Chairs › Desk Chairs",
                "lumbar support, adjustable height, easy assembly, high back, mesh back, "
                "heavy duty, swivel wheels",
                {"color": _COLORS[:8], "style": _ARMS},
                (60, 300),
            ),
            _type(
                "bookshelf",
                "Furniture › Living Room Furniture › Bookcases",
                "easy assembly, solid wood, engineered wood, storage space, space saving, "
                "anti tip hardware",
                {"color": _WOOD_COLORS, "size": _TIERS},
                (40, 250),
                query="bookcase",
            ),
            _type(
                "sofa",
                "Furniture › Living Room Furniture › Sofas & Couches",
                "mid century, easy assembly, living room, solid wood frame, high density foam, "
                "removable cushions",
                {"color": _UPHOLSTERY, "size": _SOFA_SIZES},
                (250, 1400),
                query="sofa couch",
            ),
            _type(
                "coffee table",
                "Furniture › Living Room Furniture › Tables › Coffee Tables",
                "easy assembly, living room, storage space, metal legs, solid wood, "
                "tempered glass, lift top",
                {"color": _WOOD_COLORS, "size": _TABLE_SIZES},
                (60, 350),
            ),
            _type(
                "nightstand",
                "Furniture › Bedroom Furniture › Nightstands",
                "easy assembly, storage space, solid wood, usb charging, soft close drawer, "
                "open shelf",
                {"color": _WOOD_COLORS, "item package quantity": _SETS[:2]},
                (40, 200),
            ),
            _type(
                "bed frame",
                "Furniture › Bedroom Furniture › Beds, Frames & Bases › Bed Frames",
                "heavy duty, easy assembly, no box spring needed, noise free, "
                "under bed storage, metal slats",
                {"size": _BED_SIZES, "color": ("black", "white", "grey", "walnut")},
                (90, 600),
            ),
            _type(
                "bar stools",
                "Furniture › Kitchen & Dining Room Furniture › Stools › Barstools",
                "adjustable height, swivel seat, footrest, pu leather, back support, easy assembly",
                {"color": _UPHOLSTERY, "item package quantity": _SETS[1:]},
                (60, 300),
            ),
            _type(
                "area rug",
                "Home Décor Products › Area Rugs, Runners & Pads › Area Rugs",
                "non slip, machine washable, living room, stain resistant, low pile, "
                "easy clean, boho style",
                {"color": _UPHOLSTERY, "size": _RUG_SIZES},
                (30, 350),
            ),
        ),
    ),
    Category(
        "electronics",
        "Electronics",
        (
            "The {brand} {noun} works out of the box with no setup needed.",
            "Backed by an 18 month warranty and friendly customer support.",
            "Compatible with most phones, tablets and laptops.",
            "Compact and durable for home, office and travel.",
            "What you get: the device, a user manual and a charging cable.",
        ),
        (
            _type(
                "wireless earbuds",
                "Headphones, Earbuds & Accessories › Headphones & Earbuds › Earbud Headphones",
                "noise cancelling, long battery life, water resistant, bluetooth 5.3, "
                "wireless charging, touch control, built in microphone",
                {"color": _DEVICE_COLORS},
                (20, 200),
                query="bluetooth earbuds",
            ),
            _type(
                "phone case",
                "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
                "shockproof, wireless charging, slim fit, scratch resistant, military grade, "
                "built in kickstand",
                {"color": _DEVICE_COLORS, "size": _PHONES},
                (6, 30),
            ),
            _type(
                "power bank",
                "Cell Phones & Accessories › Chargers & Power Adapters › Portable Power Banks",
                "fast charging, usb c, high capacity, led display, dual output",
                {"color": _DEVICE_COLORS[:4], "capacity": _CAPACITIES},
                (15, 70),
                query="portable charger",
            ),
            _type(
                "hdmi cable",
                "Computers & Accessories › Cables & Accessories › Cables & Interconnects "
                "› HDMI Cables",
                "high speed, 4k ultra hd, gold plated, nylon braided, ethernet support",
                {"size": _CABLE_LENGTHS, "item package quantity": _PACKS[:3]},
                (5, 25),
            ),
            _type(
                "bluetooth speaker",
                "Portable Audio & Video › Portable Speakers & Docks › Portable Bluetooth Speakers",
                "waterproof, long battery life, portable, stereo sound, built in microphone, "
                "bass boost",
                {"color": _DEVICE_COLORS},
                (20, 250),
            ),
            _type(
                "wireless mouse",
                "Computers & Accessories › Computer Accessories & Peripherals › Mice",
                "ergonomic design, silent click, rechargeable, usb receiver, plug and play, "
                "adjustable dpi",
                {"color": _DEVICE_COLORS},
                (10, 60),
            ),
            _type(
                "smart tv",
                "Television & Video › Televisions › LED & LCD TVs",
                "4k ultra hd, hdr10, dolby vision, built in wifi, voice remote, high refresh rate",
                {"size": _SCREENS},
                (150, 1500),
                query="4k tv",
            ),
            _type(
                "security camera",
                "Camera & Photo › Video Surveillance › Surveillance Cameras",
                "night vision, motion detection, two way audio, 1080p hd, weatherproof, "
                "easy install",
                {"color": ("white", "black"), "item package quantity": _CAMERA_PACKS},
                (25, 200),
            ),
        ),
    ),
)

_BRAND_SYLLABLES = (
    "lu", "na", "vel", "zor", "ka", "mi", "ro", "ta", "ven", "qui", "sol", "bri", "dex", "mo",
    "ra", "tek", "fi", "no", "ja", "ly", "par", "gen", "vo", "xa", "ber", "cor", "el", "sa",
)  # fmt: skip
_INSTRUCTION_OPENINGS = (
    "i am looking for {a} {attrs} {noun}",
    "i need {a} {attrs} {noun}",
    "find me {a} {attrs} {noun}",
    "i want to buy {a} {noun} that {be} {attrs}",
    "i'm searching for {a} {noun} which {be} {attrs}",
    "please get me {a} {attrs} {noun}",
    "i would like {a} {noun}, {attrs}",
)
#: "a" before a vowel, to be turned into "an".
_AN = re.compile(r"\ba (?=[aeiou])")
_OPTION_PHRASES = {
    "color": "in {v} color",
    "size": "in size {v}",
    "scent": "with {v} scent",
    "flavor name": "in {v} flavor",
    "style": "in the {v} style",
    "capacity": "with {v} capacity",
    "item package quantity": "in a {v}",
}
_BULLETS = (
    "{A} - designed to be {a} so your {noun} keeps up with you every day.",
    "{A}: customers love that this {noun} is {a}.",
    "{A} | carefully tested to stay {a} use after use.",
)
_REVIEW_TITLES = {
    5: ("Love it!", "Exactly as described", "Great value", "Five stars"),
    4: ("Very good", "Nice quality", "Would buy again"),
    3: ("It's okay", "Average", "Does the job"),
    2: ("Not great", "Disappointed"),
    1: ("Did not work for me", "Poor quality"),
}
_REVIEW_BODIES = {
    5: "This {noun} is perfect. It is {a} and arrived quickly.",
    4: "Good {noun} for the price, {a} as promised.",
    3: "The {noun} is fine but not {a} as much as I hoped.",
    2: "My {noun} stopped being {a} after a few weeks.",
    1: "This {noun} was not {a} at all. Returned it.",
}


# ------------------------------------------------------------------------------- records


@dataclass
class _Listing:
    """A product record under construction, plus what goals need to know about it."""

    record: dict[str, Any]
    kind: ProductType
    attributes: list[str]
    #: The attribute that tells this family member apart from its siblings.
    distinct: str
    options: dict[str, list[str]]


def _brands(rng: random.Random, count: int) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        parts = rng.sample(_BRAND_SYLLABLES, rng.choice((2, 2, 3)))
        names.add("".join(parts).capitalize())
    return sorted(names)


def _asin(rng: random.Random, taken: set[str]) -> str:
    alphabet = string.ascii_uppercase + string.digits
    while True:
        asin = "B0" + "".join(rng.choices(alphabet, k=8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _title_case(text: str) -> str:
    return " ".join(word if word[:1].isdigit() else word.capitalize() for word in text.split())


def _price_string(rng: random.Random, kind: ProductType) -> str:
    """A price string like the scraped ones; ranges and an occasional missing price."""
    low, high = kind.price
    value = round(rng.uniform(low, high)) - 0.01
    roll = rng.random()
    if roll < 0.02:
        return ""
    if roll < 0.22:
        top = round(value * rng.uniform(1.1, 1.6)) - 0.01
        return f"${value:,.2f} to ${top:,.2f}"
    return f"${value:,.2f}"


def _listing(
    rng: random.Random,
    asins: set[str],
    category: Category,
    kind: ProductType,
    brand: str,
    shared: list[str],
    distinct: str,
) -> _Listing:
    attributes = [*shared, distinct]
    rng.shuffle(attributes)
    options: dict[str, list[str]] = {}
    for group, pool in kind.options.items():
        k = rng.randint(min(2, len(pool)), min(6, len(pool)))
        options[group] = sorted(rng.sample(pool, k), key=pool.index)
    title_attrs = " ".join(_title_case(a) for a in attributes[:2])
    title = f"{brand} {title_attrs} {_title_case(kind.noun)}"
    if kind.audiences and rng.random() < 0.6:
        title += f" {rng.choice(kind.audiences)}"
    if attributes[2:]:
        title += ", " + ", ".join(_title_case(a) for a in attributes[2:])
    noun = kind.noun
    sentences = [s.format(brand=brand, noun=noun) for s in rng.sample(category.sentences, 2)]
    description = " ".join(
        [
            sentences[0],
            f"This {noun} is {', '.join(attributes[:-1])} and {attributes[-1]}.",
            sentences[1],
        ]
    )
    bullets = [
        rng.choice(_BULLETS).format(A=a.upper(), a=a, noun=noun)
        for a in rng.sample(attributes, len(attributes))
    ]
    pricing = _price_string(rng, kind)
    asin = _asin(rng, asins)
    record = {
        "asin": asin,
        "category": category.name,
        "query": kind.query,
        "name": title,
        "product_category": " › ".join((category.root, *kind.path)),
        "full_description": description,
        "small_description": bullets,
        "pricing": pricing,
        "customization_options": {
            group: [{"value": value} for value in values] for group, values in options.items()
        },
        "images": [],
    }
    return _Listing(record, kind, attributes, distinct, options)


def _reviews(rng: random.Random, listing: _Listing) -> dict[str, Any] | None:
    """Zero to three reviews; a listing without reviews has no entry (rating shown N.A.)."""
    n = rng.choice((0, 0, 1, 2, 3))
    if n == 0:
        return None
    reviews = []
    for _ in range(n):
        score = rng.choices((5, 4, 3, 2, 1), weights=(5, 3, 1, 1, 1))[0]
        attribute = rng.choice(listing.attributes)
        reviews.append(
            {
                "title": rng.choice(_REVIEW_TITLES[score]),
                "score": score,
                "review": _REVIEW_BODIES[score].format(noun=listing.kind.noun, a=attribute),
            }
        )
    average = round(sum(r["score"] for r in reviews) / n, 1)
    return {"asin": listing.record["asin"], "average_rating": average, "reviews": reviews}


def _join(words: Sequence[str]) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def _request(rng: random.Random, listing: _Listing) -> tuple[str, list[str]]:
    """An instruction naming the product type and some attributes (always the one that sets
    the listing apart from its siblings), and those attributes."""
    others = [a for a in listing.attributes if a != listing.distinct]
    extra = rng.randint(min(1, len(others)), min(2, len(others)))
    attributes = [listing.distinct, *rng.sample(others, extra)]
    rng.shuffle(attributes)
    noun = listing.kind.noun
    plural = noun.endswith("s")
    text = rng.choice(_INSTRUCTION_OPENINGS).format(
        a="" if plural else "a", attrs=_join(attributes), noun=noun, be="are" if plural else "is"
    )
    return _AN.sub("an ", " ".join(text.split())), attributes


def _human_instruction(rng: random.Random, listing: _Listing) -> dict[str, Any]:
    """A human-style instruction for one listing: type, attributes and option values."""
    text, attributes = _request(rng, listing)
    chosen = {
        group: rng.choice(values)
        for group, values in listing.options.items()
        if len(listing.options) == 1 or rng.random() < 0.8
    }
    if chosen:
        text += " " + _join([_OPTION_PHRASES[g].format(v=v) for g, v in chosen.items()])
    return {
        "instruction": text,
        "instruction_attributes": attributes,
        "instruction_options": list(chosen.values()),
    }


def generate_records(n_products: int, n_goals: int, seed: int) -> OriginalRecords:
    """The catalog's content in the original JSON structures (see :mod:`.data`)."""
    if n_products < 1 or n_goals < 0 or n_goals > n_products:
        raise DataError(
            f"need 1 <= n_products and 0 <= n_goals <= n_products, got {n_products}, {n_goals}"
        )
    rng = random.Random(seed)
    asins: set[str] = set()
    brands = {c.name: _brands(rng, 60) for c in CATEGORIES}
    listings: list[_Listing] = []
    while len(listings) < n_products:
        category = rng.choice(CATEGORIES)
        kind = rng.choice(category.types)
        brand = rng.choice(brands[category.name])
        size = min(rng.choice((1, 2, 3, 3, 4)), n_products - len(listings))
        pool = rng.sample(kind.attributes, len(kind.attributes))
        shared, distinct = pool[:2], pool[2 : 2 + size]
        for attribute in distinct:
            listings.append(_listing(rng, asins, category, kind, brand, shared, attribute))
    rng.shuffle(listings)  # the original items_shuffle files are shuffled too
    human: dict[str, list[dict[str, Any]]] = {}
    for index in sorted(rng.sample(range(len(listings)), n_goals)):
        listing = listings[index]
        human[listing.record["asin"]] = [_human_instruction(rng, listing)]
    attributes: dict[str, dict[str, Any]] = {}
    for listing in listings:
        text, instruction_attributes = _request(rng, listing)
        attributes[listing.record["asin"]] = {
            "attributes": listing.attributes,
            "instruction": text,
            "instruction_attributes": instruction_attributes,
        }
    reviews = [r for r in (_reviews(rng, listing) for listing in listings) if r is not None]
    return OriginalRecords.from_content(
        products=[listing.record for listing in listings],
        attributes=attributes,
        human_instructions=human,
        reviews=reviews,
        files={
            "products": "items_shuffle.json",
            "attributes": "items_ins_v2.json",
            "human_instructions": "items_human_ins.json",
            "reviews": "reviews.json",
        },
    )


def generate_catalog(n_products: int, n_goals: int, seed: int) -> Catalog:
    """A generated catalog, equal to writing its records and loading them back."""
    records = generate_records(n_products, n_goals, seed)
    return build_catalog(records, human_goals=True, source=f"generated:{seed}")


def split_category_counts(catalog: Catalog) -> dict[str, dict[str, int]]:
    """Goals per split and category: what ``aem envs`` prints, kept in the manifest so that
    listing envs does not load 10,000 products."""
    counts: dict[str, dict[str, int]] = {}
    for split, goal_ids in catalog.splits.items():
        per_category: dict[str, int] = {}
        for goal_id in goal_ids:
            category = catalog.goals_by_id[goal_id].category
            per_category[category] = per_category.get(category, 0) + 1
        counts[split] = dict(sorted(per_category.items()))
    return counts


def write_catalog(
    n_products: int, n_goals: int, seed: int, out: str | Path, *, compress: bool
) -> None:
    """Write a generated catalog's files and a manifest recording how it was made.

    The manifest is written last, so its presence marks a complete folder.
    """
    out = Path(out)
    records = generate_records(n_products, n_goals, seed)
    write_original(records, out, compress=compress)
    catalog = build_catalog(records, human_goals=True, source=f"generated:{seed}")
    atomic_write_json(
        out / "manifest.json",
        {
            "generator": "python -m aem_envs.webshop.generate",
            "seed": seed,
            "products": len(catalog.products),
            "goals": len(catalog.goals),
            "splits": {name: len(ids) for name, ids in catalog.splits.items()},
            "task_types": split_category_counts(catalog),
            "content_hash": catalog.content_hash,
        },
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m aem_envs.webshop.generate",
        description="Write a generated WebShop catalog in the original file formats.",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--products", type=int, default=BUNDLED_PRODUCTS)
    parser.add_argument("--goals", type=int, default=BUNDLED_GOALS)
    parser.add_argument("--seed", type=int, default=BUNDLED_SEED)
    parser.add_argument("--no-compress", action="store_true", help="write plain .json files")
    args = parser.parse_args(argv)
    if not 0 <= args.goals <= args.products:
        parser.error("--goals must be between 0 and --products")
    write_catalog(args.products, args.goals, args.seed, args.out, compress=not args.no_compress)


if __name__ == "__main__":
    main()
