"""Worker processes: the crash probe that runs inside them, how they start (warm forked zygotes or new
interpreters) and are reaped, and how a kill is verified (the process the harness started died of it)."""
