"""The files here are read by mypy (``tools/typecheck.py``), never imported by pytest:
``misuse.py`` calls the API wrongly on purpose."""

collect_ignore = ["misuse.py", "usage.py"]
