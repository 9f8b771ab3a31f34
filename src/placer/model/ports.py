"""Host ports: kube-scheduler's NodePorts filter (``docs/placement-rules.md``, "Host ports").

A pod's :class:`HostPort` entries are its containers' ``ports`` with a ``hostPort``
flattened (the sidecars', init containers of ``restartPolicy: Always``, and the containers';
kube's ``GetHostPorts``), under ``v1.ContainerPort``'s JSON names. Two ports conflict when
they have one protocol and one port number and their host IPs are equal or either is the
wildcard ``0.0.0.0`` (an empty ``hostIP`` is the wildcard; kube's ``HostPortInfo.CheckConflict``
after ``sanitize``). A pod fits a node only when none of its ports conflicts with a port a
pod on the node holds.

This module imports nothing of placer but the roles: every layer may read it.
"""
from __future__ import annotations

from typing import Annotated, Any, Iterable, Literal

from msgspec import Meta, Struct, field

from placer.model.roles import Role, declare

__all__ = ["WILDCARD_IP", "PROTOCOLS", "HostPort", "any_conflict", "port_key"]

WILDCARD_IP = "0.0.0.0"
"""The host IP that binds every address (kube's ``DefaultBindAllHostIP``); an empty
``hostIP`` is this one."""
PROTOCOLS = ("TCP", "UDP", "SCTP")
"""The protocols of a container port (kube's ``supportedPortProtocols``); TCP by default."""


class HostPort(Struct, frozen=True, gc=False, forbid_unknown_fields=True, rename="camel", omit_defaults=True):
    """One host port a pod takes on its node (``v1.ContainerPort``'s ``hostPort``,
    ``protocol``, ``hostIP``)."""

    host_port: Annotated[int, Meta(ge=1, le=65535)]
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: str = field(default="", name="hostIP")

    @property
    def ip(self) -> str:
        """The host IP as kube compares it: an empty one is :data:`WILDCARD_IP`."""
        return self.host_ip or WILDCARD_IP

    def conflicts_with(self, other: "HostPort") -> bool:
        """Whether the two ports cannot both be taken on one node."""
        if self.host_port != other.host_port or self.protocol != other.protocol:
            return False
        mine, theirs = self.ip, other.ip
        return mine == theirs or mine == WILDCARD_IP or theirs == WILDCARD_IP

    def to_dict(self) -> dict[str, Any]:
        """The port as Kubernetes writes it (fields at their default left out)."""
        d: dict[str, Any] = {"hostPort": self.host_port}
        if self.protocol != "TCP":
            d["protocol"] = self.protocol
        if self.host_ip:
            d["hostIP"] = self.host_ip
        return d


declare(HostPort, host_port=Role.RELATIONAL, protocol=Role.RELATIONAL, host_ip=Role.RELATIONAL)


def port_key(port: HostPort) -> str:
    """The key kube's API validation keeps a pod's host ports unique by
    (``protocol/hostIP/hostPort``, the host IP as written)."""
    return f"{port.protocol}/{port.host_ip}/{port.host_port}"


def any_conflict(wanted: Iterable[HostPort], held: Iterable[HostPort]) -> bool:
    """Whether a pod of ports ``wanted`` fails NodePorts beside ports ``held`` (kube's ``fitsPorts``)."""
    wanted = tuple(wanted)
    return any(w.conflicts_with(h) for h in held for w in wanted)

