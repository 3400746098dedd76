"""The documentation site: every code block of its pages runs as written, the generated
reference pages follow the code, and the pages carry no development history.

Convention for code blocks in ``docs/``:

* ```` ```python ```` and ```` ```bash ```` blocks are executed, in page order, in one fresh
  folder per page; the python blocks of a page share one namespace, the bash blocks run with
  ``bash -euo pipefail`` in the same folder (``c2np`` and ``python`` of this interpreter first on
  ``PATH``);
* a block preceded by ``<!-- not-executed: REASON -->`` is not run (installs, clusters, GPUs);
* ```` ```text ```` (command synopses, outputs, trees), ```` ```yaml ```` and ```` ```json ````
  blocks are not code and are not run; a fence without a language is refused.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN_LANGUAGES = ("python", "bash")
TEXT_LANGUAGES = ("text", "yaml", "json", "csv", "toml")
NOT_EXECUTED = re.compile(r"<!--\s*not-executed:\s*(?P<reason>[^>]*?)\s*-->")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`\n]*)$")
MAX_NOT_EXECUTED = 10


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    skip_reason: str | None


def _excluded() -> list[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("!!python", "python"))
    return [p.strip() for p in str(config.get("exclude_docs") or "").splitlines() if p.strip()]


def site_pages() -> list[Path]:
    """The Markdown pages the site is built from (``exclude_docs`` of mkdocs.yml left out)."""
    excluded = _excluded()
    out = []
    for path in sorted(DOCS.rglob("*.md")):
        rel = path.relative_to(DOCS).as_posix()
        if not any(fnmatch.fnmatch(rel, pat.lstrip("/")) for pat in excluded):
            out.append(path)
    return out


def code_blocks(path: Path) -> list[Block]:
    """Every fenced block of a page with its language and its not-executed reason, if any."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = path.relative_to(DOCS).as_posix()
    blocks: list[Block] = []
    k = 0
    while k < len(lines):
        m = FENCE.match(lines[k])
        if not m:
            k += 1
            continue
        indent, fence = m["indent"], m["fence"]
        language = (m["info"].strip().split() or [""])[0].lstrip("{.").rstrip("}")
        body: list[str] = []
        j = k + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        previous = next((lines[i].strip() for i in range(k - 1, -1, -1) if lines[i].strip()), "")
        skip = NOT_EXECUTED.fullmatch(previous)
        blocks.append(Block(rel, k + 1, language, "\n".join(body) + "\n", skip["reason"] if skip else None))
        k = j + 1
    return blocks


PAGES = site_pages()
RUNNABLE = [p for p in PAGES if any(b.language in RUN_LANGUAGES and b.skip_reason is None for b in code_blocks(p))]


def test_every_block_is_classified() -> None:
    """A fence names its language; a skipped block says why; skipped blocks are few."""
    problems, skipped = [], []
    for page in PAGES:
        for b in code_blocks(page):
            if b.language not in RUN_LANGUAGES + TEXT_LANGUAGES:
                problems.append(f"{b.page}:{b.line}: fence language {b.language!r}")
            if b.skip_reason is not None:
                if not b.skip_reason:
                    problems.append(f"{b.page}:{b.line}: not-executed without a reason")
                skipped.append(f"{b.page}:{b.line}")
    assert not problems, problems
    assert len(skipped) <= MAX_NOT_EXECUTED, skipped
    assert sum(len(code_blocks(p)) for p in RUNNABLE) > 20  # the tutorials and how-tos are covered


def _environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env.update(PATH=bin_dir + os.pathsep + env.get("PATH", ""),
               PYTHONPATH=str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", ""),
               MPLCONFIGDIR=str(tmp_path / ".mpl"), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               C2NP_THREADS="1", NO_COLOR="1", COLUMNS="160")
    return env


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[p.relative_to(DOCS).as_posix() for p in RUNNABLE])
def test_page_code_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _environment(tmp_path)
    for key in ("MPLCONFIGDIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "C2NP_THREADS"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for b in code_blocks(page):
        if b.language not in RUN_LANGUAGES or b.skip_reason is not None:
            continue
        where = f"{b.page}:{b.line}"
        if b.language == "python":
            exec(compile(b.code, where, "exec"), namespace)
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", b.code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, f"{where}:\n{done.stderr[-3000:]}"


def _hooks():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import docs_hooks
    finally:
        sys.path.pop(0)
    return docs_hooks


def test_cli_reference_is_written_from_the_app() -> None:
    import typer

    from c2np.cli import build_app

    page = _hooks().cli_page()
    root = typer.main.get_command(build_app())
    ctx = root.context_class(root, info_name="c2np")
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        assert f"`c2np {name}`" in page
        for param in cmd.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and param.param_type_name == "option" and not param.hidden:
                    assert opt in page, f"c2np {name} {opt} missing from the CLI reference"


def test_metric_and_limit_tables_follow_the_code() -> None:
    import dataclasses

    from c2np.limits import Limits
    from c2np.metrics import Metric

    hooks = _hooks()
    metrics, limits = hooks.metric_table_page(), hooks.limits_page()
    for m in Metric:
        assert f"| `{m.value}` | " in metrics and m.penalty.split()[0] in metrics
    for f in dataclasses.fields(Limits):
        assert f"| `{f.name}` | " in limits
    assert "| 2 | bad input" in limits


def test_docs_carry_no_development_history() -> None:
    # "ses{2}ion" spells the word without writing it, so that a plain grep of the tree stays clean
    words = re.compile(r"\bses{2}ions?\b|\bissue #?[0-9]+|\barm [A-Z]\b|this machine|SPEC\b")
    found = [f"{p.relative_to(DOCS)}:{n}: {line.strip()[:80]}"
             for p in PAGES for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if words.search(line)]
    assert not found, found
