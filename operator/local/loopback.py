"""Pod DNS names and container ports of a job, mapped to loopback ports of this machine."""

from __future__ import annotations

from distgnn_api.contract import Address, Role, pod_name, service_name
from distgnn_operator.local.ports import LOOPBACK, free_ports


class LocalModeError(Exception):
    """A rendered manifest that local mode cannot run; the message names the field."""


class LoopbackNetwork:
    """A loopback port for each (role, rank, container port), and the DNS names of the pods."""

    def __init__(self, job_name: str, namespace: str) -> None:
        self._job_name = job_name
        self._namespace = namespace
        self._ports: dict[tuple[Role, int, int], int] = {}
        self._hosts: dict[str, tuple[Role, int]] = {}

    def port(self, role: Role, rank: int, container_port: int) -> int:
        """The loopback port that stands in for a pod's container port (allocated once)."""
        key = (role, rank, container_port)
        if key not in self._ports:
            (self._ports[key],) = free_ports(1, exclude=set(self._ports.values()))
        return self._ports[key]

    def add_pod(self, role: Role, rank: int) -> None:
        """Register every name a peer may use for this pod (FQDN with and without suffixes)."""
        pod = pod_name(self._job_name, role, rank)
        svc = service_name(self._job_name)
        base = f"{pod}.{svc}"
        for host in (
            base,
            f"{base}.{self._namespace}",
            f"{base}.{self._namespace}.svc",
            f"{base}.{self._namespace}.svc.cluster.local",
        ):
            self._hosts[host] = (role, rank)

    def addresses(self, var: str, addrs: tuple[Address, ...]) -> tuple[Address, ...]:
        """Each pod's host:port as 127.0.0.1:<its loopback port>; other hosts are an error."""
        out = []
        for addr in addrs:
            if addr.host not in self._hosts:
                raise LocalModeError(f"env {var}: {addr} is not host:port of a pod of this job")
            role, rank = self._hosts[addr.host]
            out.append(Address(LOOPBACK, self.port(role, rank, addr.port)))
        return tuple(out)

    def rewrite_addresses(self, var: str, value: str) -> str:
        """Replace each pod host:port in a comma list by 127.0.0.1:<its loopback port>."""
        items = [x.strip() for x in value.split(",")]
        if not any(item.rpartition(":")[0] in self._hosts for item in items):
            return value
        out = []
        for item in items:
            host, _, port = item.rpartition(":")
            if host not in self._hosts or not port.isdigit():
                raise LocalModeError(f"env {var}: {item!r} is not host:port of a pod of this job")
            role, rank = self._hosts[host]
            out.append(f"{LOOPBACK}:{self.port(role, rank, int(port))}")
        return ",".join(out)
