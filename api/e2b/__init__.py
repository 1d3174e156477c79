"""E2B compatibility: the control plane (/e2b) and envd (/e2b/envd)."""
