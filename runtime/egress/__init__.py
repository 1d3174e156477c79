"""Egress: what a sandbox can reach on the network, and the proxy that enforces it.

- ``rules``: the allowlist and the address policy (shared with ``web_fetch``).
- ``credentials``: the signed proxy credentials each command carries.
- ``proxy`` / ``server``: the asyncio proxy and its process entry point.
- ``supervisor``: the service's proxy child process, watched and restarted.
- ``docker_network``: the internal sandbox network and its host firewall.
- ``service``: the whole, built from settings, as the sandbox layer sees it.
"""
