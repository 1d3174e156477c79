"""The JavaScript executor: synchronous JS in pooled, disposable V8 worker processes."""
