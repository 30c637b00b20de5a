"""Realistic workflow inputs from faker, with a fixed seed so runs are reproducible."""

from __future__ import annotations

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


#: Input generators by workflow name: ``f(seed) -> dict``.
GENERATORS = {"refund": refund_input}


def generated_input(workflow: str, seed: int) -> dict[str, Any]:
    """A realistic input for ``workflow`` (``{}`` when no generator is known), fixed by ``seed``."""
    generator = GENERATORS.get(workflow)
    return generator(seed) if generator else {}
