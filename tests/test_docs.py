"""Every command in the docs runs (issue 27): the ```bash blocks of README.md and docs/**/*.md.

The convention these tests hold the docs to (docs/contributing.md is its place for contributors):

- A ```bash block holds runnable commands only: one command per line, ``\\`` continuations
  allowed, a ``# comment`` allowed at the end of a line (whole-line comments too). Synopsis forms
  with placeholders (``[--json OUT]``, ``FILE.py|MODULE``) go in ```text blocks; every fence names
  its language (``test_every_fence_names_its_language``).
- A command that can only run elsewhere ends with exactly one of ``# needs: gpu``,
  ``# needs: network``, ``# needs: device-machine``; the run tier skips it and says why.
- A command expected to exit with a status other than 0 ends with ``# exits N``.
- The commands of one block run in order in one folder, sharing a tuning DB: a command may read
  what an earlier one of its block wrote (``-o``, ``--json``, ``db export``).

Two tiers, one test each per command (id ``file:line``):

- **parse** (always, fast): a ``warpsmith ...`` command is parsed by the real click CLI without
  running it (the subcommand chain resolved as click does, so an unknown option or subcommand, a
  wrong argument count, a bad choice or a missing input file fails); a ``tune`` command's op,
  shape, dtype, attributes and target are also checked against the op registry. A path a
  positional argument names must exist (or be written by an earlier command of its block), and a
  module name must be importable. ``python -m pytest PATHS`` checks that the paths exist;
  ``python SCRIPT.py`` and ``bash SCRIPT.sh`` check that the script exists and, for a Python script
  with an argparse or click ``--help``, that every option shown is one it accepts; ``python -m
  warpsmith.X`` checks that the module imports and its ``--help`` lists every option shown.
- **run** (marker ``docs``; skipped unless pytest is given ``--run-docs``): the command runs for
  real in a subprocess (``bash -c``, timeout ``RUN_TIMEOUT_S``) in a temporary folder holding
  symlinks to the repo's ``tests``, ``src``, ``scripts`` and ``benchmarks`` (so relative repo
  paths resolve and outputs land in the folder), with ``WARPSMITH_DB`` and
  ``WARPSMITH_FACTS_DIR`` pointed into it, and must exit 0 (or its ``# exits N``). The commands
  of one block share the folder and run in order; selected alone (``-k``, a node id), a command first runs the
  earlier commands of its block it reads from: those naming a file it names that the repo lacks
  (an output), and for ``warpsmith db ...`` the ``tune`` and ``db import`` commands before it.

Two commands are never run by the run tier, only parsed: ``./scripts/install.sh`` (it installs
into the active environment; of ``./scripts/install.sh && CMD`` only CMD runs, and
tests/test_install.py tests the script) and ``python -m pytest ...`` (the suite, or part of it,
would run inside itself; the parse tier checks its paths).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = "README.md"  # the front page, relative to ROOT
DOC_FILES = [ROOT / README, *sorted((ROOT / "docs").rglob("*.md"))]
LINKED = ("tests", "src", "scripts", "benchmarks")  # symlinked into each command's folder
RUN_TIMEOUT_S = 1800  # per command; the longest, `warpsmith gpucheck --target h200`, took 853 s here
NEEDS = {
    "gpu": "needs a CUDA or ROCm device",
    "network": "needs the network, which the tests do not use",
    "device-machine": "runs on the device machine (the device tool), not here",
}
PATH_SUFFIXES = {".py", ".json", ".jsonl", ".md", ".sh", ".db", ".txt", ".csv", ".png"}
PYTHONS = ("python", "python3")


@dataclass(frozen=True)
class Command:
    file: str  # relative to ROOT
    line: int  # of the command's first line
    block: int  # line of the block's opening fence
    index: int  # position in its block
    text: str  # the command, continuations joined, without its comment
    comment: str
    needs: str | None
    exits: int
    parts: tuple[tuple[str, ...], ...] = field(default=())  # argv of each `&&`-joined part

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def _split_comment(line: str) -> tuple[str, str]:
    """``(code, comment)``: the comment starts at a ``#`` that begins a word outside quotes."""
    quote, escaped = None, False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def _annotations(comment: str, where: str) -> tuple[str | None, int]:
    """The ``needs: X`` or ``exits N`` that ends a comment (its last ``#`` segment)."""
    last = comment.rsplit("#", 1)[-1].strip()
    if m := re.fullmatch(r"needs:\s*(\S+)", last):
        if m[1] not in NEEDS:
            raise ValueError(f"{where}: unknown `# needs: {m[1]}` (one of {', '.join(NEEDS)})")
        return m[1], 0
    if m := re.fullmatch(r"exits\s+(\d+)", last):
        return None, int(m[1])
    return None, 0


def _fences(path: Path):
    """``(language, fence line, [(line number, text), ...])`` of each fenced block of a Markdown file."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"\s*(`{3,}|~{3,})\s*(\S*)", lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start, body = m[1], m[2], i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append((i + 1, lines[i]))
            i += 1
        yield lang, start, body
        i += 1


def _parts(text: str, where: str) -> tuple[tuple[str, ...], ...]:
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    tokens = list(lex)
    extra = [t for t in tokens if t and set(t) <= set("();<>|&") and t != "&&"]
    if extra:
        raise ValueError(f"{where}: `{extra[0]}` in a ```bash command: one command per line (`&&` only); "
                         "a synopsis goes in a ```text block")
    parts, cur = [], []
    for t in tokens:
        if t == "&&":
            parts.append(tuple(cur))
            cur = []
        else:
            cur.append(t)
    parts.append(tuple(cur))
    if any(not p for p in parts):
        raise ValueError(f"{where}: an empty command around `&&`")
    return tuple(parts)


def extract(path: Path, errors: list[str]) -> list[Command]:
    """The commands of the ```bash blocks of one Markdown file; what breaks the convention goes to ``errors``."""
    rel = str(path.relative_to(ROOT))
    found = []
    for lang, start, body in _fences(path):
        if lang != "bash":
            continue
        index, pending = 0, None  # pending: (first line, text so far) of a `\`-continued command
        for number, raw in body:
            code, comment = _split_comment(raw)
            if pending is None and not code.strip():
                continue  # blank line or whole-line comment
            if code.endswith("\\") and not comment:
                first, text = pending or (number, "")
                pending = (first, text + code[:-1].strip() + " ")
                continue
            first, text = pending or (number, "")
            pending = None
            text = (text + code.strip()).strip()
            where = f"{rel}:{first}"
            try:
                needs, exits = _annotations(comment, where)
                found.append(Command(rel, first, start, index, text, comment, needs, exits, _parts(text, where)))
            except ValueError as e:
                errors.append(str(e))
                continue
            index += 1
        if pending is not None:
            errors.append(f"{rel}:{pending[0]}: a `\\` continuation runs off the end of its block")
    return found


def _doc_files() -> list[Path]:
    return [p for p in DOC_FILES if p.exists()]


CONVENTION_ERRORS: list[str] = []
COMMANDS = [c for p in _doc_files() for c in extract(p, CONVENTION_ERRORS)]
BLOCKS: dict[tuple[str, int], list[Command]] = {}
for _c in COMMANDS:
    BLOCKS.setdefault((_c.file, _c.block), []).append(_c)


def _without_env(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` without its leading ``NAME=value`` environment assignments."""
    i = 0
    while i < len(argv) - 1 and re.fullmatch(r"[A-Za-z_]\w*=.*", argv[i]):
        i += 1
    return argv[i:]


def _kind(argv: tuple[str, ...]) -> str:
    argv = _without_env(argv)
    if argv[0] == "./scripts/install.sh" or argv[:2] == ("bash", "scripts/install.sh"):
        return "install"
    if argv[0] == "warpsmith":
        return "warpsmith"
    if argv[0] in PYTHONS and argv[1:3] == ("-m", "pytest"):
        return "pytest"
    if argv[0] in PYTHONS and len(argv) > 1 and argv[1].endswith(".py"):
        return "python-script"
    if argv[0] in PYTHONS and len(argv) > 2 and argv[1] == "-m" and argv[2].startswith("warpsmith."):
        return "python-module"
    if (argv[0] == "bash" and len(argv) > 1 and argv[1].endswith(".sh")) or argv[0].endswith(".sh"):
        return "shell-script"
    return "unknown"


def _folder(tmp: Path) -> Path:
    """A folder to run a command in: the repo's top folders as symlinks, so relative paths resolve."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = tmp / name
        if not link.exists():
            link.symlink_to(ROOT / name, target_is_directory=True)
    return tmp


def _looks_like_path(value: str) -> bool:
    return "/" in value or Path(value).suffix in PATH_SUFFIXES


def _outputs(cmd: Command) -> set[str]:
    """Paths ``cmd`` names that the repo lacks: taken to be what it writes."""
    names = set()
    for argv in map(_without_env, cmd.parts):
        for tok in argv[1:]:
            value = tok.split("=", 1)[-1] if tok.startswith("-") else tok
            if value and not value.startswith("-") and _looks_like_path(value) and not (ROOT / value).exists():
                names.add(value)
    return names


def _written_earlier(cmd: Command) -> set[str]:
    """What earlier commands of ``cmd``'s block write."""
    return {name for other in BLOCKS[(cmd.file, cmd.block)][:cmd.index] for name in _outputs(other)}


def _prerequisites(cmd: Command) -> list[Command]:
    """The earlier commands of ``cmd``'s block it reads from: those writing a file it names, and for
    ``warpsmith db ...``, those writing the block's tuning DB (``tune``, ``db import``)."""
    reads = _outputs(cmd)
    reads_db = any(argv[:2] == ("warpsmith", "db") for argv in map(_without_env, cmd.parts))
    found = []
    for other in BLOCKS[(cmd.file, cmd.block)][:cmd.index]:
        writes_db = any(argv[:2] == ("warpsmith", "tune") or argv[:3] == ("warpsmith", "db", "import")
                        for argv in map(_without_env, other.parts))
        if reads & _outputs(other) or (reads_db and writes_db):
            found.append(other)
    return found


# ---------------------------------------------------------------------------------------- parse tier


def _parse_warpsmith(args: list[str]) -> click.Context:
    """The leaf context of ``warpsmith ARGS``, parsed as click would; nothing is invoked."""
    from warpsmith.cli.main import cli

    cmd, name, parent = cli, "warpsmith", None
    while True:
        ctx = cmd.make_context(name, list(args), parent=parent)
        if not isinstance(cmd, click.Group):
            return ctx
        protected = ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args  # click < 8.2
        rest = [*protected, *ctx.args]
        if not rest:
            raise click.UsageError("missing command", ctx)
        name, cmd, args = cmd.resolve_command(ctx, rest)
        parent = ctx


def _check_tune(params: dict) -> None:
    """The registry's own checks of what ``warpsmith tune`` builds before it searches."""
    from warpsmith.ops import get_op
    from warpsmith.targets import get_target

    spec = get_op(params["op"])
    shortcuts = {"bias": params.get("bias") or None, "activation": params.get("activation"),
                 "layout": params.get("layout"), "allow_tf32": params.get("allow_tf32") or None}
    attrs = {**{k: v for k, v in shortcuts.items() if v is not None}, **spec.parse_attrs(params.get("attr_items", ()))}
    spec.problem(params["shape"], params["dtype"], attrs)
    if params.get("target"):
        get_target(params["target"])


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _check_inputs(ctx: click.Context, written: set[str]) -> None:
    """A positional argument that names a path must exist; one that names a module must import."""
    for param in ctx.command.params:
        if not isinstance(param, click.Argument):
            continue
        values = ctx.params.get(param.name)
        for value in values if isinstance(values, (tuple, list)) else (values,):
            if not isinstance(value, (str, Path)) or str(value) == "-":
                continue
            value = str(value)
            if ctx.command.name == "export":  # `warpsmith db export OUT`: an output
                continue
            if _looks_like_path(value):
                assert Path(value).exists() or value in written, f"{value}: no such file in the repo"
            elif re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", value):
                assert _importable(value), f"{value}: no such module"


@functools.lru_cache(maxsize=None)
def _script_options(script: str) -> frozenset[str] | None:
    """The options a Python script's ``--help`` lists, or None where it has no argparse/click ``--help``."""
    source = (ROOT / script).read_text()
    if "argparse" not in source and "import click" not in source:
        return None
    r = subprocess.run([sys.executable, str(ROOT / script), "--help"], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, f"{script} --help exited {r.returncode}:\n{r.stderr[-2000:]}"
    return frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", r.stdout))


PYTEST_VALUE_OPTIONS = {"-k", "-m", "-p", "-o", "-c", "-W", "--durations", "--deselect", "--ignore", "--rootdir",
                        "--timeout", "--maxfail"}


def _parse_part(cmd: Command, argv: tuple[str, ...]) -> None:
    argv = _without_env(argv)
    kind = _kind(argv)
    if kind == "unknown":
        pytest.fail(f"{cmd.id}: `{argv[0]}` commands are not known to tests/test_docs.py: teach it to check "
                    "them, or put the line in a ```text block")
    if kind == "install":
        script = ROOT / "scripts/install.sh"
        assert script.is_file() and os.access(script, os.X_OK), "scripts/install.sh is missing or not executable"
    elif kind == "warpsmith":
        try:
            ctx = _parse_warpsmith(list(argv[1:]))
        except click.exceptions.Exit as e:  # --help, --version
            assert e.exit_code == 0
            return
        except click.ClickException as e:
            pytest.fail(f"{cmd.id}: `{cmd.text}` is refused by the CLI: {e.format_message()}")
        _check_inputs(ctx, _written_earlier(cmd))
        if ctx.command.name == "tune":
            try:
                _check_tune(ctx.params)
            except Exception as e:  # noqa: BLE001 - the registry's message is the finding
                pytest.fail(f"{cmd.id}: `{cmd.text}` is refused by the op registry: {e}")
    elif kind == "pytest":
        args = argv[3:]
        for i, arg in enumerate(args):
            if not arg.startswith("-") and (i == 0 or args[i - 1] not in PYTEST_VALUE_OPTIONS):
                assert (ROOT / arg.split("::")[0]).exists(), f"{arg}: no such test file"
    elif kind == "python-module":  # python -m warpsmith.X: importable, and its --help lists every option shown
        assert importlib.util.find_spec(argv[2]) is not None, f"{argv[2]}: no such module"
        r = subprocess.run([sys.executable, "-m", argv[2], "--help"], capture_output=True, text=True, timeout=300,
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        assert r.returncode == 0, f"python -m {argv[2]} --help exited {r.returncode}:\n{r.stderr[-2000:]}"
        known = frozenset(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", r.stdout))
        unknown = sorted({a.split("=", 1)[0] for a in argv[3:] if a.startswith("-") and a != "-"} - known)
        assert not unknown, f"python -m {argv[2]} does not accept {', '.join(unknown)} (see its --help)"
    else:
        script = argv[1] if argv[0] in PYTHONS or argv[0] == "bash" else argv[0]
        assert (ROOT / script).is_file(), f"{script}: no such script"
        if kind == "python-script" and (known := _script_options(script)) is not None:
            shown = {a.split("=", 1)[0] for a in argv[2:] if a.startswith("-") and a != "-"}
            unknown = sorted(shown - known)
            assert not unknown, f"{script} does not accept {', '.join(unknown)} (see its --help)"


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.id for c in COMMANDS])
def test_doc_command_parses(cmd: Command, tmp_path, monkeypatch) -> None:
    folder = _folder(tmp_path / "cwd")
    for name in _written_earlier(cmd):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith("/"):
            (folder / name).mkdir(exist_ok=True)
        else:
            (folder / name).touch()
    monkeypatch.chdir(folder)
    for argv in cmd.parts:
        _parse_part(cmd, argv)


# ------------------------------------------------------------------------------------------ run tier


@dataclass
class _BlockRun:
    folder: Path
    results: dict[int, str | None] = field(default_factory=dict)  # index -> None (passed) or why it failed


_RUNS: dict[tuple[str, int], _BlockRun] = {}


def _skip_reason(cmd: Command) -> str | None:
    if cmd.needs == "gpu":
        import torch

        return None if torch.cuda.is_available() else NEEDS["gpu"]
    if cmd.needs:
        return NEEDS[cmd.needs]
    if all(_kind(p) in ("install", "pytest") for p in cmd.parts):
        return "not run inside the test suite (install.sh, pytest): only parsed"
    return None


def _run(cmd: Command, folder: Path) -> str | None:
    """Run ``cmd`` in ``folder``; None if it exits as the doc says, else why not."""
    runnable = [p for p in cmd.parts if _kind(p) not in ("install", "pytest")]
    line = cmd.text if len(runnable) == len(cmd.parts) else " && ".join(shlex.join(p) for p in runnable)
    env = dict(os.environ)
    env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               WARPSMITH_DB=str(folder / "tuning.db"), WARPSMITH_FACTS_DIR=str(folder / "facts"),
               TRITON_INTERPRET="1")
    try:
        r = subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"`{line}` ran past {RUN_TIMEOUT_S} s"
    if r.returncode == cmd.exits:
        return None
    return (f"`{line}` exited {r.returncode}, the doc says {cmd.exits}\n--- stdout (end)\n{r.stdout[-3000:]}"
            f"\n--- stderr (end)\n{r.stderr[-3000:]}")


@pytest.mark.docs
@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.id for c in COMMANDS])
def test_doc_command_runs(cmd: Command, tmp_path_factory) -> None:
    if reason := _skip_reason(cmd):
        pytest.skip(reason)
    key = (cmd.file, cmd.block)
    if key not in _RUNS:
        _RUNS[key] = _BlockRun(_folder(tmp_path_factory.mktemp("doc")))
    block = _RUNS[key]
    for earlier in _prerequisites(cmd):
        if earlier.index not in block.results and _skip_reason(earlier) is None:
            block.results[earlier.index] = _run(earlier, block.folder)
        if block.results.get(earlier.index):
            pytest.fail(f"an earlier command of its block failed: {earlier.id}")
    block.results[cmd.index] = _run(cmd, block.folder)
    if block.results[cmd.index]:
        pytest.fail(block.results[cmd.index])


# ------------------------------------------------------------------------------------------- the docs


def test_every_fence_names_its_language() -> None:
    """A command block is ```bash (runnable) or ```text (a synopsis), chosen deliberately."""
    bare = [f"{p.relative_to(ROOT)}:{start}" for p in _doc_files() for lang, start, _ in _fences(p) if not lang]
    assert not bare, f"fences without a language: {', '.join(bare)}"


def test_bash_blocks_hold_commands_only() -> None:
    """No pipe, redirection or `;` in a ```bash block, no unknown `# needs:`, no dangling `\\`."""
    assert not CONVENTION_ERRORS, "\n".join(CONVENTION_ERRORS)


def test_the_docs_have_commands() -> None:
    assert (ROOT / README).exists()
    assert len(COMMANDS) >= 10, [c.id for c in COMMANDS]
