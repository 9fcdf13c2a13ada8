"""The README's marked example blocks print what the README shows (tests/readme_examples.py
runs their commands again): an output that drifted fails here, with the diff. Regenerate with
`python tests/readme_examples.py --write` after a change that is meant."""

from readme_examples import REPO, blocks, check


def test_the_readme_shows_what_its_commands_print(sample_db):
    readme = REPO / "README.md"
    assert len(blocks(readme.read_text(encoding="utf-8").split("\n"))) >= 5
    differences = check(readme, samples_db=sample_db)  # the session's database of sample_traces
    assert not differences, "\n".join(differences)


def test_a_drifted_block_is_found_and_rewritten(tmp_path, sample_db):
    page = tmp_path / "page.md"
    page.write_text("<!-- example -->\n```\n$ tracekit query --sql \"SELECT 41 + 1 AS answer\" -f csv\nanswer\n41\n```\n",
                    encoding="utf-8")
    assert any(line == "-41" for line in check(page, samples_db=sample_db))
    check(page, write=True, samples_db=sample_db)
    assert "answer\n42\n```" in page.read_text(encoding="utf-8")
    assert check(page, samples_db=sample_db) == []
