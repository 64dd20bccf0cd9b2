"""Resource options for a component's children, the same way in every component.

Pulumi hands a component's provider down to its children through ``parent`` (a component
given ``provider=`` or ``providers=`` passes it to children of that package), but not its
``depends_on``: a child of a component that waits for X would start before X. So every
component builds its children's options here, and whatever the component waits for, its
children wait for too.
"""

from __future__ import annotations

from typing import Any, Sequence

import pulumi


def inherited_dependencies(opts: pulumi.ResourceOptions | None) -> list[Any]:
    """The component's own ``depends_on``, as a list (Pulumi accepts one resource or a list)."""
    deps = opts.depends_on if opts else None
    if deps is None:
        return []
    return [deps] if isinstance(deps, pulumi.Resource) else list(deps)


def child_options(parent: pulumi.Resource, opts: pulumi.ResourceOptions | None, *,
                  depends_on: Sequence[Any] = (), **options: Any) -> pulumi.ResourceOptions:
    """``parent=parent``; ``depends_on`` = the component's own plus ``depends_on``; any other option as given."""
    return pulumi.ResourceOptions(parent=parent, depends_on=inherited_dependencies(opts) + list(depends_on),
                                  **options)
