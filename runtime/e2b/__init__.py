"""E2B's sandboxes on Siesta's sessions: the records, the timeouts, the processes.

The HTTP side (the control plane at ``/e2b``, envd at ``/e2b/envd``) is ``api/e2b``.
"""
