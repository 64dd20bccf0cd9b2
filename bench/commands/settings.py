"""``--set KEY=VALUE``, the option ``run`` and ``plan`` share: a stack's config changed for one command only.

The key is a Pulumi config path (as ``pulumi config set --path`` reads it), the value YAML; both are read by
``program.stack_files.parse_setting`` and applied before the config is checked (``core.config.overrides``), so
a value set here is refused as one in the stack file would be. The stack file is never rewritten.
"""

from __future__ import annotations

import argparse

from core.config.overrides import Overrides

SET_HELP = ("change one key of the stack's config for this command (repeatable; the file is not changed): a Pulumi "
            "config path, as `pulumi config set --path` takes it, and a YAML value, e.g. --set experiments[0].nodes=2 "
            "--set local.steps=50")


def add_set_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)


def overrides_of(args: argparse.Namespace, experiment: str | None = None) -> Overrides:
    """The command's ``--set`` values, in order, and ``experiment`` (``bench.automation.overrides``, which the
    notebook's API calls too). Raises SetError (one line) for a malformed one."""
    from bench.automation import overrides

    return overrides(args.settings, experiment)
