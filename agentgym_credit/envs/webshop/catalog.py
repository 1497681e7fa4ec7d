"""The WebShop catalog: products, goals, and the shipped catalog files.

Products follow the item format of upstream WebShop's ``items_shuffle*.json``: ``asin``, ``name``,
``pricing`` (``"$19.99"`` or a range ``"$10.99 - $20.99"``), ``customization_options`` (option name →
values, each a string or ``{"value": ..., "image": ...}``), ``product_category`` (levels joined by
`` › ``), ``category``, ``query``, ``full_description`` / ``Description``, ``small_description`` /
``BulletPoints``, and ``Attributes`` (upstream keeps those in ``items_ins_v2*.json``; see
:mod:`agentgym_credit.envs.webshop.upstream`). Records are cleaned the way upstream's loader cleans
them: option names and values are lowercased and ``/`` in a value becomes `` | ``.

Goals follow upstream's goal dicts: ``asin``, ``instruction_text``, ``attributes``, ``goal_options``
(option name → value for synthetic goals, a list of values for human goals), ``price_upper``, ``name``,
``query``, ``category``, ``product_category``. A goal's id is its position in the catalog's fixed goal
order; the first ``n_test_goals`` goals form the ``test`` split (upstream's validation range 0–499),
the rest ``train``.

Our own catalog is a folder with ``products.json.gz`` (``{"format": ..., "products": [records]}``)
and ``goals.json.gz`` (``{"format": ..., "n_test_goals": N, "goals": [records]}``). Product records
may carry ``title_nouns``, the precomputed noun set of the name used by the type reward.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentgym_credit.errors import AgentGymCreditError, DataNotFoundError

__all__ = [
    "Catalog",
    "CatalogFormatError",
    "Goal",
    "Product",
    "Review",
    "DEFAULT_CATALOG_DIR",
    "PRODUCTS_FILE",
    "GOALS_FILE",
    "SPLITS",
    "load_catalog",
    "read_json",
    "save_catalog",
    "parse_pricing",
    "price_tag",
    "clean_option_value",
]

DEFAULT_CATALOG_DIR = Path(__file__).resolve().parent / "data"
PRODUCTS_FILE = "products.json.gz"
GOALS_FILE = "goals.json.gz"
PRODUCTS_FORMAT = "agentgym-credit/webshop-products/1"
GOALS_FORMAT = "agentgym-credit/webshop-goals/1"
SPLITS = ("train", "test")
DEFAULT_PRICE = 100.0  # upstream's price for items without pricing


class CatalogFormatError(AgentGymCreditError, ValueError):
    """A catalog or goal file does not have the expected structure."""


@dataclass(frozen=True)
class Review:
    """One customer review shown on the item's Reviews page."""

    title: str
    score: int
    body: str


@dataclass(frozen=True)
class Product:
    """One product of the catalog.

    Attributes:
        asin: Amazon-style id, shown on the results page and clickable.
        name: the product title.
        price: the price the reward compares with the goal's ``price_upper``.
        price_tag: the price as shown, printed as upstream prints it (``"$19.99"``, ``"$20.0"`` or
            ``"$10.99 to $20.99"``).
        category: top-level category (``beauty``, ``food``, ``fashion``, ``furniture``, ``electronics``).
        query: the search query the product was collected under (compared by the type reward).
        product_category: category levels joined by `` › ``.
        options: option name → the values that can be selected (cleaned, lowercase), in page order.
        attributes: short attribute phrases (``"gluten free"``).
        bullet_points: the Features page.
        description: the Description page.
        rating: average rating as shown (``"N.A."`` when there is none).
        reviews: the Reviews page.
        title_nouns: precomputed nouns of ``name`` (``None``: computed when needed).
    """

    asin: str
    name: str
    price: float
    price_tag: str
    category: str = ""
    query: str = ""
    product_category: str = ""
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    attributes: tuple[str, ...] = ()
    bullet_points: tuple[str, ...] = ()
    description: str = ""
    rating: str = "N.A."
    reviews: tuple[Review, ...] = ()
    title_nouns: frozenset[str] | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Product:
        """Parse an upstream-format item record (or one of our catalog's records).

        Raises:
            CatalogFormatError: when ``asin`` or ``name`` is missing.
        """
        if not record.get("asin"):
            raise CatalogFormatError(f"product record has no 'asin' (keys: {sorted(record)[:8]})")
        asin = str(record["asin"]).strip()
        name = record.get("name") or record.get("Title")
        if not name:
            raise CatalogFormatError(f"product {asin} has no 'name'")
        bounds = parse_pricing(record.get("pricing"))
        if not bounds:
            price, tag = DEFAULT_PRICE, price_tag(DEFAULT_PRICE)
        elif len(bounds) == 1:
            price, tag = bounds[0], price_tag(bounds[0])
        else:
            lo, hi = bounds[0], bounds[1]
            price, tag = _deterministic_uniform(asin, lo, hi), price_tag(lo, hi)
        options: dict[str, tuple[str, ...]] = {}
        for opt_name, contents in (record.get("customization_options") or {}).items():
            if not contents:
                continue
            values = []
            for item in contents:
                raw = item.get("value") if isinstance(item, Mapping) else item
                if raw is None:
                    continue
                value = clean_option_value(str(raw))
                if value and value not in values:
                    values.append(value)
            if values:
                options[str(opt_name).strip().lower()] = tuple(values)
        bullets = record.get("small_description", record.get("BulletPoints")) or []
        if isinstance(bullets, str):
            bullets = [bullets]
        description = record.get("full_description", record.get("Description")) or ""
        reviews = tuple(
            Review(str(r.get("title", "")), int(r.get("score", 0) or 0), str(r.get("body", "")))
            for r in record.get("Reviews") or ()
        )
        rating = record.get("average_rating", record.get("Rating"))
        nouns = record.get("title_nouns")
        return cls(
            asin=asin,
            name=str(name).strip(),
            price=float(price),
            price_tag=tag,
            category=str(record.get("category") or ""),
            query=str(record.get("query") or ""),
            product_category=str(record.get("product_category") or ""),
            options=options,
            attributes=tuple(str(a) for a in record.get("Attributes") or ()),
            bullet_points=tuple(str(b).strip() for b in bullets if str(b).strip()),
            description=str(description).strip(),
            rating=str(rating) if rating not in (None, "") else "N.A.",
            reviews=reviews,
            title_nouns=frozenset(nouns) if nouns is not None else None,
        )

    def to_record(self) -> dict[str, Any]:
        """The record of this product in our catalog format (readable by :meth:`from_record`)."""
        record: dict[str, Any] = {
            "asin": self.asin,
            "name": self.name,
            "pricing": self.price_tag.replace(" to ", " - "),
            "category": self.category,
            "query": self.query,
            "product_category": self.product_category,
            "customization_options": {k: list(v) for k, v in self.options.items()},
            "Attributes": list(self.attributes),
            "small_description": list(self.bullet_points),
            "full_description": self.description,
        }
        if self.rating != "N.A.":
            record["average_rating"] = self.rating
        if self.reviews:
            record["Reviews"] = [{"title": r.title, "score": r.score, "body": r.body} for r in self.reviews]
        if self.title_nouns is not None:
            record["title_nouns"] = sorted(self.title_nouns)
        return record

    def option_name_of(self, value: str) -> str | None:
        """The last option (in page order) offering ``value``, or ``None``.

        Upstream's page maps each value to the last option button that carries it, so clicking a value
        that two options offer selects it for the later one.
        """
        names = [name for name, values in self.options.items() if value in values]
        return names[-1] if names else None


@dataclass(frozen=True)
class Goal:
    """One shopping goal (the instruction shown to the agent and what the reward checks).

    Attributes:
        goal_id: position in the catalog's fixed goal order.
        asin: the product the goal was built from.
        instruction_text: the instruction shown on every page.
        attributes: attribute phrases the purchase must have.
        goal_options: option values the purchase must have selected.
        goal_option_names: their option names (``None`` for human goals, which give values only).
        price_upper: the price bound (``1e6`` when the instruction names none).
        name: the goal product's name (its nouns feed the type reward).
        query: the goal product's search query.
        category: the goal product's top-level category.
        product_category: the goal product's category path.
        name_nouns: precomputed nouns of ``name`` (``None``: computed when needed).
    """

    goal_id: int
    asin: str
    instruction_text: str
    attributes: tuple[str, ...]
    goal_options: tuple[str, ...]
    price_upper: float
    name: str = ""
    query: str = ""
    category: str = ""
    product_category: str = ""
    goal_option_names: tuple[str, ...] | None = None
    name_nouns: frozenset[str] | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any], goal_id: int) -> Goal:
        """Parse an upstream goal dict (synthetic: options as a dict; human: a list of values)."""
        try:
            raw_options = record.get("goal_options", record.get("instruction_options"))
            if raw_options is None:
                raw_options = ()
            if isinstance(raw_options, Mapping):
                names: tuple[str, ...] | None = tuple(str(k) for k in raw_options)
                values = tuple(str(v) for v in raw_options.values())
            else:
                names, values = None, tuple(str(v) for v in raw_options)
            return cls(
                goal_id=int(goal_id),
                asin=str(record["asin"]),
                instruction_text=str(record.get("instruction_text", record.get("instruction"))),
                attributes=tuple(
                    str(a) for a in record.get("attributes", record.get("instruction_attributes")) or ()
                ),
                goal_options=values,
                goal_option_names=names,
                price_upper=float(record.get("price_upper", 1e6)),
                name=str(record.get("name") or ""),
                query=str(record.get("query") or ""),
                category=str(record.get("category") or ""),
                product_category=str(record.get("product_category") or ""),
            )
        except KeyError as exc:
            raise CatalogFormatError(f"goal {goal_id} lacks the key {exc.args[0]!r}") from exc

    def to_record(self) -> dict[str, Any]:
        """The upstream-style goal dict of this goal."""
        options: Any = (
            dict(zip(self.goal_option_names, self.goal_options, strict=True))
            if self.goal_option_names is not None
            else list(self.goal_options)
        )
        return {
            "asin": self.asin,
            "instruction_text": self.instruction_text,
            "attributes": list(self.attributes),
            "goal_options": options,
            "price_upper": self.price_upper,
            "name": self.name,
            "query": self.query,
            "category": self.category,
            "product_category": self.product_category,
        }


class Catalog:
    """Products and goals, with the fixed train / test goal split.

    Args:
        products: the products, in index order (the search index numbers them in this order).
        goals: the goals in their fixed order; ids are re-assigned as positions. Goals that lack the
            product fields (``name``, ``query``, ...) get them from their product, and their
            ``name_nouns`` from the product's ``title_nouns`` when the names agree.
        n_test_goals: the first ``n_test_goals`` goals form the ``test`` split.
        source: where the catalog came from (shown in messages).

    Raises:
        CatalogFormatError: duplicate ASINs or a goal naming an unknown product.
    """

    def __init__(
        self,
        products: Sequence[Product],
        goals: Sequence[Goal],
        *,
        n_test_goals: int = 500,
        source: str = "<memory>",
    ) -> None:
        self.products: tuple[Product, ...] = tuple(products)
        self.source = source
        self._by_asin: dict[str, int] = {}
        for i, product in enumerate(self.products):
            if product.asin in self._by_asin:
                raise CatalogFormatError(f"{source}: duplicate asin {product.asin!r}")
            self._by_asin[product.asin] = i
        self.goals: tuple[Goal, ...] = tuple(self._complete_goal(g, i) for i, g in enumerate(goals))
        if n_test_goals < 0:
            raise ValueError(f"n_test_goals must be >= 0, got {n_test_goals}")
        self.n_test_goals = int(n_test_goals)

    def _complete_goal(self, goal: Goal, goal_id: int) -> Goal:
        if goal.asin not in self._by_asin:
            raise CatalogFormatError(f"{self.source}: goal {goal_id} names unknown asin {goal.asin!r}")
        product = self.product(goal.asin)
        name = goal.name or product.name
        nouns = goal.name_nouns
        if nouns is None and name == product.name:
            nouns = product.title_nouns
        return replace(
            goal,
            goal_id=goal_id,
            name=name,
            query=goal.query or product.query,
            category=goal.category or product.category,
            product_category=goal.product_category or product.product_category,
            name_nouns=nouns,
        )

    def __len__(self) -> int:
        return len(self.products)

    def __repr__(self) -> str:
        return f"Catalog({len(self.products)} products, {len(self.goals)} goals, source={self.source!r})"

    def product(self, asin: str) -> Product:
        """The product with this ASIN (case-insensitive).

        Raises:
            KeyError: no such product.
        """
        idx = self._by_asin.get(asin)
        if idx is None:
            idx = self._lower_map.get(asin.lower())
        if idx is None:
            raise KeyError(f"no product with asin {asin!r} in {self.source}")
        return self.products[idx]

    def has_asin(self, asin: str) -> bool:
        """Whether a product has this ASIN (case-insensitive)."""
        return asin in self._by_asin or asin.lower() in self._lower_map

    @functools.cached_property
    def _lower_map(self) -> dict[str, int]:
        return {a.lower(): i for a, i in self._by_asin.items()}

    def goal_ids(self, split: str) -> list[int]:
        """The goal ids of ``split`` (``"test"``: the first ``n_test_goals``; ``"train"``: the rest).

        Raises:
            ValueError: unknown split, or the split is empty.
        """
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
        n_test = min(self.n_test_goals, len(self.goals))
        ids = list(range(n_test)) if split == "test" else list(range(n_test, len(self.goals)))
        if not ids:
            raise ValueError(
                f"split {split!r} of {self.source} is empty ({len(self.goals)} goals, "
                f"n_test_goals={self.n_test_goals}); load the catalog with another n_test_goals"
            )
        return ids

    @functools.cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the products' canonical records: identifies the catalog for caches."""
        digest = hashlib.sha256()
        for product in self.products:
            digest.update(json.dumps(product.to_record(), sort_keys=True, ensure_ascii=True).encode())
            digest.update(b"\n")
        return digest.hexdigest()


def parse_pricing(pricing: Any) -> list[float]:
    """The prices of an upstream ``pricing`` field (``"$19.99"``, ``"$10.99 - $20.99"``, or numbers).

    Each ``$``-separated piece keeps only digits and dots, as upstream parses it.
    """
    if pricing is None or pricing == "":
        return []
    if isinstance(pricing, int | float):
        return [float(pricing)]
    if isinstance(pricing, Sequence) and not isinstance(pricing, str):
        return [float(p) for p in pricing]
    prices = []
    for piece in str(pricing).split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", piece).strip(".")
        if digits:
            prices.append(float(digits))
    return prices


def price_tag(price: float, high: float | None = None) -> str:
    """A price as upstream prints it: Python's shortest float text (``$20.0``, ``$19.99``, ``$1.5 to $3.0``)."""
    tag = f"${float(price)}"
    return tag if high is None else f"{tag} to ${float(high)}"


def clean_option_value(value: str) -> str:
    """An option value as upstream shows it: stripped, ``/`` → `` | ``, lowercased."""
    return value.strip().replace("/", " | ").lower()


def _deterministic_uniform(key: str, lo: float, hi: float) -> float:
    """A price in ``[lo, hi]`` fixed by ``key`` (upstream draws it at random on every load)."""
    frac = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2.0**64
    return round(lo + (hi - lo) * frac, 2)


def read_json(path: str | Path) -> Any:
    """Read a JSON file, gzip-compressed when its name ends in ``.gz``.

    Raises:
        FileNotFoundError: no such file.
        CatalogFormatError: the file is not valid JSON.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise CatalogFormatError(f"{path}: not a readable JSON file ({exc})") from exc


def _write_json_gz(path: Path, payload: Any) -> None:
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as fh:
        fh.write(data)


def save_catalog(catalog: Catalog, out_dir: str | Path) -> Path:
    """Write ``catalog`` as ``products.json.gz`` and ``goals.json.gz`` under ``out_dir``.

    The files are byte-identical for identical catalogs (no timestamps).

    Returns:
        The folder written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_json_gz(
        out / PRODUCTS_FILE,
        {"format": PRODUCTS_FORMAT, "products": [p.to_record() for p in catalog.products]},
    )
    _write_json_gz(
        out / GOALS_FILE,
        {
            "format": GOALS_FORMAT,
            "n_test_goals": catalog.n_test_goals,
            "goals": [_compact_goal_record(g, catalog) for g in catalog.goals],
        },
    )
    return out


def _compact_goal_record(goal: Goal, catalog: Catalog) -> dict[str, Any]:
    """The goal's record without the fields it inherits from its product."""
    record = goal.to_record()
    product = catalog.product(goal.asin)
    for key, inherited in (
        ("name", product.name),
        ("query", product.query),
        ("category", product.category),
        ("product_category", product.product_category),
    ):
        if record[key] == inherited:
            del record[key]
    return record


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> Catalog:
    del mtime_ns, size  # part of the cache key only
    folder = Path(path)
    products_payload = read_json(folder / PRODUCTS_FILE)
    goals_payload = read_json(folder / GOALS_FILE)
    if not isinstance(products_payload, Mapping) or products_payload.get("format") != PRODUCTS_FORMAT:
        raise CatalogFormatError(f"{folder / PRODUCTS_FILE}: expected format {PRODUCTS_FORMAT!r}")
    if not isinstance(goals_payload, Mapping) or goals_payload.get("format") != GOALS_FORMAT:
        raise CatalogFormatError(f"{folder / GOALS_FILE}: expected format {GOALS_FORMAT!r}")
    products = [Product.from_record(r) for r in products_payload["products"]]
    goals = [Goal.from_record(r, i) for i, r in enumerate(goals_payload["goals"])]
    return Catalog(products, goals, n_test_goals=int(goals_payload["n_test_goals"]), source=str(folder))


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load one of our catalogs (default: the catalog shipped with the package).

    Loaded catalogs are cached per folder (and file modification time), so every environment of a
    process shares one object.

    Args:
        path: a folder holding ``products.json.gz`` and ``goals.json.gz`` (as written by
            :func:`save_catalog` / :func:`~agentgym_credit.envs.webshop.generate.generate_catalog`), or
            the path of its ``products.json.gz``.

    Raises:
        FileNotFoundError: the folder or one of its files is missing.
        CatalogFormatError: a file has the wrong structure.
    """
    folder = Path(path) if path is not None else DEFAULT_CATALOG_DIR
    if folder.is_file():
        folder = folder.parent
    files = [folder / PRODUCTS_FILE, folder / GOALS_FILE]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise DataNotFoundError(
            f"catalog files missing: {missing}; write a catalog with "
            "`python -m agentgym_credit.envs.webshop.generate OUT_DIR` or use the upstream loader"
        )
    stats = [f.stat() for f in files]
    return _load_cached(
        str(folder.resolve()), sum(s.st_mtime_ns for s in stats), sum(s.st_size for s in stats)
    )
