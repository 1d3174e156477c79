"""What the rest of runtime knows of its two backends: the store and provider
protocols with their records, and their settings. The implementations
(``runtime.store``, ``runtime.providers``) are chosen and built only by the
composition root (``runtime.wiring``), so nothing the HTTP app imports reaches them."""
