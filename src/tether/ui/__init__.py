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
"""

from ._app import create_app
from ._serve import DEFAULT_HOST, DEFAULT_PORT, aserve, serve

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "aserve", "create_app", "serve"]
