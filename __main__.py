"""eksbench's Pulumi program: one stack, one benchmark environment.

What the stack builds reads top to bottom in ``program/stack.py``; this file only hands it
the stack's config and turns a config error into Pulumi's one-message failure.
"""

import pulumi
from pulumi.runtime import config as runtime_config

from core.config.fields import ConfigError
from core.config.pulumi_config import decode_config
from program.stack import export_stack


def stack_config() -> dict[str, str]:
    """Every config key of the stack, as the CLI passed it.

    The Python SDK has no public call that lists all keys (``pulumi.Config`` reads one key
    at a time), and the program must see them all to reject unknown ones, so the runtime's
    config store is read here, in this one place.
    """
    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get({})}


def main() -> None:
    raw, region = decode_config(stack_config(), pulumi.get_project())
    try:
        export_stack(raw, project=pulumi.get_project(), stack=pulumi.get_stack(), region=region)
    except ConfigError as e:
        # RunError ends the program with the message alone, no traceback.
        raise pulumi.RunError(f"invalid stack config ({len(e.problems)} problem(s)):\n{e}") from None


main()
