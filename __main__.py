"""eksbench's Pulumi program: one stack, one benchmark environment.

What the stack builds reads top to bottom in ``program/stack.py``; this file only hands it
the stack's config and turns a config error into Pulumi's one-message failure.
"""

import os

import pulumi
from pulumi.runtime import config as runtime_config

from core.config.fields import ConfigError
from core.config.overrides import Overrides, SetError
from core.config.pulumi_config import decode_config
from core.contract.names import ENV_OVERRIDES
from program.stack import export_stack


def stack_config() -> dict[str, str]:
    """Every config key of the stack, as the CLI passed it.

    The Python SDK has no public call that lists all keys (``pulumi.Config`` reads one key
    at a time), and the program must see them all to reject unknown ones, so the runtime's
    config store is read here, in this one place.
    """
    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get({})}


def main() -> None:
    # `eksbench run --set/--experiment` (core.config.overrides): the CLI passes its environment on to the program.
    overrides = Overrides.from_env(os.environ.get(ENV_OVERRIDES))
    try:
        raw, region = decode_config(overrides.apply(stack_config()), pulumi.get_project())
        export_stack(raw, project=pulumi.get_project(), stack=pulumi.get_stack(), region=region,
                     experiment=overrides.experiment)
    except SetError as e:
        raise pulumi.RunError(str(e)) from None
    except ConfigError as e:
        # RunError ends the program with the message alone, no traceback.
        problems = overrides.annotate(e.problems)
        raise pulumi.RunError(f"invalid stack config ({len(problems)} problem(s)):\n" + "\n".join(problems)) from None


main()
