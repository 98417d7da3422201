"""The lab image recipe: digests, the Debian mirror and the forwarded pip settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from llmfleet_lab import image
from llmfleet_lab.errors import LabError


def test_digest_changes_with_content_and_names(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("one")
    (tmp_path / "b").write_text("two")
    files = [tmp_path / "a", tmp_path / "b"]
    first = image.digest_files(files, tmp_path)
    assert first == image.digest_files(list(reversed(files)), tmp_path)  # order-free
    (tmp_path / "b").write_text("three")
    assert image.digest_files(files, tmp_path) != first
    (tmp_path / "b").rename(tmp_path / "c")
    renamed = image.digest_files([tmp_path / "a", tmp_path / "c"], tmp_path)
    assert renamed not in (first, image.digest_files(files[:1], tmp_path))


def test_node_tag_covers_every_recipe_file() -> None:
    names = {p.relative_to(image.ASSETS_DIR).as_posix() for p in image.recipe_files()}
    assert {"Containerfile", "packages.txt", "requirements.txt", "make_tiny_model.py"} <= names
    assert "emulators/ib_write_bw" in names
    assert image.node_image_ref().startswith(f"{image.NODE_REPOSITORY}:")


DEB822 = """\
Types: deb
URIs: http://mirror.test/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.test/debian-security
Suites: bookworm-security
Components: main
"""


def test_mirror_from_deb822(tmp_path: Path) -> None:
    (tmp_path / "debian.sources").write_text(DEB822)
    mirror = image.debian_mirror(tmp_path, tmp_path / "missing.list")
    assert mirror == "http://mirror.test/debian"


def test_mirror_from_one_line_sources(tmp_path: Path) -> None:
    listing = tmp_path / "sources.list"
    listing.write_text("# comment\ndeb http://other.test/debian bookworm main\n")
    assert image.debian_mirror(tmp_path / "none", listing) == "http://other.test/debian"


def test_mirror_missing_says_what_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMFLEET_DEBIAN_MIRROR", raising=False)
    with pytest.raises(LabError) as caught:
        image.debian_mirror(tmp_path, tmp_path / "sources.list")
    assert "LLMFLEET_DEBIAN_MIRROR" in caught.value.hint


def test_pip_settings_forward_local_links_cert_and_proxy(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    cert = tmp_path / "bundle.crt"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    settings = image.pip_settings(
        {
            "PIP_FIND_LINKS": f"{wheels} https://remote.test/links",
            "PIP_CERT": str(cert),
            "https_proxy": "http://proxy.test:3128",
        }
    )
    assert settings.build_args["PIP_FIND_LINKS"] == str(wheels)
    assert f"{wheels}:{wheels}:ro" in settings.volumes
    assert settings.build_args["PIP_CERT"] == image.BUILD_CERT_PATH
    assert f"{cert}:{image.BUILD_CERT_PATH}:ro" in settings.volumes
    assert settings.build_args["HTTPS_PROXY"] == "http://proxy.test:3128"
