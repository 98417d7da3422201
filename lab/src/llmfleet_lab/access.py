"""SSH access to the lab's nodes, as Ansible reaches a real Spark.

Every lab has a key pair of its own and a known_hosts file with its nodes' host keys, in
this machine's cache (outside any checkout, the folder 0700, the private key 0600). `up`
installs the public key for root on every node and records the host keys each node made at
its first boot; `down` removes the folder. The lab inventory (``inventory/lab/nodes.py``)
finds the folder through the ``llmfleet.lab.ssh`` label of each node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from llmfleet_lab import podman
from llmfleet_lab.errors import LabError
from llmfleet_lab.image import cache_dir

SSH_LABEL = "llmfleet.lab.ssh"
KEY_NAME = "id_ed25519"
KNOWN_HOSTS = "known_hosts"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
# What SSH sessions on a node need of the environment `podman exec` gives (the proxy this
# machine uses reaches the nodes as container environment, which sshd does not pass on).
FORWARDED_ENVIRONMENT = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")


@dataclass(frozen=True)
class LabAccess:
    """Where a lab's SSH material lives."""

    folder: Path

    @property
    def private_key(self) -> Path:
        return self.folder / KEY_NAME

    @property
    def public_key(self) -> Path:
        return self.folder / f"{KEY_NAME}.pub"

    @property
    def known_hosts(self) -> Path:
        return self.folder / KNOWN_HOSTS


def access_of(lab: str) -> LabAccess:
    return LabAccess(cache_dir() / "labs" / lab / "ssh")


def ensure_key(lab: str) -> LabAccess:
    """The lab's key pair, made once (ed25519, no passphrase: the lab is this machine's)."""
    access = access_of(lab)
    access.folder.mkdir(parents=True, exist_ok=True)
    access.folder.chmod(0o700)
    if not (access.private_key.is_file() and access.public_key.is_file()):
        if shutil.which("ssh-keygen") is None:
            raise LabError("ssh-keygen is not installed", hint="run `make lab-deps` (apt-get)")
        access.private_key.unlink(missing_ok=True)
        access.public_key.unlink(missing_ok=True)
        proc = subprocess.run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                f"llmfleet lab {lab}",
                "-f",
                str(access.private_key),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if proc.returncode != 0:
            raise LabError("ssh-keygen failed", detail=proc.stderr.strip())
    access.private_key.chmod(0o600)
    return access


def session_environment(environ: Mapping[str, str] = os.environ) -> list[str]:
    """``NAME=value`` lines for the nodes' /etc/environment from this machine's proxy."""
    lines = []
    for name in FORWARDED_ENVIRONMENT:
        value = environ.get(name) or environ.get(name.lower())
        if value:
            lines.append(f"{name}={value}")
    return lines


AUTHORIZE_SCRIPT = r"""
set -e
install -d -m 0700 /root/.ssh
cat > /root/.ssh/authorized_keys.new
chmod 0600 /root/.ssh/authorized_keys.new
mv /root/.ssh/authorized_keys.new /root/.ssh/authorized_keys
for line in "$@"; do
  grep -qxF "$line" /etc/environment || printf '%s\n' "$line" >> /etc/environment
done
systemctl is-active --quiet ssh.service || systemctl start ssh.service
cat /etc/ssh/ssh_host_ed25519_key.pub
"""


def authorize(access: LabAccess, nodes: Mapping[str, str]) -> None:
    """Install the lab's public key for root on every node (container name to management
    address) and write known_hosts with each node's own host key at that address."""
    public_key = access.public_key.read_text()
    environment = session_environment()
    entries = []
    for container, address in sorted(nodes.items()):
        proc = subprocess.run(
            [
                "podman",
                "exec",
                "-i",
                container,
                "bash",
                "-c",
                AUTHORIZE_SCRIPT,
                "authorize",
                *environment,
            ],
            input=public_key,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise LabError(
                f"{container}: could not set up SSH (sshd, {HOST_KEY})",
                detail=(proc.stderr or proc.stdout).strip()[-2000:],
                hint="a node of an image older than SSH access has no sshd:"
                " `llmfleet lab down`, then `llmfleet lab up`",
            )
        key_type, key = proc.stdout.split()[:2]
        entries.append(f"{address} {key_type} {key}")
    access.known_hosts.write_text("".join(f"{line}\n" for line in entries))
    access.known_hosts.chmod(0o600)


def wait_reachable(access: LabAccess, addresses: Sequence[str], timeout_s: float = 60) -> None:
    """Return once every node answers over SSH as Ansible will reach it (the lab network's
    neighbour entries may still point at a node of an earlier lab for a few seconds)."""
    for address in addresses:
        deadline = time.monotonic() + timeout_s
        while True:
            proc = subprocess.run(
                ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                 "-o", f"UserKnownHostsFile={access.known_hosts}",
                 "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes",
                 "-o", "ControlMaster=no", "-i", str(access.private_key),
                 f"root@{address}", "true"],
                capture_output=True,
                text=True,
                check=False,
                timeout=30,
            )  # fmt: skip
            if proc.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise LabError(
                    f"{address} does not answer over SSH",
                    detail=proc.stderr.strip()[-2000:],
                )
            time.sleep(1)


def forget(lab: str) -> bool:
    """Remove the lab's key pair and known hosts (after its nodes are gone)."""
    folder = access_of(lab).folder.parent
    if folder.is_dir():
        shutil.rmtree(folder)
        return True
    return False


def management_addresses(containers: Sequence[str], lab: str) -> dict[str, str]:
    """Each node container's address on the lab network."""
    addresses = {}
    for container in containers:
        networks = podman.inspect(container)["NetworkSettings"]["Networks"]
        address = str(networks.get(lab, {}).get("IPAddress", ""))
        if not address:
            raise LabError(f"{container} has no address on the lab network {lab!r}")
        addresses[container] = address
    return addresses
