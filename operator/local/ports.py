"""Free loopback ports for the local processes' listeners, outside the ephemeral range.

The kernel hands ports of ``ip_local_port_range`` to every socket that connects or binds
port 0. A port taken from that range for a listener that starts later (or restarts, like a
gang-restarted trainer's metrics port) can meanwhile become some connection's source port.
Ports below that range (or above it) are never given out that way, so only a process that
binds them explicitly can take them. Ports are tried in random order, so that concurrent
runs on one machine rarely try the same ones.
"""

from __future__ import annotations

import errno
import random
import socket
from collections.abc import Collection
from contextlib import ExitStack
from pathlib import Path

LOOPBACK = "127.0.0.1"
_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL = (32768, 60999)  # Linux's default ip_local_port_range
_LOWEST = 10000  # below: well-known and registered services' habits
_HIGHEST = 65535


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (inclusive); Linux's default where unreadable."""
    try:
        low, high = (int(x) for x in _EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return _DEFAULT_EPHEMERAL
    return low, high


def listener_port_range() -> range:
    """Ports for local listeners: the larger span outside the ephemeral range."""
    low, high = ephemeral_range()
    below = range(_LOWEST, max(_LOWEST, low))
    above = range(min(high + 1, _HIGHEST + 1), _HIGHEST + 1)
    return below if len(below) >= len(above) else above


def free_ports(count: int, host: str = LOOPBACK, *, exclude: Collection[int] = ()) -> list[int]:
    """Distinct ports, free now and outside the ephemeral range; all are held together so
    none repeats; ``exclude`` are ports already handed out."""
    candidates = [p for p in listener_port_range() if p not in exclude]
    random.shuffle(candidates)
    with ExitStack() as stack:
        ports: list[int] = []
        for port in candidates:
            if len(ports) == count:
                break
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind((host, port))
            except OSError as err:
                if err.errno in (errno.EADDRINUSE, errno.EACCES):
                    continue
                raise
            ports.append(port)
        if len(ports) < count:
            span = listener_port_range()
            raise OSError(
                errno.EADDRINUSE,
                f"only {len(ports)} of {count} ports free on {host} in {span.start}-{span.stop - 1}",
            )
        return ports
