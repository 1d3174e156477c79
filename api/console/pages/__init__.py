"""One module per console page, each with its own ``router`` (``api/console/__init__.py``
includes them). A page reads through ``services`` as the API routes do, and answers
with ``render(session, "<page>.html", page="<nav entry>", ...)``."""
