"""The minimal wheel's comment stripper: comments go, strings, lines, line endings and code stay."""

from __future__ import annotations

import sys
import tokenize

import pytest

from _packaging import same_code  # noqa: E402  (also puts the repository on sys.path)

from tools.packaging.comments import same_program, strip_comments, strip_file  # noqa: E402


def compiles_the_same(original: bytes, stripped: bytes) -> bool:
    return same_code(compile(original, "m.py", "exec"), compile(stripped, "m.py", "exec"))


def _check(source: str, expected: str) -> None:
    out = strip_comments(source.encode()).decode()
    assert out == expected
    assert out.count("\n") == source.count("\n")
    assert compiles_the_same(source.encode(), out.encode())
    assert same_program(source.encode(), out.encode())


def test_comment_after_code_goes_with_the_spaces_before_it():
    _check("x = 1  # one\ny = 2\t# two\n", "x = 1\ny = 2\n")


def test_a_comment_only_line_stays_as_an_empty_line():
    _check("def f():\n    # why\n    return 1\n\n# end of f\nz = f()\n", "def f():\n\n    return 1\n\n\nz = f()\n")


def test_hash_inside_strings_and_f_strings_is_not_a_comment():
    source = ('a = "# not a comment"  # a comment\n'
              "b = '#' + '''\n# in a triple-quoted string\n'''\n"
              'c = f"{a!r:#>10} #{b}"  # after an f-string\n'
              'd = f"""{a}\n# still the f-string {b}\n"""\n'
              "e = rb'#raw'\n")
    expected = ('a = "# not a comment"\n'
                "b = '#' + '''\n# in a triple-quoted string\n'''\n"
                'c = f"{a!r:#>10} #{b}"\n'
                'd = f"""{a}\n# still the f-string {b}\n"""\n'
                "e = rb'#raw'\n")
    _check(source, expected)


def test_docstrings_stay():
    source = 'def f():\n    """Says # what it does."""  # a comment\n    return 1\n'
    _check(source, 'def f():\n    """Says # what it does."""\n    return 1\n')


def test_line_continuations_and_brackets():
    source = ("total = (1 +  # first\n"
              "         2)  # second\n"
              "more = 1 + \\\n"
              "    2  # after a backslash continuation\n"
              "items = [\n"
              "    # a comment-only line inside brackets\n"
              "    1,\n"
              "]\n")
    expected = ("total = (1 +\n"
                "         2)\n"
                "more = 1 + \\\n"
                "    2\n"
                "items = [\n"
                "\n"
                "    1,\n"
                "]\n")
    _check(source, expected)


def test_a_file_ending_in_a_comment_without_a_newline():
    # The last line was only a comment and has no line ending: it becomes empty, so the file ends after line 1's "\n".
    _check("x = 1\n# the end", "x = 1\n")
    _check("x = 1  # the end", "x = 1")


def test_shebang_and_encoding_declaration_stay_other_first_lines_go():
    _check("#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n# other\nx = 1\n",
           "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\nx = 1\n")
    _check("# a licence line\n# vim: set fileencoding=utf-8 :\nx = 1\n", "\n# vim: set fileencoding=utf-8 :\nx = 1\n")
    # A shebang-looking comment after line 1 is only a comment.
    _check("x = 1\n#!not a shebang\n", "x = 1\n\n")


def test_line_endings_and_non_ascii_text_are_kept():
    source = "s = 'é #'  # café\r\nt = 2\r\n# ü\r\n".encode()
    out = strip_comments(source)
    assert out == "s = 'é #'\r\nt = 2\r\n\r\n".encode()
    latin = b"# -*- coding: latin-1 -*-\ns = '\xe9'  # \xe9t\xe9\n"
    assert strip_comments(latin) == b"# -*- coding: latin-1 -*-\ns = '\xe9'\n"
    assert compiles_the_same(latin, strip_comments(latin))


def test_the_checks_fail_on_a_wrong_transform():
    source = b'def f():\n    """Doc."""\n    # note\n    return "#x"  # c\n'
    right = strip_comments(source)
    assert compiles_the_same(source, right) and same_program(source, right)
    wrong = {
        "a line dropped": source.replace(b"    # note\n", b""),
        "a # inside a string cut": source.replace(b'"#x"  # c', b'""'),
        "the docstring dropped": source.replace(b'"""Doc."""', b"pass"),
        "a column moved": source.replace(b'return "#x"', b'return  "#x"'),
    }
    for what, text in wrong.items():
        if what != "a column moved" or sys.version_info >= (3, 11):  # code objects hold columns from 3.11
            assert not compiles_the_same(source, text), what
        assert not same_program(source, text), what


def test_strip_file_writes_a_new_file_and_refuses_bad_source(tmp_path):
    target = tmp_path / "m.py"
    target.write_bytes(b"x = 1  # c\n")
    link = tmp_path / "link.py"
    link.hardlink_to(target)
    strip_file(str(link))
    assert link.read_bytes() == b"x = 1\n" and target.read_bytes() == b"x = 1  # c\n"
    broken = tmp_path / "broken.py"
    broken.write_bytes(b"x = (1,  # c\n")
    with pytest.raises((SyntaxError, tokenize.TokenError, ValueError)):
        strip_file(str(broken))
    assert broken.read_bytes() == b"x = (1,  # c\n"


def test_private_docstrings_go_and_public_ones_stay():
    from tools.packaging.comments import strip_private_docstrings

    source = ('"""Module doc."""\n'
              "def public():\n    \"\"\"Kept: help() shows it.\"\"\"\n    return 1\n"
              "def _private(x):\n    \"\"\"Gone,\n    over two lines.\"\"\"\n    return x\n"
              "class _Hidden:\n    '''Gone.'''\n    def __init__(self):\n        \"\"\"Kept: a dunder.\"\"\"\n"
              "        self.a = 1\n    def _m(self):\n        \"\"\"Gone.\"\"\"\n        return 2\n"
              "def _only():\n    \"\"\"Kept: the body would be empty.\"\"\"\n"
              "def _shared():\n    \"\"\"Kept: code on its line.\"\"\"; return 3\n")
    out = strip_private_docstrings(source.encode()).decode()
    assert out.count("\n") == source.count("\n")
    for kept in ("Module doc.", "Kept: help() shows it.", "Kept: a dunder.", "Kept: the body would be empty.",
                 "Kept: code on its line."):
        assert kept in out, kept
    assert "Gone" not in out and "over two lines" not in out
    assert same_program(source.encode(), out.encode())
    namespace: dict = {}
    exec(compile(out, "m.py", "exec"), namespace)
    assert namespace["_private"](5) == 5 and namespace["_Hidden"]()._m() == 2 and namespace["_Hidden"].__doc__ is None
    # The check still refuses any other change: a public docstring dropped the same way is not the same program.
    public_gone = source.replace('    """Kept: help() shows it."""\n', "\n")
    assert not same_program(source.encode(), public_gone.encode())


def test_strip_file_drops_private_docstrings(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('def _f():\n    """Why."""  # note\n    return 1\n')
    strip_file(str(path))
    assert path.read_text() == "def _f():\n\n    return 1\n"
