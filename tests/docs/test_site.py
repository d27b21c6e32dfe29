"""The manual in docs/, built as the MkDocs site it is: ``mkdocs build
--strict`` fails on any warning (a link to a page or heading that does not
exist, a page left out of the nav, a reference mkdocstrings cannot
resolve), the API page documents the client's classes, and the site loads
nothing from the network. README stays a front page of a screen or two
whose links lead into pages that exist."""

import os
import re
import subprocess
import sys
from pathlib import Path

import nsqpy.client

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 150


def test_the_site_builds_strictly_with_the_client_api_and_nothing_from_the_network(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                            cwd=ROOT, capture_output=True, text=True, timeout=110,
                            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stderr[-4000:]

    api = (site / "reference" / "client" / "index.html").read_text()
    for name in ("Producer", "Consumer", *nsqpy.client.__all__):  # a new export needs its line in the page
        assert f'id="nsqpy.client.{name}"' in api, f"{name} is missing from docs/reference/client.md"
    assert 'id="nsqpy.client.Producer.publish"' in api and 'id="nsqpy.client.Consumer.stop"' in api

    remote = re.compile(r'<(?:link|script|img)\b[^>]*\b(?:href|src)="(?:https?:)?//', re.I)
    for page in site.rglob("*.html"):
        assert not remote.search(page.read_text()), f"{page.relative_to(site)} loads from the network"


def heading_anchors(markdown: str) -> set[str]:
    """The ids Python-Markdown's toc gives a page's headings (code blocks left out)."""
    text = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    anchors = set()
    for title in re.findall(r"^#{1,6} (.+?)\s*$", text, re.M):
        slug = re.sub(r"[^\w\s-]", "", title.replace("`", "")).strip().lower()
        anchors.add(re.sub(r"[-\s]+", "-", slug))
    return anchors


def test_readme_is_short_names_the_test_command_and_links_only_to_pages_that_exist():
    text = README.read_text()
    assert len(text.splitlines()) < MAX_README_LINES
    assert "make test" in text and "make run" in text  # .ci/run runs `make test`, as README says

    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [target for target in targets if not re.match(r"[a-z]+:", target)]
    assert local, "README links into the manual"
    for target in local:
        path, _, anchor = target.partition("#")
        assert path.startswith("docs/") and path.endswith(".md"), f"{target}: README links to docs pages only"
        page = ROOT / path
        assert page.is_file(), f"{target}: no such page"
        if anchor:
            assert anchor in heading_anchors(page.read_text()), f"{target}: no such heading"
