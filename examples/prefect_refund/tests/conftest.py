"""The refund flow's package lives one folder up from this example: put ``examples/`` on the path."""

import sys
from pathlib import Path

EXAMPLES = str(Path(__file__).resolve().parents[2])
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)
