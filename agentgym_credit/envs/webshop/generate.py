"""Deterministic generator of a WebShop catalog and its goals.

Upstream WebShop's product data (scraped listings) cannot be downloaded here, so the package ships a
catalog generated from :mod:`~agentgym_credit.envs.webshop.vocabulary`: products spread evenly over the
product types of five categories, each with a brand, a title, 3–5 attributes, option values (colour,
size, flavor, scent, style), a price, bullet points, a description and a few reviews. Goals are built the
way upstream builds synthetic goals (:func:`~agentgym_credit.envs.webshop.goals.synthetic_goals`): the
product's base instruction naming the product type and 1–3 of its attributes, then up to
``goals_per_product`` option combinations, then the price bound; the goal list is shuffled once and the
first ``n_test_goals`` goals form the test split.

Everything is drawn from one ``random.Random(seed)``, so the same arguments give byte-identical files.
The shipped catalog is ``generate_catalog(DEFAULT_CATALOG_DIR, n_products=1200, seed=0)``.

Command line::

    python -m agentgym_credit.envs.webshop.generate OUT_DIR --n-products 1200 --seed 0
"""

from __future__ import annotations

import argparse
import random
import string
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from agentgym_credit.envs.webshop.catalog import Catalog, Product, Review, price_tag, save_catalog
from agentgym_credit.envs.webshop.goals import ProductInstruction, shuffle_goals, synthetic_goals
from agentgym_credit.envs.webshop.nouns import titles_nouns
from agentgym_credit.envs.webshop.vocabulary import (
    BRAND_SYLLABLES,
    DESCRIPTION_CLOSERS,
    GENERIC_BULLETS,
    INSTRUCTION_TEMPLATES,
    PRODUCT_TYPES,
    REVIEW_BODIES,
    REVIEW_TITLES,
    ProductType,
)

__all__ = [
    "DEFAULT_N_PRODUCTS",
    "DEFAULT_SEED",
    "DEFAULT_GOALS_PER_PRODUCT",
    "DEFAULT_N_TEST_GOALS",
    "build_catalog",
    "generate_catalog",
    "main",
]

DEFAULT_N_PRODUCTS = 1200
DEFAULT_SEED = 0
DEFAULT_GOALS_PER_PRODUCT = 2
DEFAULT_N_TEST_GOALS = 500
_N_BRANDS = 160
_ASIN_CHARS = string.ascii_uppercase + string.digits


def _brands(rng: random.Random, n: int) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < n:
        word = "".join(rng.choice(BRAND_SYLLABLES) for _ in range(rng.choice((2, 2, 3))))
        if 4 <= len(word) <= 10 and word not in seen:
            seen.add(word)
            names.append(word.capitalize())
    return names


def _asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choice(_ASIN_CHARS) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _title(rng: random.Random, kind: ProductType, brand: str, attributes: Sequence[str]) -> str:
    modifier = rng.choice(kind.modifiers)
    a1, a2 = (a.title() for a in attributes[:2])
    pattern = rng.randrange(4)
    if pattern == 0:
        return f"{brand} {modifier} {kind.core}"
    if pattern == 1:
        return f"{brand} {kind.core}, {a1}"
    if pattern == 2:
        return f"{brand} {modifier} {kind.core} - {a1} and {a2}"
    return f"{brand} {modifier} {kind.core} ({a1})"


def _options(rng: random.Random, kind: ProductType) -> dict[str, tuple[str, ...]]:
    names = list(kind.options)
    if rng.random() < 0.1:
        return {}
    if len(names) > 1 and rng.random() < 0.25:
        names.remove(rng.choice(names))
    options = {}
    for name in names:
        pool = kind.options[name]
        k = rng.randint(min(2, len(pool)), min(6, len(pool)))
        chosen = set(rng.sample(pool, k))
        options[name] = tuple(v for v in pool if v in chosen)
    return options


def _reviews(rng: random.Random, item: str) -> tuple[Review, ...]:
    reviews = []
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        title, score = rng.choice(REVIEW_TITLES)
        reviews.append(
            Review(title=title, score=score, body=rng.choice(REVIEW_BODIES[score]).format(item=item))
        )
    return tuple(reviews)


def _product(
    rng: random.Random, kind: ProductType, brand: str, asin: str
) -> tuple[Product, ProductInstruction]:
    attributes = rng.sample(kind.attributes, rng.randint(3, min(5, len(kind.attributes))))
    name = _title(rng, kind, brand, attributes)
    item = kind.core.lower()
    lo, hi = kind.price
    price = round(int(rng.uniform(lo, hi)) + 0.99, 2)
    features = rng.sample(kind.features, len(kind.features))
    bullets = [f"{a.upper()}: {f}" for a, f in zip(attributes, features, strict=False)]
    bullets.append(rng.choice(GENERIC_BULLETS).format(brand=brand, item=item))
    blurbs = [kind.blurbs[0], *rng.sample(kind.blurbs[1:], len(kind.blurbs) - 1)]
    description = " ".join(b.format(brand=brand, item=item) for b in blurbs)
    description += " " + rng.choice(DESCRIPTION_CLOSERS).format(brand=brand)
    reviews = _reviews(rng, item)
    rating = f"{sum(r.score for r in reviews) / len(reviews):.1f}" if reviews else "N.A."
    product = Product(
        asin=asin,
        name=name,
        price=price,
        price_tag=price_tag(price),
        category=kind.category,
        query=kind.query,
        product_category=kind.product_category,
        options=_options(rng, kind),
        attributes=tuple(attributes),
        bullet_points=tuple(bullets),
        description=description,
        rating=rating,
        reviews=reviews,
    )
    n_att = min(rng.choice((1, 2, 2, 3)), len(attributes))
    goal_attributes = rng.sample(attributes, n_att)
    template = rng.choice(INSTRUCTION_TEMPLATES[n_att])
    fields = {f"a{i + 1}": a for i, a in enumerate(goal_attributes)}
    text = template.format(item=item, **fields)
    return product, ProductInstruction(text=text, attributes=tuple(goal_attributes))


def build_catalog(
    n_products: int = DEFAULT_N_PRODUCTS,
    seed: int = DEFAULT_SEED,
    *,
    goals_per_product: int = DEFAULT_GOALS_PER_PRODUCT,
    n_test_goals: int = DEFAULT_N_TEST_GOALS,
) -> Catalog:
    """Generate a catalog in memory.

    Args:
        n_products: number of products (spread evenly over the product types).
        seed: seed of every random draw.
        goals_per_product: option combinations turned into goals per product (at most).
        n_test_goals: size of the test split (clipped to half the goals for tiny catalogs).

    Returns:
        The catalog, products in shuffled order, goals in their fixed shuffled order.
    """
    if n_products <= 0:
        raise ValueError(f"n_products must be positive, got {n_products}")
    if goals_per_product <= 0:
        raise ValueError(f"goals_per_product must be positive, got {goals_per_product}")
    rng = random.Random(seed)
    brands = _brands(rng, _N_BRANDS)
    taken: set[str] = set()
    products: list[Product] = []
    instructions: dict[str, ProductInstruction] = {}
    for i in range(n_products):
        kind = PRODUCT_TYPES[i % len(PRODUCT_TYPES)]
        product, instruction = _product(rng, kind, rng.choice(brands), _asin(rng, taken))
        products.append(product)
        instructions[product.asin] = instruction
    rng.shuffle(products)
    nouns = titles_nouns(p.name for p in products)
    products = [replace(p, title_nouns=n) for p, n in zip(products, nouns, strict=True)]
    goals = synthetic_goals(products, instructions, rng, max_per_product=goals_per_product)
    goals = shuffle_goals(goals, rng.randrange(2**31))
    n_test = min(n_test_goals, len(goals) // 2)
    return Catalog(products, goals, n_test_goals=n_test, source=f"generated(n={n_products}, seed={seed})")


def generate_catalog(
    out_dir: str | Path,
    n_products: int = DEFAULT_N_PRODUCTS,
    seed: int = DEFAULT_SEED,
    *,
    goals_per_product: int = DEFAULT_GOALS_PER_PRODUCT,
    n_test_goals: int = DEFAULT_N_TEST_GOALS,
) -> Path:
    """Generate a catalog and write ``products.json.gz`` and ``goals.json.gz`` under ``out_dir``.

    Args:
        out_dir: the folder to write (created if missing).
        n_products: number of products.
        seed: seed of every random draw.
        goals_per_product: option combinations turned into goals per product (at most).
        n_test_goals: size of the test split.

    Returns:
        ``out_dir`` as a path; load it with :func:`~agentgym_credit.envs.webshop.catalog.load_catalog`
        or pass it as ``catalog_path`` to the environment.
    """
    catalog = build_catalog(n_products, seed, goals_per_product=goals_per_product, n_test_goals=n_test_goals)
    return save_catalog(catalog, out_dir)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point: write a generated catalog to a folder."""
    parser = argparse.ArgumentParser(description="Generate a WebShop catalog (products and goals).",
                                     allow_abbrev=False)
    parser.add_argument("out_dir", type=Path, help="folder to write products.json.gz and goals.json.gz to")
    parser.add_argument("--n-products", type=int, default=DEFAULT_N_PRODUCTS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--goals-per-product", type=int, default=DEFAULT_GOALS_PER_PRODUCT)
    parser.add_argument("--n-test-goals", type=int, default=DEFAULT_N_TEST_GOALS)
    args = parser.parse_args(argv)
    out = generate_catalog(
        args.out_dir,
        args.n_products,
        args.seed,
        goals_per_product=args.goals_per_product,
        n_test_goals=args.n_test_goals,
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
