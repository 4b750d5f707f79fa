"""Which IP addresses a fetch may connect to, whatever way the address is spelled.

A host that is an IP address in any spelling a URL parser or ``inet_aton`` accepts (``127.1``,
``0x7f.1``, ``2130706433``, ``0177.0.0.1``, ``[::ffff:127.0.0.1]``, ``[::ffff:7f00:1]``) is read
as that address. IPv6 forms that carry an IPv4 address (mapped, compatible, 6to4, NAT64) are
judged by the IPv4 address they carry. What is refused: every address that is not globally
reachable (loopback, private, link-local — the cloud metadata services live there —, shared,
reserved, documentation, unspecified) and multicast.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

__all__ = ["IPAddress", "Networks", "ip_literal", "networks", "refusal"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_METADATA = {
    ipaddress.ip_address("169.254.169.254"): "the cloud metadata service",
    ipaddress.ip_address("fd00:ec2::254"): "the cloud metadata service",
    ipaddress.ip_address("100.100.100.200"): "the cloud metadata service",
    ipaddress.ip_address("192.0.0.192"): "the cloud metadata service",
}


def _ipv4_part(part: str) -> int | None:
    if part[:2] in ("0x", "0X"):
        digits, base = part[2:], 16
        if digits == "":
            return 0
    elif len(part) > 1 and part.startswith("0"):
        digits, base = part[1:], 8
    else:
        digits, base = part, 10
    try:
        return int(digits, base) if digits.isalnum() and digits.isascii() else None
    except ValueError:
        return None


def _ipv4(host: str) -> ipaddress.IPv4Address | None:
    """`host` read the way ``inet_aton`` and the WHATWG URL parser read a numeric host."""
    parts = host.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]  # one trailing dot
    if not parts or len(parts) > 4 or any(p == "" for p in parts):
        return None
    values = [_ipv4_part(p) for p in parts]
    if any(v is None for v in values):
        return None
    numbers = [v for v in values if v is not None]
    *head, last = numbers
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = last
    for i, v in enumerate(head):
        value += v << (8 * (3 - i))
    return ipaddress.IPv4Address(value)


def ip_literal(host: str) -> IPAddress | None:
    """The address `host` spells, or None when it is a name."""
    text = host.strip("[]")
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text.split("%", 1)[0])  # a zone id names an interface
        except ValueError:
            return None
    return _ipv4(text)


def _carried(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, 6to4, NAT64), else it."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        value = int(ip)
        if 1 < value < 2**32:  # IPv4-compatible (::a.b.c.d), deprecated but still routed by some
            return ipaddress.IPv4Address(value)
    return ip


def networks(allowed: Sequence[str]) -> Networks:
    """The networks of `allowed` (CIDR or single addresses)."""
    return tuple(ipaddress.ip_network(a, strict=False) for a in allowed)


def refusal(ip: IPAddress, allowed: Networks | None) -> str | None:
    """Why `ip` may not be connected to (None: it may). `allowed` None allows every address;
    otherwise the non-public addresses inside `allowed` are allowed too."""
    if allowed is None:
        return None
    target = _carried(ip)
    if any(target in net or ip in net for net in allowed if net.version in (4, 6)):
        return None
    shown = str(ip) if target == ip else f"{ip} (that is {target})"
    if target in _METADATA:
        return f"{shown} is {_METADATA[target]}"
    for test, what in (
        (target.is_unspecified, "unspecified"),
        (target.is_loopback, "a loopback address"),
        (target.is_link_local, "a link-local address"),
        (target.is_multicast, "a multicast address"),
        (target.is_private, "a private address"),
        (target.is_reserved, "a reserved address"),
    ):
        if test:
            return f"{shown} is {what}"
    if not target.is_global:
        return f"{shown} is not a public address"
    return None
