"""Host names: which are loopback, and which a server bound to an address answers."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

__all__ = ["LOOPBACK_NAMES", "allowed_hosts", "host_name", "is_loopback"]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""The names a browser on this machine uses for a server bound to loopback."""
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def is_loopback(host: str) -> bool:
    """True for `localhost` and any loopback address (127.0.0.0/8, ::1)."""
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed_hosts(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The `Host` names a server bound to `bind_host` answers.

    Bound to loopback: the loopback names. Bound to one name or address: that one. Bound to
    every interface (`0.0.0.0`, `::`): the loopback names and this machine's host name. `extra`
    (`--allowed-host`) adds names; `*` in it turns the check off.
    """
    names: set[str] = set()
    bound = bind_host.strip("[]").lower()
    if is_loopback(bound):
        names |= LOOPBACK_NAMES
        names.add(bound)
    elif bound in _WILDCARDS:
        names |= LOOPBACK_NAMES
        names.add(socket.gethostname().lower())
        names.add(socket.getfqdn().lower())
    else:
        names.add(bound)
    names.update(host_name(h) for h in extra)
    return frozenset(n for n in names if n)


def host_name(host: str) -> str:
    """A Host header's name without its port, lower-cased; IPv6 without brackets."""
    value = host.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")
