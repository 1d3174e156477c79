"""One module per console page, each with its own ``router``.

A new page (the Images and Audit entries of the navigation are routed this way):

1. ``pages/<name>.py`` with ``router = APIRouter(route_class=ConsoleRoute,
   include_in_schema=False)``; a GET handler takes ``session: PageSession`` (signed
   out: off to the sign-in form) and answers ``render(session, "<name>.html",
   page="<nav key>", ...)``; a POST handler takes ``session: ActionSession`` (cookie,
   CSRF token and origin checked before it runs) and records what it did with
   ``audit_hook.record_action``.
2. ``templates/<name>.html`` extends ``layout.html``; every form that posts carries
   ``<input type="hidden" name="csrf" value="{{ csrf }}">``.
3. The module in ``PAGES`` (``api/console/__init__.py``), and its routes in the table of
   ``tests/api/test_scopes.py`` (``CONSOLE_PAGE`` / ``CONSOLE_CHANGE``).

A page reads and acts through ``services`` as the API's routes do, never around them.
"""
