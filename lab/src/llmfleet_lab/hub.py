"""The lab's Hugging Face Hub: one container per lab serving the generated tiny model.

The container runs ``llmfleet-lab-hub`` (a read-only server speaking the Hub's HTTP API,
in the node image's emulators) from the Hub image, on the lab network under the name
``hub``. Nodes download from it with ``huggingface_hub`` through the model_weights role,
as Sparks download from huggingface.co. It carries its own label, not the nodes' one:
the lab inventory lists node containers only.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from llmfleet_lab import podman
from llmfleet_lab.errors import LabError

HUB_LABEL = "llmfleet.lab.hub"
HUB_ALIAS = "hub"
HUB_PORT = 8080
# What the lab inventory gives the model_weights role (inventory/lab/group_vars): the
# lab only listens on this machine, its token is no secret.
HUB_TOKEN = "llmfleet-lab-hub-token"  # noqa: S105 - the lab's own, not a secret (see above)
HUB_REPOSITORY_ID = "llmfleet/llmfleet-tiny"
START_TIMEOUT_S = 60


def container_name(lab: str) -> str:
    return f"{lab}-hub"


def ensure(lab: str, image: str) -> str:
    """Start the lab's Hub (a running one is kept, a stopped one started); return its
    address on the lab network once it answers."""
    name = container_name(lab)
    if not podman.container_exists(name):
        podman.run(
            "run",
            "-d",
            "--name",
            name,
            "--network",
            lab,
            "--network-alias",
            HUB_ALIAS,
            "--label",
            f"{HUB_LABEL}={lab}",
            "--restart",
            "always",
            image,
        )
    elif podman.inspect(name)["State"]["Status"] != "running":
        podman.run("start", name)
    address = _address(lab, name)
    _wait_answering(name, address)
    return address


def _address(lab: str, name: str) -> str:
    networks = podman.inspect(name)["NetworkSettings"]["Networks"]
    return str(networks.get(lab, {}).get("IPAddress", ""))


def _wait_answering(name: str, address: str) -> None:
    """Until the server answers an API request with the lab's token."""
    request = urllib.request.Request(
        f"http://{address}:{HUB_PORT}/api/models/{HUB_REPOSITORY_ID}",
        headers={"Authorization": f"Bearer {HUB_TOKEN}"},
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            # An http:// URL this module builds itself.
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            logs = podman.run("logs", "--tail", "20", name, check=False)
            raise LabError(
                f"the lab's Hub ({name}) does not answer on {address}:{HUB_PORT}",
                detail=(logs.stdout + logs.stderr).strip(),
            )
        time.sleep(0.5)


def remove(lab: str) -> bool:
    name = container_name(lab)
    if not podman.container_exists(name):
        return False
    podman.remove_container(name)
    return True


def address(lab: str) -> str:
    """The Hub's address on the lab network ("" when it does not run)."""
    name = container_name(lab)
    if not podman.container_exists(name):
        return ""
    if podman.inspect(name)["State"]["Status"] != "running":
        return ""
    return _address(lab, name)
