"""Sphinx configuration of the documentation site: MyST Markdown pages, built with warnings as errors.

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

import pathlib

project = "executorch (from scratch)"
author = "the project's authors"
release = (pathlib.Path(__file__).resolve().parents[1] / "version.txt").read_text().strip()

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
# Headings become link targets ([text](page.md#a-heading)), so a renamed heading breaks the build.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
html_theme = "furo"
html_title = "executorch"
# Fenced blocks name their language; one Sphinx does not know is a warning, so an error here.
highlight_language = "none"
