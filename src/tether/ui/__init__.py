"""The inspection UI: runs, conversations, agents and workflows of a lab runtime, in a browser.

```python
from tether.lab import load_registry
from tether.ui import serve

registry = load_registry()
serve(registry.runtime, registry=registry)          # http://127.0.0.1:8321
```

`create_app(runtime, registry=None)` returns the Starlette app (for tests, or to mount it in
another ASGI app). Pages are server-rendered with autoescaping everywhere; a running run's page
follows new events by polling `/api/events/{id}?after=N`. Nothing is loaded from the
network: the stylesheet and the one small script ship inside this package.

Requests are answered only for the host names the server was started for (`HostAllowList`,
against DNS rebinding), and off loopback only with a token (`TokenGate`: a bearer header, or
the cookie a browser gets at `/login`). Both are `tether.web.middleware`'s, re-exported here.
"""

from ..web import allowed_hosts, is_loopback
from ..web.middleware import HostAllowList, TokenGate
from ._app import create_app
from ._serve import DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV, aserve, serve

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "TOKEN_ENV",
    "HostAllowList",
    "TokenGate",
    "allowed_hosts",
    "aserve",
    "create_app",
    "is_loopback",
    "serve",
]
