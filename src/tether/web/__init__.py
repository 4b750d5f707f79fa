"""The web toolkit `tether ui` and `tether serve` share: one JSON response and error body, the
request helpers, host names, and the access checks as plain ASGI middleware
(`tether.web.middleware`), put around an app in one order by `GuardedApp`.

```python
from tether.web import Access, GuardedApp, allowed_hosts

app = GuardedApp(Access.of(allowed_hosts("0.0.0.0"), token="s3cret"), routes=[...])
```
"""

from ._app import Access, GuardedApp, guard
from ._body import MAX_JSON_DEPTH, json_body, json_depth
from ._errors import ApiError, error_response
from ._gc import settle_gc
from ._hostnames import LOOPBACK_NAMES, allowed_hosts, host_name, is_loopback
from ._logs import DeferredLines, TokenScrubber, defer_access_log, scrub_access_log
from ._params import MAX_ID, MAX_SEQ, client_id, count_param, last_event_id, seq_param
from ._responses import JSONResponse, api_error, error_body, send_error, send_plain
from ._server import STOPPING, GuardedConfig, GuardedH11Protocol, ServerLimits

__all__ = [
    "LOOPBACK_NAMES",
    "MAX_ID",
    "MAX_JSON_DEPTH",
    "MAX_SEQ",
    "STOPPING",
    "Access",
    "ApiError",
    "DeferredLines",
    "GuardedApp",
    "GuardedConfig",
    "GuardedH11Protocol",
    "JSONResponse",
    "ServerLimits",
    "TokenScrubber",
    "allowed_hosts",
    "api_error",
    "client_id",
    "count_param",
    "defer_access_log",
    "error_body",
    "error_response",
    "guard",
    "host_name",
    "is_loopback",
    "json_body",
    "json_depth",
    "last_event_id",
    "scrub_access_log",
    "send_error",
    "send_plain",
    "seq_param",
    "settle_gc",
]
