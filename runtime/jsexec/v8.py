"""V8 as a JS worker needs it: import ``STPyV8`` from here, never directly.

Workers are forks of the template (``zygote.py``), and a fork copies only the
forking thread: V8's background threads, started by ``import STPyV8``, are not in
the worker. Work V8 hands to them never runs there. A hot loop's optimised code
(on-stack replacement) never arrives, so ``while (true) {}`` stays in slow code
and V8 keeps asking for it again, growing the worker's memory until the memory
limit kills a script that never allocated. ``--single-threaded`` makes V8 do all
of its work (compiling, garbage collection) on the script's own thread, in a fork
as in a worker started from scratch.

V8 takes flags only before its platform starts, which ``import STPyV8`` does;
hence the binding is set up first.
"""

from __future__ import annotations

import _STPyV8

FLAGS = "--single-threaded"

_STPyV8.JSEngine.setFlags(FLAGS)

import STPyV8  # noqa: E402  # starts V8: after the flags

__all__ = ["STPyV8"]
