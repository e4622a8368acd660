"""Helpers for the Ray tests: a loopback-only namespace check, a local multi-node cluster, a per-node probe."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Set in the environment of the pytest run re-executed inside the namespace.
INSIDE = "SPOOLPARSE_RAY_LOOPBACK_NS"
#: What Ray needs to keep to this machine and leave agents to spoolparse (see the README).
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_memory_monitor_refresh_ms": "0", "RAY_AUTH_MODE": "disabled"}


def loopback_only() -> bool:
    """Whether this process's network namespace has no interface but ``lo``.

    ``/proc/net/dev`` is per namespace (``/sys/class/net`` shows the namespace sysfs was mounted in).
    """
    try:
        with open("/proc/net/dev") as f:
            names = [line.split(":", 1)[0].strip() for line in f.read().splitlines()[2:]]
    except OSError:
        return False
    return names == ["lo"]


def cannot_unshare() -> str | None:
    """Why the tests cannot make a loopback-only namespace here, or ``None``."""
    if os.geteuid() != 0:
        return "making a loopback-only network namespace (unshare -n) needs root"
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (util-linux / iproute2)"
    return None


@contextmanager
def local_cluster(nodes: int = 3) -> Iterator[Any]:
    """A Ray cluster of ``nodes`` raylets on this machine (one CPU each), the driver connected to it."""
    import ray
    from ray.cluster_utils import Cluster

    os.environ.update(RAY_ENV)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        # the node runners import this module (NodeProbe) like the driver does
        ray.init(address=cluster.address, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), **RAY_ENV}})
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


class NodeProbe:
    """A memory probe whose used figure depends on the Ray node it is read on (by node id prefix)."""

    def __init__(self, total: int, used_by_node: dict[str, int]) -> None:
        self._total = total
        self.used_by_node = used_by_node

    def total(self) -> int:
        return self._total

    def used(self) -> int:
        import ray

        node = ray.get_runtime_context().get_node_id()
        for prefix, used in self.used_by_node.items():
            if node.startswith(prefix):
                return used
        return 0
