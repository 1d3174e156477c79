"""Each agent function's arguments and result, by the function's group.

The server's tool catalog publishes the arguments' JSON Schema, and every way into
a function (its HTTP route, ``/v1/tools/execute``, the JavaScript helpers)
validates with the same model.
"""
