"""The docs/ pages' marked example blocks print what the pages show (tests/readme_examples.py
runs their commands again, a page at a time): an output that drifted fails here, with the diff.
Regenerate with `python tests/readme_examples.py --write docs/PAGE.md` after a change that is meant."""

import pytest

from readme_examples import REPO, check, marked_blocks, pages

DOCS = [page for page in pages() if page.parent.name == "docs"]


def test_the_docs_show_checked_examples():
    assert len(DOCS) >= 15
    marked = sum(len(marked_blocks(page.read_text(encoding="utf-8").split("\n"))) for page in DOCS)
    assert marked >= 35


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_each_page_shows_what_its_commands_print(page, sample_db):
    differences = check(page, samples_db=sample_db)  # the session's database of sample_traces
    assert not differences, "\n".join(differences)
