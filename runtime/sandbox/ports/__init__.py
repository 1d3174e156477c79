"""A sandbox's ports, reached through the service over its agent channel.

A sandbox has no network interface besides loopback: each TCP connection to one of
its ports is one ``siesta-fs connect PORT`` process in it (``connection``), started
over the agent channel, whose stdin and stdout are the connection's two directions.
HTTP/1.1 (``http1``) and WebSocket (``websocket``) requests are forwarded over such a
connection; ``tokens`` says who may send them.
"""
