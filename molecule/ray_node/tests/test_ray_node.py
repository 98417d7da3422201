"""A two-node Ray cluster in containers whose workers inherit the fabric environment: in
Docker (scenario ray_node, as the Spark sample runs it) or in Podman (ray_node_podman), the
engine each node's container is found in."""

from __future__ import annotations

import json

HEAD = "molecule-spark-1"
ADDRESS = {"molecule-spark-1": "192.168.100.11", "molecule-spark-2": "192.168.100.12"}
# Runs on the head: one task pinned to each node, each reporting what its worker sees.
PROBE = """
import json, os, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address="auto", logging_level="ERROR")
@ray.remote(num_cpus=0)
def where():
    return {k: os.environ.get(k) for k in ("GLOO_SOCKET_IFNAME", "NCCL_IB_DISABLE",
            "RAY_prestart_worker_first_driver", "VLLM_HOST_IP")}
nodes = [n for n in ray.nodes() if n["Alive"]]
pin = [NodeAffinitySchedulingStrategy(n["NodeID"], soft=False) for n in nodes]
refs = [where.options(scheduling_strategy=strategy).remote() for strategy in pin]
print(json.dumps({
    "nodes": sorted(n["NodeManagerAddress"] for n in nodes),
    "object_store": sorted(n["Resources"].get("object_store_memory", 0) for n in nodes),
    "workers": sorted(ray.get(refs), key=lambda e: e["VLLM_HOST_IP"]),
}))
"""


ENGINES: dict[str, str] = {}


def engine(host) -> str:
    """The engine that runs the node's Ray container (looked for once per node)."""
    name = host.backend.get_hostname()
    if name not in ENGINES:
        ENGINES[name] = next(
            (
                e
                for e in ("docker", "podman")
                if host.run(f"{e} container inspect llmfleet-ray").rc == 0
            ),
            "",
        )
    assert ENGINES[name], f"{name}: no llmfleet-ray container in Docker or Podman"
    return ENGINES[name]


def inspect(host) -> dict:
    return json.loads(host.check_output(f"{engine(host)} inspect llmfleet-ray"))[0]


def test_container_is_supervised_and_never_removed(host) -> None:
    info = inspect(host)
    assert info["State"]["Running"] is True
    assert info["HostConfig"]["RestartPolicy"]["Name"] == "always"
    assert info["HostConfig"]["AutoRemove"] is False
    assert info["HostConfig"]["NetworkMode"] == "host"
    if engine(host) == "docker":
        assert info["HostConfig"]["ShmSize"] == 1 << 30
    else:  # Podman shares the host's /dev/shm (it refuses a size with the host's IPC): the
        # namespace itself, as Podman 4.3's inspect says IpcMode "shareable" for --ipc host.
        pid = info["State"]["Pid"]
        theirs = host.check_output(f"readlink /proc/{pid}/ns/ipc")
        assert theirs == host.check_output("readlink /proc/1/ns/ipc")
    args = info["Args"]
    name = host.backend.get_hostname()
    assert args[args.index("--node-ip-address") + 1] == ADDRESS[name]
    assert args[args.index("--object-store-memory") + 1] == "536870912"
    if name == HEAD:
        assert "--head" in args
    else:
        assert args[args.index("--address") + 1] == "192.168.100.11:6379"


def test_container_mounts_the_vllm_options_and_no_key(host) -> None:
    mounts = {m["Destination"]: (m["Source"], m["RW"]) for m in inspect(host)["Mounts"]}
    assert mounts["/etc/llmfleet/vllm"] == ("/etc/llmfleet/vllm", False)
    assert not any(dest in ("/etc/llmfleet", "/etc/llmfleet/private") for dest in mounts)


def test_environment_is_given_at_creation(host) -> None:
    env = dict(item.split("=", 1) for item in inspect(host)["Config"]["Env"])
    assert env["RAY_prestart_worker_first_driver"] == "0"
    assert env["RAY_memory_usage_threshold"] == "0.97"
    assert env["GLOO_SOCKET_IFNAME"] == "enp1s0f1np1"
    assert env["NCCL_IB_DISABLE"] == "1"


def test_ray_workers_on_both_nodes_inherit_the_fabric_environment(host) -> None:
    if host.backend.get_hostname() != HEAD:
        return
    out = host.check_output(
        "printf '%%s' %s | %s exec -i llmfleet-ray python -", PROBE, engine(host)
    )
    result = json.loads(out.splitlines()[-1])
    assert result["nodes"] == ["192.168.100.11", "192.168.100.12"]
    assert result["object_store"] == [536870912.0, 536870912.0]
    for worker, address in zip(
        result["workers"], ["192.168.100.11", "192.168.100.12"], strict=True
    ):
        assert worker == {
            "GLOO_SOCKET_IFNAME": "enp1s0f1np1",
            "NCCL_IB_DISABLE": "1",
            "RAY_prestart_worker_first_driver": "0",
            "VLLM_HOST_IP": address,
        }
