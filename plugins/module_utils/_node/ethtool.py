# Copyright: llmfleet maintainers
# Apache License 2.0 (see the collection's galaxy.yml)
"""What ``ethtool IFACE`` prints, as data: the link's speed and whether a link is detected.

Standard library only: the filter ``ethtool_link`` (controller) and the module ``node_status``
(managed hosts) both parse with it.
"""

from __future__ import annotations

import re

ETHTOOL_SPEED = re.compile(r"^\s*Speed:\s*(?P<speed>\d+)Mb/s\s*$", re.M)
ETHTOOL_LINK = re.compile(r"^\s*Link detected:\s*(?P<link>yes|no)\s*$", re.M)


def ethtool_link(stdout):
    """``ethtool IFACE`` -> ``{speed_mbps: int or None, link_detected: bool}``."""
    text = str(stdout)
    speed = ETHTOOL_SPEED.search(text)
    link = ETHTOOL_LINK.search(text)
    return {
        "speed_mbps": int(speed["speed"]) if speed else None,
        "link_detected": bool(link and link["link"] == "yes"),
    }
