"""The external world a workflow touches, faked with durable ledgers.

* :class:`~.ledger.Ledger`: the side-effect ledger (its own SQLite file) that records every
  tool call with its idempotency key and outcome, the tool scripts, the human decisions
  and the virtual time.
* :class:`~.tools.Toolbox`: the refund service, the customer notifier and the approval
  request tool, each honouring idempotency keys and following a script of outcomes; also the
  ads API and report service (:mod:`.ads`) and the scripted agent (:mod:`.agent`) of the
  ads-audit pack.
* :class:`~.clock.VirtualClock`: durable virtual time (seconds).
* :mod:`.data`: realistic inputs and the seeded ads account, from faker with a fixed seed.

Fakes import nothing of crashpoint but the shared types in :mod:`crashpoint.protocols`.
"""

from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import Ledger
from crashpoint.fakes.tools import Toolbox

__all__ = ["Ledger", "Toolbox", "VirtualClock"]
