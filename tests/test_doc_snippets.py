"""The code in README.md, docs/quickstart.rst, docs/user_guide.rst, docs/faq.rst and
docs/install.rst runs as written.

Each document's blocks run in order in one namespace, as a reader pasting them into one Python
session would, in a temporary working directory, with matplotlib's Agg backend. Which blocks run:

* README.md: every fenced block opened with ```` ```python ```` (or ```` ```pycon ````);
* the ``.rst`` pages: every ``.. code-block:: python`` (or ``pycon``) directive. Literal blocks
  introduced by ``::`` and ``.. code-block:: bash`` / ``console`` / ``text`` are shown, never run
  (shell commands, or code that needs a Dask cluster).

A ``python`` block is executed; a ``pycon`` block (``>>>`` prompts) is a doctest: what it shows
is checked against what it prints, so a shown output is a real one.
"""

import doctest
import os
import pathlib
import re
import textwrap
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", "docs/quickstart.rst", "docs/user_guide.rst", "docs/faq.rst",
             "docs/install.rst"]
RUN = {"python", "pycon"}
SHOWN = {"", "bash", "console", "text", "none", "ini", "shell"}   # "": a bare ``` (layout trees)

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. code-block::[ \t]*(?P<lang>\S*)[ \t]*$", re.M)


def _rst_blocks(text):
    """(language, first line of code, code) for every ``.. code-block::`` of an rst text."""
    lines = text.splitlines()
    blocks = []
    for match in _DIRECTIVE.finditer(text):
        start = text.count("\n", 0, match.start()) + 1          # the line after the directive
        indent = len(match.group("indent"))
        body, i = [], start
        while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith(":")
                                  and not body):
            i += 1                                              # options and blank lines
        first = i + 1
        while i < len(lines):
            line = lines[i]
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            body.append(line)
            i += 1
        blocks.append((match.group("lang"), first, textwrap.dedent("\n".join(body)).strip()))
    return blocks


def _markdown_blocks(text):
    return [(m.group(1), text.count("\n", 0, m.start()) + 2, m.group(2).strip())
            for m in _FENCE.finditer(text)]


def extract_blocks(path):
    """(language, first line of code, code) of every code block of ``path``, in document order."""
    text = (ROOT / path).read_text()
    return _markdown_blocks(text) if path.endswith(".md") else _rst_blocks(text)


def _run_block(lang, line, code, namespace, path):
    name = f"{path}:{line}"
    if lang == "pycon":
        test = doctest.DocTestParser().get_doctest(code, namespace, name, path, line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        out = []
        runner.run(test, out=out.append, clear_globs=False)
        assert not runner.failures, f"block at {name} shows other output:\n" + "".join(out)
        namespace.update(test.globs)      # DocTest copies its globals: keep what the block defined
    else:
        exec(compile(code, name, "exec"), namespace)


@pytest.mark.parametrize("path", DOCUMENTS)
def test_every_code_block_has_a_known_language(path):
    blocks = extract_blocks(path)
    assert any(lang in RUN for lang, _, _ in blocks), f"{path} has no runnable block"
    unknown = [(lang, line) for lang, line, _ in blocks if lang not in RUN | SHOWN]
    assert not unknown, f"{path}: blocks in a language neither run nor known as shown: {unknown}"


def test_the_extractor_reads_directives_options_and_indentation():
    text = ("Intro::\n\n   not run\n\n.. code-block:: python\n   :caption: x\n\n   a = 1\n\n"
            "   b = a + 1\n\nText\n\n* item\n\n  .. code-block:: bash\n\n     make test\n")
    assert _rst_blocks(text) == [("python", 8, "a = 1\n\nb = a + 1"), ("bash", 18, "make test")]
    md = "x\n```python\na = 1\n```\n```bash\nmake\n```\n"
    assert _markdown_blocks(md) == [("python", 3, "a = 1"), ("bash", 6, "make")]


# a reader who runs a block as written sees no UserWarning from it (a quick start that fitted 30
# epochs with the default 20 draws warned that 15 were collected)
@pytest.mark.filterwarnings("error::UserWarning")
@pytest.mark.parametrize("path", DOCUMENTS)
def test_document_code_runs_as_written(path, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)          # figures a block saves land here
    namespace = {"__name__": "__main__"}
    start = time.perf_counter()
    try:
        for lang, line, code in extract_blocks(path):
            if lang in RUN:
                _run_block(lang, line, code, namespace, path)
    finally:
        plt.close("all")
    print(f"{path}: {time.perf_counter() - start:.1f} s")
    assert os.getcwd() == str(tmp_path)


def test_pycon_blocks_check_their_output_and_share_the_namespace():
    namespace = {}
    _run_block("pycon", 1, ">>> a = 2\n>>> a + 1\n3", namespace, "doc")
    _run_block("python", 4, "b = a * 2", namespace, "doc")
    assert namespace["b"] == 4
    with pytest.raises(AssertionError, match="shows other output"):
        _run_block("pycon", 6, ">>> b\n5", namespace, "doc")
