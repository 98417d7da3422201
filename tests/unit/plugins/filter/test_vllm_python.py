"""What a profile needs of the serving Python (python_files, python_packages, ray_env): the
shipped profiles carry what their field notes call required, bad entries are refused, the
files become mounts whose name follows their content, and the packages a Python reports are
judged against the requirements."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.llmfleet.cluster.plugins.filter.vllm import (
    FilterModule,
    python_package_names,
    python_package_problems,
    vllm_python_files,
    vllm_serve_config,
)

ROLE = Path(__file__).parents[4] / "roles" / "vllm_server"
PROFILES = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["vllm_server_profiles"]
LAUNCH = {"host": "0.0.0.0", "port": 8000}
SILENT = "image X: its Python did not say which packages it has (no python3 there?)"


def test_qwen3_vl_has_everything_seed_003_calls_required() -> None:
    profile = PROFILES["qwen3_vl_two_sparks"]
    assert profile["env"]["VLLM_ATTENTION_BACKEND"] == "TRITON_ATTN"
    assert profile["env"]["HF_HUB_OFFLINE"] == "1"
    assert profile["env"]["VLLM_SLEEP_WHEN_IDLE"] == "1"
    assert profile["ray_env"] == {"RAY_memory_monitor_refresh_ms": "0"}
    assert profile["python_packages"] == ["qwen-vl-utils==0.0.14"]
    assert profile["python_files"] == {"sitecustomize.py": "gb10_cudnn_conv3d.py"}
    assert (ROLE / "files" / "python" / "gb10_cudnn_conv3d.py").is_file()
    config = vllm_serve_config(profile, LAUNCH)
    assert config["quantization"] == "awq" and config["kv-cache-dtype"] == "fp8"
    assert config["gpu-memory-utilization"] == 0.70
    assert config["max-num-batched-tokens"] == 2048
    assert config["scheduling-policy"] == "priority" and config["mm-encoder-tp-mode"] == "data"


def test_minimax_m27_loads_with_fastsafetensors_and_asks_for_the_package() -> None:
    profile = PROFILES["minimax_m27_two_sparks"]
    assert profile["load_format"] == "fastsafetensors"
    assert profile["python_packages"] == ["fastsafetensors"]


def test_the_containers_keep_the_compile_cache_and_import_from_seed_003s_folder() -> None:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    # A folder per image on the host (filter compile_cache), not one ~/.cache/vllm for all.
    assert "compile_cache_dir" in defaults["vllm_server_compile_cache_dir"]
    assert defaults["vllm_server_container_python_dir"] == "/usr/lib/python3.12"


def test_every_profile_that_needs_nothing_of_python_still_renders() -> None:
    for name, profile in PROFILES.items():
        assert vllm_serve_config(profile, LAUNCH)["model"], name
        assert "python_files" not in vllm_serve_config(profile, LAUNCH)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"python_files": {"site-customize.py": "x.py"}}, "module's file name"),
        ({"python_files": {"sitecustomize": "x.py"}}, "module's file name"),
        ({"python_files": {"sitecustomize.py": ""}}, "the file to install"),
        ({"python_files": ["sitecustomize.py"]}, "must be a mapping"),
        ({"python_packages": "qwen-vl-utils"}, "a list of pip requirements"),
        ({"python_packages": ["--index-url=http://x"]}, "never a pip option"),
        ({"python_packages": ["qwen-vl-utils ~= 0.0"]}, "a pip requirement"),
        ({"python_packages": [""]}, "a pip requirement"),
        ({"ray_env": {"OMP_NUM_THREADS": "1"}}, "Ray's own variables"),
    ],
)
def test_bad_python_entries_are_refused(extra: dict, message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        vllm_serve_config({"model": "/m", **extra}, LAUNCH)


def test_files_are_kept_under_their_digest_and_mounted_read_only_by_name() -> None:
    first = vllm_python_files(
        {"sitecustomize.py": "print('a')\n"}, "/etc/llmfleet/vllm/python", "/usr/lib/python3.12"
    )
    assert len(first) == 1
    entry = first[0]
    assert entry["name"] == "sitecustomize.py" and entry["content"] == "print('a')\n"
    assert entry["target"] == "/usr/lib/python3.12/sitecustomize.py"
    assert entry["path"].startswith("/etc/llmfleet/vllm/python/sitecustomize-")
    assert entry["mount"] == f"{entry['path']}:/usr/lib/python3.12/sitecustomize.py:ro"
    again = vllm_python_files(
        {"sitecustomize.py": "print('a')\n"}, "/etc/llmfleet/vllm/python", "/usr/lib/python3.12"
    )
    changed = vllm_python_files(
        {"sitecustomize.py": "print('b')\n"}, "/etc/llmfleet/vllm/python", "/usr/lib/python3.12"
    )
    assert again == first
    assert changed[0]["mount"] != entry["mount"], "new content must change the container's spec"
    assert vllm_python_files({}, "/h", "/c") == []
    with pytest.raises(AnsibleFilterError):
        vllm_python_files({"../x.py": "y"}, "/h", "/c")


def test_package_names_drop_the_versions() -> None:
    assert python_package_names(["qwen-vl-utils==0.0.14", "fastsafetensors", "a_b>=1.2"]) == [
        "qwen-vl-utils",
        "fastsafetensors",
        "a_b",
    ]


@pytest.mark.parametrize(
    ("report", "problems"),
    [
        ('{"qwen-vl-utils": "0.0.14", "fastsafetensors": "0.1.15"}', []),
        ('{"qwen_vl_utils": "0.0.14", "fastsafetensors": "0.1.15"}', []),
        (
            '{"qwen-vl-utils": null, "fastsafetensors": "0.1.15"}',
            ["image X lacks qwen-vl-utils (the profile requires qwen-vl-utils==0.0.14)"],
        ),
        (
            '{"qwen-vl-utils": "0.0.11", "fastsafetensors": null}',
            [
                "image X has qwen-vl-utils 0.0.11; the profile requires qwen-vl-utils==0.0.14",
                "image X lacks fastsafetensors (the profile requires fastsafetensors)",
            ],
        ),
        ("", ["image X: its Python did not say which packages it has (no python3 there?)"]),
        (
            "Traceback ...",
            ["image X: its Python did not say which packages it has (no python3 there?)"],
        ),
    ],
)
def test_package_problems_name_what_is_missing(report: str, problems: list[str]) -> None:
    assert (
        python_package_problems(report, ["qwen-vl-utils==0.0.14", "fastsafetensors"], "image X")
        == problems
    )


@pytest.mark.parametrize(
    ("requirement", "installed", "fits"),
    [
        ("a>=1.2", "1.10", True),
        ("a>=1.10", "1.9", False),
        ("a<=2", "2.0.0", True),
        ("a==1.0", "1", True),
        ("a==0.0.14", "0.0.14+local", True),
    ],
)
def test_versions_compare_as_numbers(requirement: str, installed: str, fits: bool) -> None:
    assert (python_package_problems({"a": installed}, [requirement], "venv") == []) is fits


def test_filters_are_registered() -> None:
    filters = FilterModule().filters()
    assert filters["vllm_python_files"] is vllm_python_files
    assert filters["python_package_problems"] is python_package_problems
    assert filters["python_package_names"] is python_package_names
