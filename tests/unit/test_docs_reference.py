"""The docs site's reference tables are the code's (issue 24 item 1): each table between ``<!-- generated: NAME -->``
markers is what ``docs/generate.py`` makes from the CLI parser, the rule and fault-kind registries, the pytest
plugin's options, the built-in tools and the JSON Schemas. A page out of date fails here with the fix."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_every_generated_table_is_up_to_date() -> None:
    stale = [str(page.relative_to(ROOT)) for page, _ in _generator().stale()]
    assert stale == [], f"out of date: {', '.join(stale)}; run `python docs/generate.py` and commit the pages"


def test_every_generator_has_a_place_on_the_site() -> None:
    gen = _generator()
    text = "".join(p.read_text(encoding="utf-8") for p in gen.pages())
    missing = [name for name in gen.GENERATORS if f"<!-- generated: {name} -->" not in text]
    assert missing == [], f"generated tables no page shows: {missing}"


def test_a_changed_registry_makes_a_page_stale(tmp_path: Path, monkeypatch) -> None:
    """The check can fail: a rule registered after the pages were made leaves docs/reference/rules.md stale."""
    gen = _generator()
    rules = gen._rules_module()  # wherever the registry lives on main

    @rules.rule("test_only.docs_canary", description="a rule only this test registers")
    def canary(ctx):  # pragma: no cover - never judged
        return []

    try:
        stale = [page.name for page, new in gen.stale()]
        assert "rules.md" in stale
        assert "test_only.docs_canary" in dict((p.name, n) for p, n in gen.stale())["rules.md"]
    finally:
        rules.unregister("test_only.docs_canary")
    assert "rules.md" not in [page.name for page, _ in gen.stale()]
