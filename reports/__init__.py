"""Report renderers. They read result data (the document of :mod:`crashpoint.harness.results`) only."""
