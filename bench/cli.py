"""The eksbench command line: one module per subcommand in ``bench/commands/``, each with ``register(subparsers)``.

Heavy libraries (Pulumi's engine, boto3, torch) are imported inside the commands that
need them, so ``--help`` stays instant. ``eksbench`` (pyproject.toml) and ``python3 -m bench`` both end here;
the project folder and the results root are settled once, before a command runs (``bench.project``).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from bench.errors import fail
from core.contract.names import LOCAL_RESULTS_ROOT

COMMANDS = tuple(f"bench.commands.{name}" for name in
                 ("run", "plan", "observe", "report", "compare", "data", "prices", "audit", "cloud"))  # --help's order


class Terminated(KeyboardInterrupt):
    """SIGTERM outside a run's lifecycle (which handles its own signals): unwind, exit 143."""


class Version(argparse.Action):
    """``--version``: the git commit is looked up only when asked (``bench.version``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        from bench.version import version_text

        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eksbench", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Distributed training benchmarks on AWS EKS: one Pulumi stack (Pulumi.<stack>.yaml) per "
                    "experiment.",
        epilog=EXAMPLES)
    parser.add_argument("--version", action=Version, nargs=0,
                        help="show the version (and the commit of a git checkout)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


EXAMPLES = """examples:
  eksbench run dev --local          run the dev stack's experiments on this machine
  eksbench plan dev                 what `pulumi up -s dev` would build, its cost and build time
  eksbench run dev --max-cost 150   the whole AWS run: build, train, collect, tear down
  eksbench status dev               each run of the stack, how it ended, its throughput
  eksbench report results/dev       an HTML report of the stack's runs

`eksbench COMMAND --help` describes a command. Run from an eksbench checkout, or pass --project-dir."""


def settle_paths(args: argparse.Namespace) -> str | None:
    """Fill in ``project_dir`` (found when not given) and ``results_root`` (default ``<project>/results``);
    the one-line problem when a command needs a project and there is none."""
    from bench.project import NoProject, default_results_root, find_project_dir, given_results_root

    if getattr(args, "results_root", None) is not None:
        try:
            args.results_root = str(given_results_root(args.results_root))
        except ValueError as e:
            return str(e)
    if not hasattr(args, "project_dir") and getattr(args, "results_root", "") is not None:
        return None
    try:
        project = find_project_dir(getattr(args, "project_dir", None))
    except NoProject as e:
        if hasattr(args, "project_dir"):
            return str(e)
        args.results_root = LOCAL_RESULTS_ROOT  # compare without a project: ./results, as before
        return None
    if hasattr(args, "project_dir"):
        args.project_dir = str(project)
    if getattr(args, "results_root", "") is None:
        args.results_root = str(default_results_root(project))
    return None


def stack_path(args: argparse.Namespace, argv: list[str]) -> str | None:
    """The one-line problem when a command's stack argument is a path (a stack file's, or a folder of them): the
    same check for every command that takes a stack name (``bench.project.stack_path_problem``)."""
    from bench.project import stack_path_problem

    given = getattr(args, "stacks", None) or [getattr(args, "stack", None)]
    project = getattr(args, "project_dir", None) or "."
    return next((p for value in given if isinstance(value, str)
                 for p in [stack_path_problem(value, argv, project)] if p), None)


def _terminate(_signum, _frame) -> None:
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()  # imports every command's module, and what each imports at its top
    except ModuleNotFoundError as e:  # as a command's own import below: even --version needs these
        return _missing(e)
    given = sys.argv[1:] if argv is None else list(argv)
    if not given:  # bare `eksbench`: the help, as `pulumi` gives it
        parser.print_help()
        return 0
    args = parser.parse_args(given)
    if problem := settle_paths(args) or stack_path(args, given):
        return fail(problem)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args) or 0)
    except Terminated:
        print("terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except BrokenPipeError:  # the reader of the output went away (`eksbench status | head -1`): done, quietly
        from bench.progress import reader_gone

        reader_gone()
        return 0
    except ModuleNotFoundError as e:
        return _missing(e)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _missing(e: ModuleNotFoundError) -> int:
    """An environment set up by hand, without an install file's packages: one line naming the install. The
    install files are looked up beside ``bench/`` (``bench.version.CHECKOUT``, what ``program.stack_files.ROOT``
    is), through modules of the standard library alone: the package missing may be YAML's."""
    from bench.errors import missing_module
    from bench.version import CHECKOUT

    return fail(missing_module(e.name, CHECKOUT))
