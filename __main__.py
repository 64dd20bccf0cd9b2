"""eksbench's Pulumi program: one stack, one benchmark environment.

Reads the stack's config once, parses it into typed objects (every problem reported at
once, before any resource exists), builds the environment, exports its outputs.
"""

import pulumi
from pulumi.runtime import config as runtime_config

from bench.stack_files import decode_config
from program.stack import run
from spec.config import parse_stack_config
from spec.fields import ConfigError


def main() -> None:
    raw, region = decode_config({**runtime_config.get_config_env(), **runtime_config.CONFIG.get({})},
                                pulumi.get_project())
    try:
        cfg = parse_stack_config(raw, project=pulumi.get_project(), stack=pulumi.get_stack(), region=region)
        outputs = run(cfg)
    except ConfigError as e:
        # RunError ends the program with the message alone, no traceback.
        raise pulumi.RunError(f"invalid stack config ({len(e.problems)} problem(s)):\n" + str(e)) from None
    for key, value in outputs.items():
        pulumi.export(key, value)


main()
