"""Generated fault schedules in the pytest plugin: one item per case under ``--chaos``.

The seed comes from ``--chaos-seed N`` / ``--crashpoint-seed N``, ``last`` (the previous
session's, from pytest's cache, key ``crashpoint/seed``), or a fresh random one; it is
printed in the pytest header and stored in the cache, with the schedules each case drew
(key ``crashpoint/schedules``), so ``pytest --chaos --chaos-seed last`` draws exactly the
same schedules again. A failing item shows the shrunk schedule, writes it as a repro pack
under ``.crashpoint/repro`` in the rootdir, and gives the one-line command that runs it.

Under ``pytest-xdist`` the controller resolves the seed (and alone reads and writes the cache): it
hands the seed to each worker in ``workerinput`` (key :data:`WORKERINPUT_SEED`), and each schedule
item's drawn schedules travel back on its report (``report.crashpoint_schedules``), which the
controller adds to the cache (:func:`cache_report`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

CACHE_SEED = "crashpoint/seed"
CACHE_SCHEDULES = "crashpoint/schedules"
WORKERINPUT_SEED = "crashpoint_seed"
_STASH_SEED = pytest.StashKey[int]()


def resolve(config: pytest.Config) -> int:
    """The session's seed (see the module docstring); stores it in the cache. On an xdist worker: the
    controller's seed, from ``config.workerinput``, and the cache is left alone.

    Raises:
        pytest.UsageError: ``last`` without a cached seed, or a value that is not an integer.
    """
    if _STASH_SEED in config.stash:
        return config.stash[_STASH_SEED]
    given = getattr(config, "workerinput", {}).get(WORKERINPUT_SEED)
    if given is not None:
        config.stash[_STASH_SEED] = int(given)
        return int(given)
    raw = config.getoption("crashpoint_seed", None) or getattr(config.option, "crashpoint_seed_alias", None)
    from crashpoint.errors import UsageError
    from crashpoint.harness.run.schedule_search import choose_seed

    cache = getattr(config, "cache", None)
    previous = cache.get(CACHE_SEED, None) if cache is not None and raw == "last" else None
    try:
        seed = choose_seed(raw, previous, "pytest's cache (run once without it)")
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if cache is not None:
        cache.set(CACHE_SEED, seed)
        cache.set(CACHE_SCHEDULES, {})
    config.stash[_STASH_SEED] = seed
    return seed


def cache_report(config: pytest.Config, report: pytest.TestReport) -> None:
    """Add the schedules a schedule item drew (``report.crashpoint_schedules``: case id -> schedules)
    to the cache, unless this process is an xdist worker (the controller does it)."""
    drawn_now = getattr(report, "crashpoint_schedules", None)
    cache = getattr(config, "cache", None)
    if not drawn_now or cache is None or hasattr(config, "workerinput"):
        return
    drawn = cache.get(CACHE_SCHEDULES, {})
    drawn.update(drawn_now)
    cache.set(CACHE_SCHEDULES, drawn)


class ScheduleFailed(Exception):
    """Raised by a schedule item whose search found a failing schedule; carries the report text."""


class ScheduleItem(pytest.Item):
    """The generated-schedule search of one case (``budget`` schedules, seeded by the session seed)."""

    def __init__(self, *, case: Any, pack: Any, golden: Any, budget: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case, self.pack, self.golden, self.budget = case, pack, golden, budget

    def runtest(self) -> None:
        from crashpoint.harness.adapters.reference import ReferenceAdapter
        from crashpoint.harness.cli.search import repro_line
        from crashpoint.harness.run.schedule_search import case_seed, search_case, summary_lines, write_repro

        engine = self.config.getoption("crashpoint_engine")
        adapter = ReferenceAdapter(engine=engine) if engine else ReferenceAdapter()
        seed = resolve(self.config)
        root = Path(tempfile.mkdtemp(prefix="crashpoint-schedules-"))
        try:
            result = search_case(self.case, self.pack, adapter, seed=case_seed(seed, self.case.case_id),
                                 budget=self.budget, workdir=root, golden=self.golden,
                                 worker_timeout_s=self.config.getoption("crashpoint_worker_timeout"))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        self.crashpoint_schedules = {self.case.case_id: result.schedules}  # cached by cache_report
        if result.found is not None:
            path = write_repro(result, self.pack, self.config.rootpath / ".crashpoint" / "repro")
            lines = summary_lines(result)
            lines.append(f"repro case: {path}")
            lines.append(f"reproduce: {repro_line(path, engine)}")
            lines.append(f"same schedules again: pytest --chaos --chaos-seed {seed} (or --chaos-seed last)")
            raise ScheduleFailed("\n".join(lines))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The shrunk schedule and its repro instead of a Python traceback."""
        if isinstance(excinfo.value, ScheduleFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Location shown by pytest: the case file."""
        return self.path, 0, f"case {self.name}"
