"""Prometheus' vLLM and gateway targets come from the inventory (playbooks/monitoring.yml's
role entry, over the serving groups of playbooks/vars/topology.yml), not from facts the
serving roles publish in the same run: role monitoring's template rendered on localhost for
an inventory of two serving groups, a GH200-class host and a gateway, none of which ran."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.unit.roles.localhost_play import play_on_localhost

ROOT = Path(__file__).resolve().parents[3]
INVENTORY = """
[sparks]
spark-1 ansible_host=192.0.2.11 llmfleet_management_ip=198.51.100.11
spark-2 ansible_host=192.0.2.12 llmfleet_management_ip=198.51.100.12
spark-3 ansible_host=192.0.2.13 llmfleet_management_ip=198.51.100.13 vllm_server_port=8001
spark-4 ansible_host=192.0.2.14 llmfleet_management_ip=198.51.100.14

[sparks:vars]
llmfleet_group_size=2

[gh200]
gh200-1 ansible_host=192.0.2.21 llmfleet_vllm_port=9000

[gateways]
gw-1 ansible_host=192.0.2.30 serving_gateway_metrics_port=9404

[all:vars]
ansible_connection=local
"""


def role_entry_vars() -> dict[str, str]:
    """What playbooks/monitoring.yml gives role monitoring."""
    (play,) = yaml.safe_load((ROOT / "playbooks" / "monitoring.yml").read_text())
    (entry,) = play["roles"]
    return dict(entry["vars"])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("monitoring")
    (out / "hosts").write_text(INVENTORY)
    roles = ROOT / "roles"
    playbook = [
        {
            "name": "Render Prometheus' configuration",
            "hosts": "sparks:gh200",
            "gather_facts": False,
            "vars_files": [
                str(roles / "_common" / "defaults" / "main.yml"),
                str(roles / "monitoring" / "defaults" / "main.yml"),
                str(roles / "monitoring" / "vars" / "main.yml"),
                str(ROOT / "playbooks" / "vars" / "topology.yml"),
            ],
            "tasks": [
                {
                    "name": "Render the template",
                    "ansible.builtin.template": {
                        "src": str(roles / "monitoring" / "templates" / "prometheus.yml.j2"),
                        "dest": str(out / "prometheus.yml"),
                        "mode": "0600",
                    },
                    "vars": role_entry_vars(),
                    "when": "inventory_hostname == 'spark-1'",
                }
            ],
        }
    ]
    (out / "play.yml").write_text(yaml.safe_dump(playbook))
    proc = play_on_localhost(out / "play.yml", {}, "-i", str(out / "hosts"))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return yaml.safe_load((out / "prometheus.yml").read_text())


def targets(config: dict, job: str) -> dict[str, str]:
    (scrape,) = [each for each in config["scrape_configs"] if each["job_name"] == job]
    return {
        group["labels"]["instance"]: target
        for group in scrape["static_configs"]
        for target in group["targets"]
    }


def test_vllm_is_scraped_at_each_groups_rank_0_and_each_single_host(prometheus: dict) -> None:
    # At the management address, on the port each serves at (vllm_server_port, else
    # llmfleet_vllm_port, else 8000).
    assert targets(prometheus, "vllm") == {
        "spark-1": "198.51.100.11:8000",
        "spark-3": "198.51.100.13:8001",
        "gh200-1": "192.0.2.21:9000",
    }


def test_the_gateway_is_scraped_where_its_exporter_listens(prometheus: dict) -> None:
    assert targets(prometheus, "gateway") == {"gw-1": "192.0.2.30:9404"}


def test_every_host_of_the_play_is_a_node(prometheus: dict) -> None:
    assert set(targets(prometheus, "node")) == {
        "spark-1",
        "spark-2",
        "spark-3",
        "spark-4",
        "gh200-1",
    }
