"""pytest plugin placeholder (replaced below)."""
