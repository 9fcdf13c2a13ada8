"""The README's marked example blocks print what the README shows (tests/readme_examples.py
runs their commands again): an output that drifted fails here, with the diff. Regenerate with
`python tests/readme_examples.py --write` after a change that is meant. The docs/ pages are
checked by tests/test_docs_examples.py (another file, so that another worker runs them)."""

import re

import pytest

from readme_examples import REPO, blocks, check, elided, fits, pages, unchecked_blocks

README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_shows_what_its_commands_print(sample_db):
    assert len(blocks(README.read_text(encoding="utf-8").split("\n"))) >= 12
    differences = check(README, samples_db=sample_db)  # the session's database of sample_traces
    assert not differences, "\n".join(differences)


def test_the_readme_s_three_step_figures_of_naive_are_the_tools(sample_db):
    """The sentence after the findings example: the replayed step, the traced one and the GPU's busy
    time in it, each as the tool prints it."""
    import tracekit

    text = README.read_text(encoding="utf-8")
    said = re.search(r"the (\S+) µs step \(\d+%\)[^`]*```\nThat step is the steady step replayed without the "
                     r"profiler's cost \(`tracekit whatif naive --apply no-profiler`: (\S+) µs traced, (\S+) without "
                     r"it\), and `summary`'s (\S+) µs", text)
    assert said, "the sentence after the findings example has changed: change this test with it"
    replayed, traced, unprofiled, busy = (float(x.replace(",", "")) for x in said.groups())
    assert unprofiled == replayed
    found = tracekit.findings(db=sample_db, trace="naive")
    assert f"of the {replayed:,.1f} µs step" in found[found["rule"] == "all_fixes"]["title"].iloc[0]
    replay = tracekit.whatif("naive", "no-profiler", db=sample_db)
    assert replay.mean("trace_us") == pytest.approx(traced, abs=0.05)
    assert replay.mean("fixed_us") == pytest.approx(unprofiled, abs=0.05)
    summary = tracekit.query("summary", db=sample_db)
    assert summary[summary["trace"] == "naive"]["gpu_us_per_step"].iloc[0] == pytest.approx(busy, abs=0.05)


def test_the_readme_is_the_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.split("\n")) < 400
    # the two commands, word for word (.ci/run runs the second)
    assert "pip install . && tracekit load sample_traces && tracekit query summary\n" in text
    test_command = "pip install torch==2.13.0 -e '.[test]' && python -m pytest -q -n 2 --dist loadfile"
    assert f"```\n{test_command}\n```" in text
    assert test_command in (REPO / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name if page.name != "README.md" else str(page.relative_to(REPO)))
def test_every_block_of_commands_is_checked_or_says_why_not(page):
    assert unchecked_blocks(page.read_text(encoding="utf-8").split("\n")) == []


def _slug(heading):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page):
    lines, fenced, anchors = page.read_text(encoding="utf-8").split("\n"), False, set()
    for line in lines:
        fenced = fenced != line.startswith("```")
        if not fenced and line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
    return anchors


def test_links_between_pages_are_relative_and_lead_somewhere():
    broken = []
    for page in pages() + [REPO / "docs" / "README.md"]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)  # code spans show markdown, they do not link
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            assert not path.startswith("/"), f"{page.name}: {target} is not relative"
            goal = (page.parent / path).resolve() if path else page
            if not goal.exists() or (anchor and goal.suffix == ".md" and anchor not in _anchors(goal)):
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken


def test_a_drifted_block_is_found_and_rewritten(tmp_path, sample_db):
    page = tmp_path / "page.md"
    page.write_text("<!-- example -->\n```\n$ tracekit query --sql \"SELECT 41 + 1 AS answer\" -f csv\nanswer\n41\n```\n",
                    encoding="utf-8")
    assert any(line == "-41" for line in check(page, samples_db=sample_db))
    check(page, write=True, samples_db=sample_db)
    assert "answer\n42\n```" in page.read_text(encoding="utf-8")
    assert check(page, samples_db=sample_db) == []


def test_what_may_vary_a_file_a_missing_module_and_an_elision(tmp_path, sample_db):
    page = tmp_path / "page.md"
    page.write_text(
        '<!-- example file="n.sql" -->\n```sql\nSELECT $n::INTEGER * 2 AS twice\n```\n\n'
        '<!-- example vary="[0-9]+ apples" -->\n```\n$ tracekit query n.sql -p n 21 -f csv && echo 3 apples\n'
        "twice\n42\n7 apples\n```\n\n"
        '<!-- example needs="no_such_module_here" -->\n```\n$ echo now\nthen\n```\n\n'
        "<!-- example -->\n```\n$ seq 1 9\n1\n...\n5\n...\n9\n```\n", encoding="utf-8")
    assert check(page, samples_db=sample_db) == []
    page.write_text(page.read_text(encoding="utf-8").replace("42", "43").replace("5\n", "10\n"), encoding="utf-8")
    differences = check(page, write=True, samples_db=sample_db)
    assert "-43" in differences and "+42" in differences and "-10" in differences
    text = page.read_text(encoding="utf-8")
    assert "twice\n42\n7 apples\n" in text  # what may vary keeps the page's text


def test_an_elision_stands_for_any_lines_and_keeps_its_shape():
    printed = [str(n) for n in range(1, 10)]
    assert fits(["1", "...", "9"], printed) and fits(["1", "...", "4", "5", "...", "9"], printed)
    assert fits(["...", "9"], printed) and fits(["1", "..."], ["1"])
    assert not fits(["1", "...", "0", "...", "9"], printed) and not fits(["1", "...", "1"], ["1"])
    assert elided(["a", "...", "z"], printed) == ["1", "...", "9"]
