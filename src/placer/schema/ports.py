"""Checks of a pod's ``hostPorts`` as kube's API validation applies them
(``AccumulateUniqueHostPorts``): no two of one pod alike in protocol, host IP as written
and port; the host IP a text without control characters. The field's own shape (a port in
1–65535, TCP/UDP/SCTP) is the Struct's (:class:`placer.model.ports.HostPort`).
"""
from __future__ import annotations

from typing import Sequence

from placer.exceptions import InvalidInputError
from placer.model.ports import HostPort, port_key
from placer.schema.errors import control_error, has_control

__all__ = ["check_host_ports"]


def check_host_ports(ports: Sequence[HostPort]) -> None:
    """Refuse a pod's host ports kube's API server refuses.

    Raises
    ------
    InvalidInputError
        At ``hostPorts[j]``, relative to the pod.
    """
    seen: dict[str, int] = {}
    for j, port in enumerate(ports):
        if has_control(port.host_ip):
            raise control_error(f"hostPorts[{j}].hostIP", port.host_ip)
        key = port_key(port)
        first = seen.setdefault(key, j)
        if first != j:
            raise InvalidInputError(f"hostPorts[{j}]", f"duplicate host port {key}, first at hostPorts[{first}]")
