"""The documentation runs: docs/ builds with Sphinx (warnings are errors, so a broken internal link or
a page outside the table of contents fails), every code block of every page is executed, and README.md
and BENCHMARKS.md stay within their sizes.

A page's blocks run in document order in one process whose working directory is a scratch copy of the
source root (its entries linked), so paths read as they do from a checkout and files a page writes land
in the scratch directory: ```python blocks share one namespace, ```bash blocks run with `bash -euo
pipefail`. A ```text block is output or a listing and is not run. A block too heavy for the suite (a
wheel build, a CMake configure) carries the MyST comment `% docs-test: in FILE` on the line before it:
each command in it must then appear in FILE, a CI script or test that runs it (a command that only runs a script
of this tree, `bash tools/x.sh`, counts as present when FILE names that script). C++ and CMake code is not written
into pages: they include the files CI builds with `{literalinclude}`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
PAGES += [ROOT / "README.md", ROOT / "README-wheel.md"]
README_MAX = 10 * 1024
BENCHMARKS_MAX = 25 * 1024
_RUN = {"python", "bash"}
_NOT_CODE = {"text"}
# `% docs-test: ...` is a MyST comment; README.md, which GitHub renders, uses `<!-- docs-test: ... -->`.
_MARKER = re.compile(r"^(?:%\s*docs-test:\s*(.*)|<!--\s*docs-test:\s*(.*?)\s*-->)$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marker: str | None

    def where(self) -> str:
        return f"{_name(self.page)}:{self.line}"


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page (parsed as CommonMark by markdown-it, which MyST builds on), with the
    `docs-test:` comment before each, if any. An indented code block is refused: it has no language."""
    from markdown_it import MarkdownIt

    lines = page.read_text().splitlines()
    found = []
    for tok in MarkdownIt("commonmark").parse(page.read_text()):
        if tok.type == "code_block":
            raise AssertionError(f"{_name(page)}:{tok.map[0] + 1}: an indented code block; fence it as ```bash, "
                                 "```python or ```text so the docs test can run or skip it knowingly")
        if tok.type != "fence":
            continue
        first = tok.map[0]
        prev = next((lines[j].strip() for j in range(first - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(prev)
        lang = tok.info.split()[0] if tok.info.strip() else ""
        found.append(Block(page, first + 1, lang, tok.content, marker and (marker.group(1) or marker.group(2))))
    return found


def _shadow_root(tmp: Path) -> Path:
    """A scratch directory that reads as the source root: each top-level entry linked, nothing copied."""
    shadow = tmp / "src"
    shadow.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in {".git", ".venv"} and not entry.name.startswith(("cmake-out", "build")):
            (shadow / entry.name).symlink_to(entry)
    return shadow


# Runs one page's blocks in order: python blocks in one namespace, bash blocks as scripts.
_DRIVER = r"""
import json, subprocess, sys, traceback, types


def main():
    blocks = json.load(open(sys.argv[1]))
    # The blocks run as the __main__ module, as a script would: torch.export reads a forward's globals there.
    page = types.ModuleType("__main__")
    sys.modules["__main__"] = page
    for b in blocks:
        print(f"--- {b['where']} ({b['lang']})", flush=True)
        if b["lang"] == "python":
            try:
                exec(compile(b["code"], b["where"], "exec"), page.__dict__)
            except BaseException:
                traceback.print_exc()
                sys.exit(f"docs block failed: {b['where']}")
        elif subprocess.run(["bash", "-euo", "pipefail", "-c", b["code"]]).returncode:
            sys.exit(f"docs block failed: {b['where']}")
        sys.stdout.flush()


main()
"""


def _check_named(block: Block) -> None:
    """A `% docs-test: in FILE ...` block: each of its commands is in one of the named files."""
    names = block.marker.removeprefix("in").split()
    assert block.marker.startswith("in ") and names, (
        f"{block.where()}: say `% docs-test: in FILE`, not {block.marker!r}")
    texts = []
    for name in names:
        path = ROOT / name
        assert path.is_file(), f"{block.where()}: `% docs-test: in {name}` names no file of the tree"
        texts.append(" ".join(path.read_text().split()))
    for raw in block.code.splitlines():
        command = re.sub(r"\s+#.*$", "", raw).strip()
        if not command or command.startswith("#"):
            continue
        wanted = " ".join(command.split())
        # `bash tools/x.sh` alone: a test may run the script by its path, without this spelling.
        words = command.split()
        alone = len(words) <= 2 and (ROOT / words[-1]).is_file() and set(words[:-1]) <= {"bash", "sh"}
        scripts = [words[-1]] if alone else []
        ok = any(wanted in t for t in texts) or any(s in t for s in scripts for t in texts)
        assert ok, f"{block.where()}: `{command}` is in none of {names}; run it there or let the docs test run it"


def run_page(page: Path, tmp_path: Path) -> subprocess.CompletedProcess | None:
    """Checks the page's blocks and runs the runnable ones; None when it has none to run."""
    runnable = []
    for b in blocks(page):
        if b.lang.startswith("{"):
            assert b.lang in {"{literalinclude}", "{toctree}"}, (
                f"{b.where()}: directive {b.lang} in a ``` fence; use ::: fences")
            continue
        if b.lang in _NOT_CODE:
            continue
        assert b.lang in _RUN, (f"{b.where()}: a ```{b.lang} block; pages hold ```python, ```bash or ```text "
                                "blocks, and include C++ or CMake files that CI builds with {literalinclude}")
        assert not (b.lang == "bash" and re.search(r"\|\s*head\b", b.code)), (
            f"{b.where()}: `| head` closes the pipe early, so under pipefail the command before it may fail "
            "(SIGPIPE) or not, by timing; use `| sed -n 1,Np`, which reads all its input")
        if b.marker is not None:
            _check_named(b)
        else:
            runnable.append({"where": b.where(), "lang": b.lang, "code": b.code})
    if not runnable:
        return None
    shadow = _shadow_root(tmp_path)
    plan = tmp_path / "blocks.json"
    plan.write_text(json.dumps(runnable))
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    env = dict(os.environ)
    # The native build's executor_runner first: the venv's is a launcher for the one a full install holds.
    extra = [str(p) for p in [ROOT / "cmake-out"] if (p / "executor_runner").exists()]
    extra += [str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join(extra + [env.get("PATH", "")])
    return subprocess.run([sys.executable, str(driver), str(plan)], cwd=shadow, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_code_block_runs(page: Path, tmp_path: Path):
    proc = run_page(page, tmp_path)
    assert proc is None or proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


def test_docs_build_without_warnings(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS),
                           str(tmp_path / "html")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]


def test_readme_and_benchmarks_stay_short():
    assert (ROOT / "README.md").stat().st_size <= README_MAX, (
        "README.md is over 10 KB: move the detail into a docs page")
    assert (ROOT / "BENCHMARKS.md").stat().st_size <= BENCHMARKS_MAX, (
        "BENCHMARKS.md is over 25 KB: keep the current figures, history stays in git")


def test_the_checks_catch_a_stale_page(tmp_path: Path):
    """The block runner and the `in FILE` check fail on a wrong block, naming it."""
    page = tmp_path / "stale.md"
    page.write_text(textwrap.dedent("""\
        % docs-test: in .ci/run
        ```bash
        bash tools/run_tests.sh --no-such-flag-in-ci
        ```
        """))
    (b,) = blocks(page)
    with pytest.raises(AssertionError, match="is in none of"):
        _check_named(b)
    b.code = "bash tools/run_tests.sh -q\n"
    _check_named(b)
    page.write_text("```python\nimport torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return torch.relu(x)\ntorch.export.export(M(), (torch.ones(2),), strict=True)\n```\n\n"
                    "```python\nx = 2\n```\n\n```bash\ntest -d exir\n```\n\n```python\nassert x == 3, 'stale'\n```\n")
    proc = run_page(page, tmp_path)
    assert proc.returncode != 0 and "stale.md:17" in proc.stderr and "AssertionError: stale" in proc.stderr
    page.write_text("```python\nx = 3\n```\n\n```bash\ntest -d exir\n```\n\n```python\nassert x == 3\n```\n")
    (tmp_path / "again").mkdir()
    assert run_page(page, tmp_path / "again").returncode == 0
    page.write_text("```cpp\nint main() {}\n```\n")
    with pytest.raises(AssertionError, match="literalinclude"):
        run_page(page, tmp_path)
    indented = tmp_path / "indented.md"
    indented.write_text("Run this:\n\n    rm -rf build\n")
    with pytest.raises(AssertionError, match="indented code block"):
        blocks(indented)
