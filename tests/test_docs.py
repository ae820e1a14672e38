"""The pages a user reads: README.md, CHANGELOG.md and docs/*.md.

Three checks, run in CI with the rest (CPU only):

* every relative link resolves to a file of the tree, and a ``#anchor`` to a heading of
  that file (GitHub's slugs: lower case, punctuation dropped, spaces as hyphens);
* no line of the pages, of ``src/``, ``tests/`` or ``benchmarks/`` names the working
  sessions that produced it: the project names itself by dates, versions and commits
  (the words are built from pieces below, so this file does not match itself);
* every command of a fenced ``bash`` block either runs here and exits 0, or says why not
  with a ``# not run in CI: REASON`` comment, trailing the command or on a line of its
  own (which then covers every later command of its block). A page's commands run in
  order, as a reader types them, in one scratch folder that holds links to the checkout's ``src``, ``benchmarks``, ``constraints.txt``
  and ``pyproject.toml``, ``.venv`` pointing at the running interpreter's environment and
  ``../shared`` at the checkout's sibling ``shared`` folder, with that environment's
  ``bin`` first on ``PATH``; what it writes stays in the scratch folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    p
    for p in [ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")]
    if p.exists()
)
SCANNED_DIRS = ("src", "tests", "benchmarks", "docs")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}

_S = "st" + "op"
SESSION_WORDS = re.compile(rf"{_S} ?[0-9]{{2}}|this {_S}|the {'le' + 'ase'}", re.IGNORECASE)
MARKER = re.compile(r"#\s*not run in CI:\s*\S")
COMMAND_TIMEOUT_S = 120

_FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
_INLINE_CODE = re.compile(r"`[^`]*`")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """Numbered lines outside fenced code blocks."""
    out, fence = [], None
    for i, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            out.append((i, line))
    return out


def _slug(heading: str) -> str:
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    slugs: dict[str, int] = {}
    out = set()
    for _, line in _prose_lines(page.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = slugs.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        slugs[slug] = n + 1
    return out


def _links(page: Path) -> list[tuple[int, str]]:
    found = []
    for i, line in _prose_lines(page.read_text(encoding="utf-8")):
        line = _INLINE_CODE.sub("", line)
        for target in _LINK.findall(line):
            found.append((i, target))
        m = _REF_LINK.match(line)
        if m:
            found.append((i, m.group(1)))
    return found


def _broken_links(page: Path, root: Path = ROOT) -> list[str]:
    bad = []
    for line, target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # http:, https:, mailto: ...
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(root)}:{line}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{where} (no heading with that anchor)")
    return bad


def test_pages_exist():
    names = {p.name for p in PAGES}
    assert "README.md" in names
    assert len(PAGES) > 1, "docs/*.md holds the depth the README links to"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert _broken_links(page) == []


def test_link_checker_catches_a_broken_link_and_anchor(tmp_path):
    page = tmp_path / "p.md"
    (tmp_path / "other.md").write_text("# A heading, with `code`\n## `fast_p`: scores\n")
    page.write_text(
        "[ok](other.md#a-heading-with-code) [gone](missing.md) [bad](other.md#nope)\n"
        "[ok](other.md#fast_p-scores) `kernel[grid](...)` is code, not a link\n"
        "```bash\n[inside a fence](missing-too.md)\n```\n"
    )
    bad = _broken_links(page, root=tmp_path)
    assert [b.split(": ", 1)[1] for b in bad] == [
        "missing.md (no such file)",
        "other.md#nope (no heading with that anchor)",
    ]


def _scanned_files() -> list[Path]:
    files = list(PAGES)
    for top in SCANNED_DIRS:
        for dirpath, dirnames, filenames in os.walk(ROOT / top):
            dirnames[:] = [
                d for d in dirnames if d not in SKIPPED_DIRS and not d.endswith(".egg-info")
            ]
            files.extend(Path(dirpath) / f for f in filenames)
    return sorted(set(files))


def _session_word_hits(paths: list[Path]) -> list[str]:
    hits = []
    for path in paths:
        rel = path.relative_to(ROOT)
        if SESSION_WORDS.search(str(rel)):
            hits.append(f"{rel} (file name)")
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # images and other binary files
        for i, line in enumerate(text.splitlines(), 1):
            if SESSION_WORDS.search(line):
                hits.append(f"{rel}:{i}: {line.strip()[:120]}")
    return hits


def test_the_project_names_itself_by_dates_and_commits():
    hits = _session_word_hits(_scanned_files())
    assert hits == [], (
        "name a date (git log --date=short), a version or a commit instead:\n" + "\n".join(hits)
    )


def test_session_words_pattern():
    for text in (_S + " 31", _S.upper() + "33", "in this " + _S, "The " + "le" + "ase"):
        assert SESSION_WORDS.search(text), text
    for text in ("the stop event", "stop 5 s", "please", "nonstop", "the release"):
        assert not SESSION_WORDS.search(text), text


def _bash_commands(page: Path) -> list[tuple[int, str, bool]]:
    """(line, command, marked) for every command of the page's ``bash`` blocks."""
    commands, fence, block_marked, pending, start = [], None, False, [], 0
    for i, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence = (m.group(1), m.group(2).lower() in {"bash", "sh", "shell"})
                block_marked = False
            continue
        if m and m.group(1) == fence[0] and not m.group(2):
            fence = None
            continue
        if not fence[1]:
            continue
        stripped = line.strip()
        if not pending:
            if not stripped:
                continue
            if stripped.startswith("#"):
                block_marked = block_marked or bool(MARKER.match(stripped))
                continue
            start = i
        pending.append(line.rstrip())
        if stripped.endswith("\\"):
            continue
        text = "\n".join(pending)
        commands.append((start, text, block_marked or bool(MARKER.search(pending[-1]))))
        pending = []
    return commands


COMMANDS = {page: _bash_commands(page) for page in PAGES}
PAGES_WITH_COMMANDS = [page for page in PAGES if COMMANDS[page]]


def test_bash_blocks_are_found():
    assert any(text for _, text, _ in COMMANDS[ROOT / "README.md"])


def test_command_parser(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "```bash\n# a label\nopbench --help\nopbench run \\\n    --suite smoke"
        "   # not run in CI: slow\n```\n"
        "```python\nprint()\n```\n"
        "```bash\n# not run in CI: needs a GPU\nopbench run --device cuda\n```\n"
    )
    assert _bash_commands(page) == [
        (3, "opbench --help", False),
        (4, "opbench run \\\n    --suite smoke   # not run in CI: slow", True),
        (12, "opbench run --device cuda", True),
    ]


def _scratch(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    work.mkdir()
    for name in ("src", "benchmarks", "constraints.txt", "pyproject.toml"):
        (work / name).symlink_to(ROOT / name)
    (work / ".venv").symlink_to(Path(sys.prefix))
    shared = ROOT.parent / "shared"
    if shared.exists():
        (tmp_path / "shared").symlink_to(shared)
    else:
        # a clone without the shared data beside it (CI's fresh machine): a small trace in
        # its place, so the commands that read ../shared/traces, and those that read what
        # they wrote, still run as a reader types them
        traces = tmp_path / "shared" / "traces"
        traces.mkdir(parents=True)
        (traces / "tiny_training.txt").write_text(TINY_TRACE)
    return work


#: Stands in for ../shared/traces where the clone has no shared data beside it.
TINY_TRACE = """\
Operator: aten.relu.default
cnt: 4, ((T([64, 128], f16),), {})
cnt: 2, ((T([8, 3, 32, 32], f32),), {})
Operator: aten.add.Tensor
cnt: 3, ((T([64, 128], f16), T([64, 128], f16)), {})
cnt: 1, ((T([16, 16], f32), T([16], f32)), {})
"""


@pytest.mark.parametrize("page", PAGES_WITH_COMMANDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_bash_commands_run_or_say_why_not(page, tmp_path):
    """A page's unmarked commands, in order, in one scratch folder: as a reader types them."""
    work = _scratch(tmp_path)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("COLUMNS", "100")
    # where a command finds traces without --traces: the scratch's ../shared/traces
    env["OPBENCH_TRACES"] = str(tmp_path / "shared" / "traces")
    skipped = []
    for line, command, marked in COMMANDS[page]:
        where = f"{page.relative_to(ROOT)}:{line}"
        if marked:
            continue
        if ".venv/bin/" in command and not (Path(sys.prefix) / "bin" / "opbench").exists():
            skipped.append(f"{where}: the tests do not run from opbench's environment")
            continue
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
        )
        assert done.returncode == 0, (
            f"{where}: `{command}` exited {done.returncode} "
            f"(mark it `# not run in CI: REASON` if a CPU cannot run it cheaply)\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    if skipped:
        pytest.skip("; ".join(skipped))
