"""Where the CLI finds the collection: a checkout, or the copy a wheel installs."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmfleet.paths import INSTALLED_COLLECTION, CollectionNotFound, collection_root


def make_collection(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "galaxy.yml").write_text("namespace: llmfleet\n")
    (path / "site.yml").write_text("[]\n")
    return path


def test_the_wheels_collection_is_found_next_to_the_package(tmp_path: Path) -> None:
    site_packages = tmp_path / "site-packages"
    package = site_packages / "llmfleet"
    package.mkdir(parents=True)
    installed = make_collection(site_packages / INSTALLED_COLLECTION)
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    found = collection_root(cwd=elsewhere, environ={}, package_dir=package)
    assert found == installed.resolve()


def test_a_checkout_around_the_current_directory_comes_first(tmp_path: Path) -> None:
    site_packages = tmp_path / "site-packages"
    package = site_packages / "llmfleet"
    package.mkdir(parents=True)
    make_collection(site_packages / INSTALLED_COLLECTION)
    checkout = make_collection(tmp_path / "checkout")
    assert collection_root(cwd=checkout, environ={}, package_dir=package) == checkout.resolve()


def test_nothing_found_says_what_was_tried(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "llmfleet"
    package.mkdir(parents=True)
    with pytest.raises(CollectionNotFound, match="install the llmfleet wheel") as info:
        collection_root(cwd=tmp_path, environ={}, package_dir=package)
    assert str(tmp_path / "site-packages" / INSTALLED_COLLECTION) in str(info.value)
