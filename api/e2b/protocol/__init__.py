"""E2B's envd API (process.Process, filesystem.Filesystem): generated stubs (README.md)."""
