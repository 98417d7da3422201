# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""The record of llmfleet.cluster.container_image_record: per container name, the image
reference it was started from, the image it runs and that image's registry digests, read
from the engine's ``inspect`` output.

Standard library only: it runs on the managed hosts.
"""

from __future__ import annotations

import json
import re

RECORD_VERSION = 1
_BARE_ID = re.compile(r"[0-9a-f]{64}")


class InspectError(ValueError):
    """The engine's inspect output is not what it should be."""


def image_id(value):
    """An image ID as Docker writes it (``sha256:<64 hex>``); Podman writes the hex alone."""
    text = str(value or "")
    return f"sha256:{text}" if _BARE_ID.fullmatch(text) else text


def first_inspected(text, what):
    """The first object of ``docker|podman ... inspect`` output (a JSON list)."""
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise InspectError(f"the {what} inspect output is no JSON: {exc}") from exc
    if not isinstance(found, list) or not found or not isinstance(found[0], dict):
        raise InspectError(f"the {what} inspect output holds no {what}")
    return found[0]


def container_image_id(text):
    """The ID of the image a container runs, from ``container inspect`` (its ``Image``)."""
    found = first_inspected(text, "container").get("Image")
    if not found:
        raise InspectError("the container inspect output names no image (Image)")
    return str(found)


def image_entry(reference, text):
    """What the record keeps of a container: the reference it was started from, the ID of
    the image it runs and that image's registry digests (none for a local build), from
    ``image inspect`` of that image."""
    image = first_inspected(text, "image")
    digests = image.get("RepoDigests") or []
    return {
        "reference": reference,
        "image_id": image_id(image.get("Id")),
        "repo_digests": sorted({str(d) for d in digests}),
    }


def read_containers(text):
    """The containers of a record file's text; nothing (an empty mapping) for a missing,
    unreadable or other file, which the next write replaces."""
    try:
        document = json.loads(text or "")
    except ValueError:
        return {}
    if not isinstance(document, dict) or document.get("version") != RECORD_VERSION:
        return {}
    containers = document.get("containers")
    if not isinstance(containers, dict):
        return {}
    return {str(name): entry for name, entry in containers.items() if isinstance(entry, dict)}


def updated(containers, name, entry):
    """The containers with ``name`` recorded as ``entry``, or forgotten when it is None."""
    result = {key: value for key, value in containers.items() if key != name}
    if entry is not None:
        result[name] = entry
    return result


def render(containers):
    """The record file's text: stable (sorted keys), so an unchanged record is not rewritten."""
    document = {"version": RECORD_VERSION, "containers": containers}
    return json.dumps(document, indent=1, sort_keys=True) + "\n"
