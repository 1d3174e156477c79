"""The tool-catalog layer: which functions an agent gets, and running them with a log."""
