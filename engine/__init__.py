"""The reference durable workflow engine.

Definitions are data (:mod:`.definition`), the state machine is one table
(:mod:`.states`), steps return typed transitions (:mod:`.transitions`), state
lives in SQLite as an append-only journal plus current state (:mod:`.store`),
and :class:`~.engine.Engine` drives workflows from their last durable checkpoint.
The engine knows nothing of the harness; it reaches the world only through
:class:`crashpoint.protocols.ToolPort` and time only through
:class:`crashpoint.protocols.Clock`.
"""

from crashpoint.engine.definition import DefinitionError, WorkflowDefinition
from crashpoint.engine.engine import Engine, WorkflowStatus
from crashpoint.engine.states import TERMINAL, TRANSITIONS, IllegalTransition, Status, check_transition

__all__ = [
    "TERMINAL",
    "TRANSITIONS",
    "DefinitionError",
    "Engine",
    "IllegalTransition",
    "Status",
    "WorkflowDefinition",
    "WorkflowStatus",
    "check_transition",
]
