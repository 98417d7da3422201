"""The documentation holds together: every relative link points at a file and heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *ROOT.glob("docs/*.md"),
        *ROOT.glob("roles/*/README.md"),
    ]
)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def prose(page: Path) -> str:
    """The page without its fenced code blocks (a link in code is not a link)."""
    return FENCE.sub("", page.read_text())


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set(HTML_ANCHOR.findall(page.read_text()))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(prose(page)):
        anchor = github_anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(prose(page))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def test_there_are_pages() -> None:
    assert ROOT / "README.md" in PAGES
    assert list(ROOT.glob("docs/*.md"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_and_anchors_that_exist(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT)}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert not broken, broken


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {
        (ROOT / target.partition("#")[0]).resolve() for target in relative_links(ROOT / "README.md")
    }
    orphans = [p.name for p in ROOT.glob("docs/*.md") if p.resolve() not in linked]
    assert not orphans, f"docs pages the README does not link: {orphans}"


def test_github_anchor_matches_githubs_rules() -> None:
    assert github_anchor("llmfleet — `llmfleet.cluster`") == "llmfleet--llmfleetcluster"
    assert github_anchor("Secrets and Ray") == "secrets-and-ray"
    assert github_anchor("What it does, per topology") == "what-it-does-per-topology"
