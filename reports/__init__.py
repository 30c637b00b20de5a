"""Reports. They read result data only: the document of :mod:`crashpoint.harness.judge.document`, or runs
stored in the results store.

* :mod:`.store`: the results store (SQLAlchemy Core; SQLite or PostgreSQL).
* :mod:`.json_report`, :mod:`.text`: the result document as JSON and terminal tables.
* :mod:`.journal`, :mod:`.junit`, :mod:`.markdown`, :mod:`.html`: a stored run as a JSON journal,
  JUnit XML, Markdown and one self-contained HTML file (:mod:`.charts` draws its images).
* :mod:`.weekly`: the weekly reliability report over stored runs (pandas).
"""
