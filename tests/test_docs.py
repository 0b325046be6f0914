"""The documentation stays walkable: a short README with the two commands, a bounded benchmarks
page, the architecture page, and no dead link (file or #heading) between the pages."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The page without its fenced code blocks and code spans (links there are not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(page) -> list[str]:
    text = prose(page.read_text(encoding="utf-8"))
    return INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)


def anchors(page) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped (word characters, spaces and
    hyphens kept), spaces to hyphens; a repeated id gets -1, -2..."""
    seen: dict[str, int] = {}
    ids = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        ids.add(slug if n == 0 else f"{slug}-{n}")
    return ids


def dead_links(page) -> list[str]:
    """The relative links of a page whose file, or heading in that file, does not exist."""
    dead = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto: ... : not between pages
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            dead.append(f"{target} (no file {file.relative_to(REPO) if file.is_relative_to(REPO) else file})")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            dead.append(f"{target} (no heading #{anchor} in {file.relative_to(REPO)})")
    return dead


def test_readme_is_short_and_has_the_two_commands():
    readme = REPO / "README.md"
    assert readme.stat().st_size <= 8192, f"README.md is {readme.stat().st_size} bytes: move detail into docs/"
    text = readme.read_text(encoding="utf-8")
    assert "make demo" in text and "make test" in text


def test_benchmarks_page_is_bounded():
    page = REPO / "docs" / "benchmarks.md"
    assert page.stat().st_size <= 20480, (
        f"docs/benchmarks.md is {page.stat().st_size} bytes: runs are data "
        "(docs/bench/runs/*.json), not prose appended to the page"
    )


def test_architecture_page_exists():
    assert (REPO / "docs" / "architecture.md").is_file()


def test_readme_links_every_docs_page():
    linked = {(REPO / target.partition("#")[0]).resolve() for target in links(REPO / "README.md")}
    assert [p.name for p in PAGES[1:] if p.resolve() not in linked] == []


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_no_dead_link(page):
    assert dead_links(page) == []


def test_the_link_checker_sees_dead_links(tmp_path, monkeypatch):
    """The checker itself: files, headings and repeated headings, code left out."""
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "other.md").write_text("# Other page\n\n## Same\n\n## Same\n\n## `code` and (punctuation): ok!\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[a](other.md) [b](other.md#same-1) [c](other.md#code-and-punctuation-ok) "
        "[d](#page) [e](https://example.com/x.md) ![img](other.md)\n"
        "[f](missing.md) [g](other.md#same-2) [h](#nowhere)\n\n"
        "`[not a link](missing.md)`\n\n```\n[nor this](missing.md)\n```\n\n[ref]: other.md#other-page\n"
    )
    assert dead_links(page) == [
        "missing.md (no file missing.md)",
        "other.md#same-2 (no heading #same-2 in other.md)",
        "#nowhere (no heading #nowhere in page.md)",
    ]
