"""llmfleet.inventory_files: the variables an inventory's files set, read without ansible."""

from __future__ import annotations

from pathlib import Path

from llmfleet.inventory_files import Vaulted, inventory_files, load, variable_names


def _inventory(root: Path) -> Path:
    (root / "group_vars" / "all").mkdir(parents=True)
    (root / "host_vars").mkdir()
    (root / "hosts.yml").write_text(
        "all:\n"
        "  vars: {llmfleet_api_port: 8000}\n"
        "  children:\n"
        "    sparks:\n"
        "      hosts:\n"
        "        spark-1: {ansible_host: 192.0.2.11, cx7_network_host_number: 1}\n"
        "        spark-2:\n"
        "      children:\n"
        "        serving_1:\n"
        "          vars: {llmfleet_group_size: 2}\n"
    )
    (root / "group_vars" / "all" / "fabric.yml").write_text(
        "llmfleet_fabric_mtu: 9000\nkey: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  3031\n"
    )
    (root / "host_vars" / "spark-1.yml").write_text("ray_node_port: 6380\n")
    (root / "group_vars" / "all" / "whole.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n3031\n")
    (root / "legacy").write_text("[sparks]\nspark-3 llmfleet_fabric_mut=1500\n")
    (root / "nodes.py").write_text("print('{}')\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "x.yml").write_text("llmfleet_hidden: 1\n")
    return root


def test_the_variables_of_groups_hosts_and_vars_folders(tmp_path: Path) -> None:
    root = _inventory(tmp_path)
    found = {(path.relative_to(root).as_posix(), name) for path, name in variable_names(root)}
    assert found == {
        ("hosts.yml", "llmfleet_api_port"),
        ("hosts.yml", "ansible_host"),
        ("hosts.yml", "cx7_network_host_number"),
        ("hosts.yml", "llmfleet_group_size"),
        ("group_vars/all/fabric.yml", "llmfleet_fabric_mtu"),
        ("group_vars/all/fabric.yml", "key"),
        ("host_vars/spark-1.yml", "ray_node_port"),
    }


def test_an_inventory_file_alone(tmp_path: Path) -> None:
    root = _inventory(tmp_path)
    assert inventory_files(root / "hosts.yml") == [root / "hosts.yml"]
    names = [name for _, name in variable_names(root / "hosts.yml")]
    assert names == [
        "llmfleet_api_port",
        "ansible_host",
        "cx7_network_host_number",
        "llmfleet_group_size",
    ]


def test_load_reads_vaulted_values_and_skips_what_is_no_yaml(tmp_path: Path) -> None:
    root = _inventory(tmp_path)
    assert isinstance(load(root / "group_vars" / "all" / "fabric.yml")["key"], Vaulted)
    assert not isinstance(load(root / "nodes.py"), dict)
    assert load(root / "legacy") is None
    assert load(root / "absent.yml") is None
