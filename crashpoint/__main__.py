"""``python -m crashpoint`` is the ``crashpoint`` command."""

import sys

from crashpoint.harness.cli.main import main

sys.exit(main())
