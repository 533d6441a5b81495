"""The README and the documentation site: short README with the two commands first, reference
pages generated from the code and current, every command and option the docs name real, the
quickstart runnable, and the site built strictly and working in a headless browser
(navigation and search)."""

import functools
import http.server
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stackwars.cli import app
from stackwars.cli.reference import cli_markdown, notebook_markdown, commands, options, results_pages, workloads_markdown

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


def _blocks(text: str) -> list[str]:
    return FENCE.findall(text)


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    main_job, tests = (b.strip() for b in _blocks(text)[:2])
    assert main_job.startswith("./scripts/setup.sh && { .venv/bin/stackwars peaks; .venv/bin/stackwars run ")
    assert tests == "./scripts/setup.sh --tests && .venv/bin/python -m pytest -q -n 3 --dist loadfile"
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith(tests)  # CI runs exactly that


def test_the_generated_reference_pages_are_current():
    """They are generated from the typer app and the registry; a command, option or workload
    changed without `python scripts/gen-docs.py` fails here."""
    assert (DOCS / "reference" / "cli.md").read_text() == cli_markdown()
    assert (DOCS / "reference" / "workloads.md").read_text() == workloads_markdown()
    # the tutorial notebook rendered with the outputs of its committed execution (test_notebook.py runs it)
    assert (DOCS / "tutorials" / "notebook.md").read_text() == notebook_markdown(DOCS / "tutorials" / "notebook.ipynb")


def test_the_results_pages_are_one_per_machine_and_current():
    """Generated from the fingerprints stored under results/: a result added without
    `python scripts/gen-docs.py` fails here, as does a page for a machine no result comes from."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen-docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    pages = results_pages(ROOT / "results")
    machines = {n for n in pages if n.startswith("machine-")}
    assert len(machines) >= 2  # the Intel Xeon and the AMD EPYC VMs
    assert {p.name for p in (DOCS / "results").glob("machine-*.md")} == machines
    for name, text in pages.items():
        assert (DOCS / "results" / name).read_text() == text, name
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert gen.nav_with(pages, mkdocs) == mkdocs
    # the AMD EPYC VMs of the earlier results (no CPU kind recorded) and the Zen 3 one of later ones
    epyc = pages["machine-amd-epyc-2-cpus-torch-2-13-0-cpu-jax-0-10-2.md"]
    zen3 = next(pages[n] for n in machines if "epyc-family-25-model-1-avx2" in n)
    assert "harness-cost-cpu/user-model-prepare/" in zen3 and "user-model-prepare" not in epyc
    assert "| `verdict-cpu/main-job-verdict.json` | mha · small · train-step · cpu · float32 |" in epyc
    # a subfolder with its own fingerprint is filed under its own machine, not its parent folder's
    intel = next(pages[n] for n in machines if "xeon" in n)
    assert "main-job-2026-11-25/verdict-after.json" in epyc and "main-job-2026-11-25" not in intel
    assert "`results/harness-cost-cpu/forkserver/`" in epyc


def test_the_cli_reference_lists_every_command_and_option_that_help_shows():
    page = (DOCS / "reference" / "cli.md").read_text()
    runner = CliRunner()
    seen = 0
    for path, cmd in commands():
        section = page.split(f"## `{path}`\n", 1)
        assert len(section) == 2, f"{path} has no section in the CLI reference"
        section = section[1].split("\n## ", 1)[0]
        shown = runner.invoke(app, [*path.split()[1:], "--help"], env={"COLUMNS": "250"}).output
        for opt in options(cmd):
            if opt == "--help":
                continue
            assert opt in shown, (path, opt)  # --help shows it...
            assert f"`{opt}`" in section, (path, opt)  # ...and so does the reference
            seen += 1
    assert seen > 100


def _invocations(text: str):
    """(command path, options) of every `stackwars ...` written in code (blocks and inline)."""
    code = _blocks(text) + re.findall(r"`([^`\n]+)`", FENCE.sub("", text))
    for chunk in code:
        for line in chunk.splitlines():
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError:
                tokens = line.split()
            for i, tok in enumerate(tokens):
                if not (tok == "stackwars" or tok.endswith("/stackwars")):
                    continue
                rest = []
                for t in tokens[i + 1:]:
                    if t in ("|", ">", ">>", "&&", "||", "}", ";") or t.endswith(";"):
                        break
                    rest.append(t)
                yield line, rest


def test_every_command_and_option_the_docs_name_exists():
    known = {path: set(options(cmd)) for path, cmd in commands()}
    groups = {p.rsplit(" ", 1)[0] for p in known if p.count(" ") > 1}
    checked, problems = 0, []
    for page in _pages():
        for line, rest in _invocations(page.read_text()):
            if not rest or rest[0].startswith("-"):
                if rest and rest[0] not in ("--version", "--help"):
                    problems.append(f"{page.name}: {line}: stackwars {rest[0]}")
                continue
            if rest[0].isupper() or rest[0] in ("...", "COMMAND"):
                continue  # a placeholder
            path = f"stackwars {rest[0]}"
            words = rest[1:]
            if path in groups:
                if not words or words[0].isupper():
                    continue
                path, words = f"{path} {words[0]}", words[1:]
            if path not in known:
                problems.append(f"{page.name}: {line}: no command {path!r}")
                continue
            for w in words:
                if w.startswith("-") and not re.match(r"^-\d", w) and w != "-":
                    if w.split("=", 1)[0] not in known[path]:
                        problems.append(f"{page.name}: {line}: {path} has no option {w.split('=', 1)[0]}")
            checked += 1
    assert not problems, "\n".join(problems)
    assert checked > 50


def test_the_quickstart_runs_as_written_in_a_new_shell(tmp_path):
    """The README's three-command quickstart, exactly as written, each line in a new shell
    (bash with no profile, a PATH without the venv, no STACKWARS_* setting) after the setup
    command: run from a folder that holds the setup's `.venv` (a link to this checkout's), so
    what it writes lands there."""
    block = next(b for b in _blocks(README.read_text()) if "stackwars run" in b and "setup.sh" not in b)
    assert block.startswith(".venv/bin/stackwars run"), block  # bare `stackwars` is not on PATH after setup
    venv = ROOT / ".venv"
    if not (venv / "bin" / "stackwars").exists():
        pytest.fail(f"{venv}/bin/stackwars is missing: run the README's setup command first")
    (tmp_path / ".venv").symlink_to(venv)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           **({"TMPDIR": os.environ["TMPDIR"]} if "TMPDIR" in os.environ else {})}
    for line in block.strip().splitlines():
        done = subprocess.run(["bash", "--noprofile", "--norc", "-c", line], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    assert (tmp_path / "stackwars.db").is_file()
    assert (tmp_path / "report" / "report.html").is_file() and (tmp_path / "report" / "report.md").is_file()


def _mkdocs() -> None:
    try:
        import mkdocs  # noqa: F401
        import material  # noqa: F401
    except ImportError:
        if os.environ.get("STACKWARS_REQUIRE_DOCS") == "1":
            pytest.fail("mkdocs-material is not installed, and this run requires it (the docs extra: "
                        "./scripts/setup.sh --tests installs it)")
        pytest.skip("mkdocs-material is not installed (the docs extra); ./scripts/setup.sh --tests installs it")


def test_the_site_builds_strictly_and_navigation_and_search_work_in_a_browser(tmp_path):
    _mkdocs()
    from tests.browser import Browser
    from tests.test_report_browser import _browser

    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (site / "search" / "search_index.json").is_file()
    # the Python API's reference, generated from its docstrings (mkdocstrings), and the notebook, rendered
    api = (site / "reference" / "python" / "index.html").read_text()
    for name in ("stackwars.api.run", "stackwars.api.verdict", "stackwars.api.Result", "stackwars.api.VerdictRow"):
        assert f'id="{name}"' in api, name
    assert "Measure <code>workloads</code> as <code>stackwars run</code> does" in api  # run's docstring
    notebook = (site / "tutorials" / "notebook" / "index.html").read_text()
    assert "class TorchMLP" in notebook and "stackwars-result" in notebook and "data:image/png;base64," in notebook
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    browser = Browser(_browser())
    try:
        browser.open(base)
        assert browser.js("document.title").startswith("stackwars")
        # navigation: every page of mkdocs.yml's nav is linked from the home page's sidebar
        pages = re.findall(r":\s*([\w/-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
        links = set(browser.js("[...document.querySelectorAll('nav.md-nav--primary a.md-nav__link')]"
                               ".map(a => a.getAttribute('href'))"))
        for page in pages:
            target = "." if page == "index.md" else page[:-3].removesuffix("index").rstrip("/") + "/"
            assert target in links, (page, sorted(links)[:10])
        # clicking one opens it
        browser.js("[...document.querySelectorAll('a.md-nav__link')].find(a => a.textContent.trim() === "
                   "'Command line').click()")
        browser.wait("document.title.startsWith('Command line') && document.readyState === 'complete' && "
                     "!!document.querySelector('.md-search__input')")
        assert browser.js("location.pathname") == "/reference/cli/"
        # search: typing a word lists the pages that have it
        browser.js("(() => { const i = document.querySelector('.md-search__input'); i.focus(); "
                   "i.value = 'verdict'; i.dispatchEvent(new Event('input', {bubbles: true})); "
                   "i.dispatchEvent(new KeyboardEvent('keyup', {key: 't', bubbles: true})); })()")
        found = browser.wait("document.querySelectorAll('.md-search-result__item').length")
        assert found >= 3
        hrefs = browser.js("[...document.querySelectorAll('.md-search-result__item a')].map(a => a.href)")
        assert any("/getting-started/verdict/" in h for h in hrefs), hrefs[:5]
    finally:
        browser.close()
        server.shutdown()


def test_no_page_states_a_rule_other_than_the_codes():
    """The thresholds, bounds and tolerances that decide are stated between markers that
    scripts/gen-docs.py rewrites from the code (stackwars/rules.py): a page that states
    another value, or a rule's value without its marker, fails here; so does the rules page
    when it is not what the code gives."""
    from stackwars import rules

    assert (DOCS / "reference" / "rules.md").read_text() == rules.page()
    assert "reference/rules.md" in (ROOT / "mkdocs.yml").read_text()
    found = {f"{page.relative_to(ROOT)}: {p}" for page in _pages() for p in rules.problems(page.read_text())}
    assert not found, "\n".join(sorted(found)) + "\n(run `python scripts/gen-docs.py`, or mark the value)"
    # the check itself: each way a page can drift is caught
    tie, noisy = rules.RULES["tie_threshold"].text, rules.RULES["noisy_bound"].text
    assert rules.problems(f"a CI holding 1 is a tie when it spans less than {noisy}.") != []  # unmarked
    assert rules.problems("the <!--rule:noisy_bound-->±10%<!--/rule--> bound") != []  # marked, but not the code's
    assert rules.problems("the tolerance is float32 2e-4 for micro-ops") != []
    assert rules.problems("took over 5% of the CPUs") != []
    assert rules.problems(f"within the <!--rule:tie_threshold-->{tie}<!--/rule--> tie threshold") == []
    # a program's output quoted (the notebook's page) says what the code printed; prose around it is read
    printed = "same speed: within ±10% by two one-sided tests"
    assert rules.problems(f"<!-- output -->\n{printed}\n<!-- /output -->") == []
    assert rules.problems(f"<!-- output -->\nok\n<!-- /output -->\n{printed}") != []
    assert rules.render("beyond the <!--rule:tie_threshold-->±9%<!--/rule--> band") == \
        f"beyond the <!--rule:tie_threshold-->{tie}<!--/rule--> band"


def test_the_cli_reference_says_what_is_optional():
    page = (DOCS / "reference" / "cli.md").read_text()
    for cmd in ("verdict", "report"):
        section = page.split(f"## `stackwars {cmd}`\n", 1)[1].split("\n## ", 1)[0]
        assert "Arguments: `RUN_IDS` (optional: none or more)" in section, section[:400]
    compare = page.split("## `stackwars compare`\n", 1)[1].split("\n## ", 1)[0]
    assert "`RUN_A` (required), `RUN_B` (required)" in compare
