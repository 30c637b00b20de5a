"""Realistic workflow inputs and the fake ads account, from faker with a fixed seed so runs are reproducible."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any


def refund_input(seed: int = 0) -> dict[str, Any]:
    """A refund request: ``{"order_id", "customer_name", "customer_email", "amount_cents", "reason"}``.

    Same ``seed``, same input. ``amount_cents`` is an int in [500, 50000].
    """
    from faker import Faker  # imported here: faker takes ~0.3 s to import and workers never need it

    fake = Faker("en_US")
    fake.seed_instance(seed)
    return {
        "order_id": f"ord_{fake.bothify('??####').lower()}",
        "customer_name": fake.name(),
        "customer_email": fake.email(),
        "amount_cents": fake.random_int(500, 50_000),
        "reason": fake.random_element(["damaged", "late delivery", "wrong item", "not as described"]),
    }


def ads_audit_input(seed: int = 0) -> dict[str, Any]:
    """An account-audit request: ``{"account_seed", "account_id", "objective"}``.

    ``account_seed`` (int, 0 <= seed < 2**31) selects the seeded account :func:`ads_account` builds;
    ``account_id`` is that account's id. No faker here: the input is cheap, the account is not.
    """
    account_seed = seed % (1 << 31)
    return {"account_seed": account_seed, "account_id": account_id(account_seed),
            "objective": "audit the account and prepare budget and bid changes"}


#: Campaign counts, keywords per campaign and ads per campaign of every generated account.
ADS_CAMPAIGNS, ADS_KEYWORDS_PER_CAMPAIGN, ADS_PER_CAMPAIGN = 50, 100, 4
_CHANNELS = ("search", "search", "search", "shopping", "display", "video")
_MATCH_TYPES = ("exact", "phrase", "broad")


@dataclass(frozen=True)
class AdsAccount:
    """A seeded fake ads account (read-only; shared by every caller in the process).

    Attributes:
        seed: the seed it was built from; ``account_id`` its id (``acc-<seed>``); ``name`` a company name.
        campaigns: ``ADS_CAMPAIGNS`` dicts ``{"id", "name", "channel", "status", "daily_budget_cents",
            "spend_cents", "impressions", "clicks", "conversions", "conv_value_cents", "lost_is_budget"}``
            (amounts in cents over the audited 30 days; ``lost_is_budget`` impression share lost to budget, 0..1).
        keywords: ``ADS_CAMPAIGNS * ADS_KEYWORDS_PER_CAMPAIGN`` tuples ``(id, campaign_id, text, match_type,
            bid_cents, impressions, clicks, cost_cents, conversions, quality_score)`` (tuples: 5,000 of them).
        ads: ``ADS_CAMPAIGNS * ADS_PER_CAMPAIGN`` dicts ``{"id", "campaign_id", "headline", "status",
            "impressions", "clicks"}``.
        competitors: ``{"domain", "impression_share", "overlap_rate", "outranking_share"}`` dicts (shares 0..1).
    """

    seed: int
    account_id: str
    name: str
    campaigns: tuple[dict[str, Any], ...]
    keywords: tuple[tuple[Any, ...], ...]
    ads: tuple[dict[str, Any], ...]
    competitors: tuple[dict[str, Any], ...]


#: Positions of the fields of a keyword tuple in :attr:`AdsAccount.keywords`.
KW_ID, KW_CAMPAIGN, KW_TEXT, KW_MATCH, KW_BID, KW_IMPRESSIONS, KW_CLICKS, KW_COST, KW_CONVERSIONS, KW_QS = range(10)


def account_id(seed: int) -> str:
    """The id of the account built from ``seed``: ``acc-<seed>``."""
    return f"acc-{seed}"


#: Environment variable naming the folder where built accounts are cached as JSON (default:
#: ``$XDG_CACHE_HOME/crashpoint`` or ``~/.cache/crashpoint``; an empty value turns the file cache off).
CACHE_ENV = "CRASHPOINT_CACHE_DIR"


@lru_cache(maxsize=8)
def ads_account(seed: int) -> AdsAccount:
    """The fake ads account of ``seed`` (an int >= 0): 50 campaigns, 5,000 keywords, 200 ads, 8 competitors.

    Deterministic: the same seed gives an identical account (faker names and a ``random.Random``
    of the same seed for the figures). Kept once per process and seed, and in a JSON file per seed
    (see :data:`CACHE_ENV`) named after a hash of this module's source and of faker's version, so
    that the worker processes of a sweep load it (about 10 ms) instead of importing faker and
    building it again (about 0.13 s, see :func:`build_ads_account`).

    Raises:
        ValueError: ``seed`` is not an int >= 0.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"an account seed is an int >= 0, got {seed!r}")
    path = _cache_file(seed)
    if path is not None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return AdsAccount(seed=data["seed"], account_id=data["account_id"], name=data["name"],
                              campaigns=tuple(data["campaigns"]), keywords=tuple(map(tuple, data["keywords"])),
                              ads=tuple(data["ads"]), competitors=tuple(data["competitors"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # absent or damaged: build it (and write it again)
    account = build_ads_account(seed)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(asdict(account)), encoding="utf-8")
            os.replace(tmp, path)  # atomic: a reader sees the whole file or none
        except OSError:
            pass  # no cache: the next process builds it again
    return account


def _cache_file(seed: int) -> Path | None:
    """Where the account of ``seed`` is cached, or ``None`` when the file cache is off."""
    folder = os.environ.get(CACHE_ENV)
    if folder == "":
        return None
    if folder is None:
        folder = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "crashpoint")
    spec = importlib.util.find_spec("faker")
    faker_init = Path(spec.origin).read_bytes() if spec and spec.origin else b""  # holds faker's VERSION
    digest = hashlib.sha1(Path(__file__).read_bytes() + faker_init).hexdigest()[:12]
    return Path(folder) / f"ads-account-{digest}-{seed}.json"


def build_ads_account(seed: int) -> AdsAccount:
    """Build the account of ``seed`` (no cache): what :func:`ads_account` returns. About 0.13 s
    when faker is not imported yet (0.06 s import, 0.07 s building)."""
    from faker import Faker  # imported here: only processes that build an account pay for it

    fake = Faker("en_US")
    fake.seed_instance(seed)
    rng = random.Random(seed)
    words = list(dict.fromkeys(fake.words(nb=600)))  # the keyword vocabulary, in faker's seeded order
    campaigns, keywords, ads = [], [], []
    for c in range(ADS_CAMPAIGNS):
        cid = f"cmp-{c + 1:03d}"
        channel = rng.choice(_CHANNELS)
        budget = rng.randrange(2_000, 60_000, 500)
        spend_ratio = rng.uniform(0.45, 1.0)
        cpc = rng.randint(40, 400)
        spend = int(budget * 30 * spend_ratio)
        clicks = max(1, spend // cpc)
        conversions = int(clicks * rng.uniform(0.0, 0.09))
        campaigns.append({"id": cid, "name": f"{fake.word().title()} {channel.title()} - {fake.city()}",
                          "channel": channel, "status": "enabled" if rng.random() < 0.9 else "paused",
                          "daily_budget_cents": budget, "spend_cents": spend,
                          "impressions": clicks * rng.randint(12, 60), "clicks": clicks, "conversions": conversions,
                          "conv_value_cents": int(conversions * rng.randint(2_000, 15_000)),
                          "lost_is_budget": round(max(0.0, spend_ratio - 0.7) * rng.uniform(0.5, 2.0), 3)})
        for k in range(ADS_KEYWORDS_PER_CAMPAIGN):
            text = " ".join(rng.sample(words, rng.choice((1, 2, 2, 3))))
            kw_clicks = int(rng.paretovariate(1.3) * 3) if rng.random() < 0.85 else 0
            kw_conv = sum(1 for _ in range(min(kw_clicks, 40)) if rng.random() < 0.05)
            keywords.append((f"kw-{c + 1:03d}-{k + 1:03d}", cid, text, rng.choice(_MATCH_TYPES),
                             rng.randint(20, 500), kw_clicks * rng.randint(8, 80) + rng.randint(0, 50), kw_clicks,
                             kw_clicks * rng.randint(30, 450), kw_conv, rng.randint(1, 10)))
        for a in range(ADS_PER_CAMPAIGN):
            impressions = rng.randint(500, 80_000)
            ads.append({"id": f"ad-{c + 1:03d}-{a + 1}", "campaign_id": cid, "headline": fake.catch_phrase(),
                        "status": "disapproved" if rng.random() < 0.04 else "approved",
                        "impressions": impressions, "clicks": int(impressions * rng.uniform(0.002, 0.08))})
    competitors = tuple({"domain": fake.unique.domain_name(), "impression_share": round(rng.uniform(0.05, 0.6), 3),
                         "overlap_rate": round(rng.uniform(0.1, 0.8), 3),
                         "outranking_share": round(rng.uniform(0.05, 0.7), 3)} for _ in range(8))
    return AdsAccount(seed=seed, account_id=account_id(seed), name=fake.company(), campaigns=tuple(campaigns),
                      keywords=tuple(keywords), ads=tuple(ads), competitors=competitors)


#: Input generators by workflow name: ``f(seed) -> dict``.
GENERATORS = {"refund": refund_input, "ads_audit": ads_audit_input}


def generated_input(workflow: str, seed: int) -> dict[str, Any]:
    """A realistic input for ``workflow`` (``{}`` when no generator is known), fixed by ``seed``."""
    generator = GENERATORS.get(workflow)
    return generator(seed) if generator else {}
