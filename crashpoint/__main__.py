"""``python -m crashpoint`` is the ``crashpoint`` command."""

import sys

from crashpoint.harness.cli import main

sys.exit(main())
