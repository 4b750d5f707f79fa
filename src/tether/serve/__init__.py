"""Serve agents over HTTP: start runs, follow them as resumable SSE streams, cancel them, send
client messages, speak AG-UI, chat in the browser.

```python
from tether.lab import load_registry
from tether.serve import serve

registry = load_registry()
serve(registry.runtime, registry=registry)          # http://127.0.0.1:8700
```

`create_app(runtime, registry=None)` returns the ASGI app (the inspection UI's pages included),
for any ASGI server or for tests. `tether serve [--workers N]` is the command line's way. A
stream is read from the run store, so any number of workers on one PostgreSQL database serve
one set of conversations: a client may reconnect to any of them with `Last-Event-ID`.
"""

from ..web.middleware import DEFAULT_MAX_BODY
from ._app import SHUTDOWN_GRACE, create_app
from ._feed import TERMINAL_EVENTS, RunEnd, RunFeed
from ._server import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV, ServeOptions, aserve, serve

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY",
    "DEFAULT_PORT",
    "SHUTDOWN_GRACE",
    "TERMINAL_EVENTS",
    "TOKEN_ENV",
    "RunEnd",
    "RunFeed",
    "ServeOptions",
    "aserve",
    "create_app",
    "serve",
]
