"""Targets: a team's own workflow code under crashpoint (issue 12). ``target`` holds the description,
``effects`` the in-run ledger session, ``driver`` one run, ``sweep`` the crash sweep, ``oracles`` the rules,
and one module per engine (``langgraph``, ``langgraph_worker``)."""
