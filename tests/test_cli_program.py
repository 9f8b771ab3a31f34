"""The ``placer`` program as a whole (issue #31): ``--help`` and ``--version`` stay light,
and each command imports its own module of :mod:`placer.cli` alone."""
from __future__ import annotations

import subprocess
import sys

import pytest

from placer.cli import build_parser, main
from placer.cli.program import COMMANDS

HEAVY = ("ortools", "pandas", "matplotlib")
SHARED = {"placer.cli", "placer.cli.program", "placer.cli.options", "placer.cli.output"}


def imported_modules(*args: str) -> set[str]:
    """The modules ``python -X importtime`` reports for ``python ARGS``."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "cumulative" not in line
    }


def cli_modules_after(argv: list[str]) -> set[str]:
    """The modules of :mod:`placer.cli` loaded once ``main(argv)`` has run, in a fresh process
    (read from ``sys.modules``: ``-X importtime`` misses ``importlib.import_module``)."""
    code = (
        "import contextlib, io, sys\nfrom placer.cli import main\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({argv!r}) == 0\n"
        "print(' '.join(m for m in sys.modules if m.startswith('placer.cli')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


@pytest.fixture(scope="module")
def with_import_placer() -> set[str]:
    return imported_modules("-c", "import placer")


@pytest.mark.parametrize("option", ["--help", "--version"])
def test_help_and_version_add_no_heavy_module_and_no_command(option: str, with_import_placer: set[str]) -> None:
    modules = imported_modules("-m", "placer", option)
    added = modules - with_import_placer
    assert not heavy(added), heavy(added)
    assert cli_modules_after([option]) == SHARED


@pytest.mark.parametrize("option", ["--help", "--version"])
def test_help_and_version_load_neither_or_tools_pandas_nor_matplotlib(option: str, with_import_placer: set[str]) -> None:
    if heavy(with_import_placer):  # what `import placer` loads is issue #31 §4's part
        pytest.skip(f"import placer itself loads {', '.join(heavy(with_import_placer)[:3])}")
    assert not heavy(imported_modules("-m", "placer", option))


@pytest.mark.parametrize(("command", "module"), [
    (["check"], "place"), (["topo"], "topology"), (["import", "slurm"], "imports"), (["simulate"], "replay"),
    (["serve"], "serve"),
])
def test_a_command_imports_its_own_module_alone(command: list[str], module: str) -> None:
    assert cli_modules_after([*command, "--help"]) == SHARED | {f"placer.cli.{module}"}


def test_the_help_lists_every_command_as_the_whole_parser_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert capsys.readouterr().out == build_parser().format_help()
    assert [c.name for c in COMMANDS][:3] == ["place", "preempt", "check"]


def test_every_command_is_built_with_its_summary_and_a_handler() -> None:
    import argparse

    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(commands.choices) == [c.name for c in COMMANDS]
    summaries = {a.dest: a.help for a in commands._choices_actions}
    for command in COMMANDS:
        assert summaries[command.name] == command.summary
        built = commands.choices[command.name]
        if command.name == "import":  # a handler per source
            (sources,) = (a for a in built._actions if isinstance(a, argparse._SubParsersAction))
            assert all(callable(source.get_default("handler")) for source in sources.choices.values())
        else:
            assert callable(built.get_default("handler")), command.name

