"""Siesta Runtime's public contract: the request and response models of its HTTP API.

The server validates and serializes with these models and its OpenAPI document is
generated from them; the Python client sends and reads with the same ones. This
package imports nothing but pydantic (and the standard library), so that the client
stands alone: ``pip install ./clients/python`` brings no part of the server.

- ``base``: the base of every agent function's arguments and result.
- ``text``: rules on text (ids, file names, workspace paths, egress entries) as patterns.
- ``errors``: the error body every failure has.
- ``functions``: each agent function's arguments and result.
- ``files``, ``conversations``, ``tools``, ``agents``, ``images``, ``admin``,
  ``health``: the resources' bodies and answers.
- ``network``: a sandbox's own network rules (a narrowing of the egress allowlist).
- ``snapshots``: snapshots of a sandbox, forks, conversations started from a snapshot.
"""
