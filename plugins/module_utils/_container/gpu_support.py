# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""Whether a container engine can give a container the NVIDIA GPUs the way gpu_container
asks for them: Docker by a device request for the ``nvidia`` driver (``--gpus all``),
Podman by the CDI device ``nvidia.com/gpu=all``.

Pure functions, no AnsibleModule: the module ``container_gpu_support`` gathers the inputs
(the engine's ``info``, the CDI spec files, the NVIDIA hook on the PATH) and unit tests call
these directly.

* Docker serves ``--gpus`` when the NVIDIA Container Toolkit is installed: its
  ``nvidia-container-runtime-hook`` on the daemon's PATH (what Docker's ``nvidia`` device
  driver runs), the ``nvidia`` runtime registered with the daemon (``nvidia-ctk runtime
  configure``), or a CDI spec for ``nvidia.com/gpu`` (``nvidia-ctk cdi generate``). Without
  any of them Docker refuses the container with "could not select device driver "nvidia"
  with capabilities: [[gpu]]".
* Podman resolves ``nvidia.com/gpu=all`` from the CDI specs only (``/etc/cdi``,
  ``/var/run/cdi``): without one for ``nvidia.com/gpu`` it refuses the device.
"""

from __future__ import annotations

import json
import os
import re

GPU_KIND = "nvidia.com/gpu"
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_SUFFIXES = (".yaml", ".yml", ".json")
NVIDIA_HOOK = "nvidia-container-runtime-hook"

# `kind: nvidia.com/gpu` (YAML, quoted or not) or `"kind":"nvidia.com/gpu"` (JSON, often on
# one line): a vendor/class name after a key named exactly kind.
_KIND = re.compile(r"""(?<![\w-])["']?kind["']?\s*:\s*["']?(?P<kind>[\w.-]+/[\w.-]+)""")


def engine_info(stdout):
    """The engine's ``info`` JSON (``docker info --format '{{json .}}'``, ``podman info
    --format json``) as a dict; an empty dict when it is not JSON."""
    try:
        info = json.loads(stdout or "")
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def docker_runtimes(info):
    """The runtimes the Docker daemon knows (``Runtimes`` of ``docker info``), sorted."""
    runtimes = info.get("Runtimes") or {}
    return sorted(runtimes) if isinstance(runtimes, dict) else []


def spec_kinds(text):
    """The CDI device kinds a spec file's text declares (``kind: vendor/class``)."""
    return [match.group("kind") for match in _KIND.finditer(text or "")]


def cdi_spec_files(directories):
    """The CDI spec files (``*.yaml``, ``*.yml``, ``*.json``) in ``directories``, in order;
    a folder that does not exist holds none."""
    found = []
    for directory in directories:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        found += [
            os.path.join(directory, name)
            for name in names
            if name.endswith(CDI_SUFFIXES) and os.path.isfile(os.path.join(directory, name))
        ]
    return found


def gpu_specs(files, read):
    """The files among ``files`` that declare the ``nvidia.com/gpu`` kind (``read``: path ->
    text, None when unreadable)."""
    return [path for path in files if GPU_KIND in spec_kinds(read(path) or "")]


def gpu_support(engine, runtimes, nvidia_hook, specs, spec_dirs):
    """``{supported, reason}``: whether ``engine`` can give a container every NVIDIA GPU the
    way gpu_container asks (``runtimes``: Docker's; ``nvidia_hook``: the hook's path or None;
    ``specs``: the CDI specs for ``nvidia.com/gpu``; ``spec_dirs``: where they were looked
    for). The reason says what was found, or what is missing and how to add it."""
    where = ", ".join(spec_dirs)
    if engine == "podman":
        if specs:
            return {"supported": True, "reason": f"CDI spec for {GPU_KIND}: {', '.join(specs)}"}
        return {
            "supported": False,
            "reason": (
                f"Podman finds GPUs through CDI, and no CDI spec in {where} declares {GPU_KIND} "
                "(install the NVIDIA Container Toolkit, nvidia-container-toolkit, and run "
                "`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)"
            ),
        }
    found = []
    if "nvidia" in runtimes:
        found.append("the nvidia runtime")
    if nvidia_hook:
        found.append(nvidia_hook)
    if specs:
        found.append(f"CDI spec for {GPU_KIND}: {', '.join(specs)}")
    if found:
        return {"supported": True, "reason": "; ".join(found)}
    return {
        "supported": False,
        "reason": (
            f"Docker's runtimes ({', '.join(runtimes) or 'none listed'}) lack nvidia, "
            f"{NVIDIA_HOOK} is not on the PATH and no CDI spec in {where} declares {GPU_KIND}: "
            "Docker would refuse the container ('could not select device driver \"nvidia\"'); "
            "install the NVIDIA Container Toolkit (nvidia-container-toolkit) and run "
            "`nvidia-ctk runtime configure --runtime=docker`, then restart Docker"
        ),
    }
