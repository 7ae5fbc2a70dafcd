"""The documents hold together: a short README that links every document, links that land, each
document opening with what it covers, and no pointer to a source a clone does not have.

The recipes inside the documents are run by tests/test_readme.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from support.documents import DOCS, README, documents, generated, hand_written
from support.helpers import REPO

README_MAX_LINES = 200
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
# A source outside the repository: the design notes, the seeds, the upstream reference, a
# sibling directory, an issue number. A clone has none of them: say the rule itself instead.
OUTSIDE = re.compile(
    r"\bseeds?/|\bseed 0\d\d|\bDESIGN(\.md| §)|\breference §|\.\./shared|\bissues? #?\d+",
    re.I,
)


def where(path: Path) -> str:
    return str(path.relative_to(REPO))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_\[\]()]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text()
    return {slug(h) for h in HEADING.findall(text)} | set(ANCHOR.findall(text))


def test_the_readme_is_short_and_links_every_document() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    linked = set(LINK.findall(README.read_text()))
    missing = [where(doc) for doc in sorted(DOCS.glob("*.md")) if where(doc) not in linked]
    assert not missing, f"the README's table of documents misses {missing}"


def test_every_relative_link_lands_on_a_file_of_the_repository() -> None:
    broken = []
    for path in documents():
        for target in LINK.findall(path.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            file, _, fragment = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.is_relative_to(REPO) or not dest.exists():
                broken.append(f"{where(path)}: {target}")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{where(path)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_each_document_opens_with_what_it_covers() -> None:
    for path in hand_written():
        if path == README:
            continue
        title, blank, first, *_ = path.read_text().splitlines()
        assert title.startswith("# ") and not blank, f"{where(path)} starts with its title"
        assert first and not first.startswith(("#", "<!--", "```", "|", "-")), (
            f"{where(path)}: a paragraph saying what it covers comes right after the title"
        )


def test_every_path_the_architecture_names_exists() -> None:
    """The map stays true: a module it names that moves or goes fails here."""
    text = (DOCS / "architecture.md").read_text()
    named = set(re.findall(r"\b((?:app|tests|tools|bench|deploy)/[\w/.-]*\w)", text))
    missing = sorted(path for path in named if not (REPO / path).exists())
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def cites_outside(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if match := OUTSIDE.search(line):
                found.append(f"{where(path)}:{number}: {match.group(0)!r}")
    return found


def test_no_document_cites_a_source_outside_the_repository() -> None:
    found = cites_outside([*hand_written(), REPO / "bench" / "README.md"])
    assert not found, "\n".join(found)


def test_no_generated_document_cites_a_source_outside_the_repository() -> None:
    """Generated documents quote the code's docstrings: the fix is in the docstring."""
    found = cites_outside([path for path in documents() if generated(path)])
    assert not found, "\n".join(found)
