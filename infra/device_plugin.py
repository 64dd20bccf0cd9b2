"""The NVIDIA device plugin DaemonSet, on the GPU groups whose AMI lacks it (AL2023 NVIDIA)."""

from __future__ import annotations

import pulumi

from infra import k8s_objects
from infra.manifests import device_plugin_manifest


class NvidiaDevicePlugin(pulumi.ComponentResource):
    def __init__(self, name: str, *, node_groups: list[str], provider, depends_on: list,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:NvidiaDevicePlugin", name, None, opts)
        self.daemon_set = k8s_objects.register(
            f"{name}-ds", device_plugin_manifest(node_groups),
            pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on))
        self.register_outputs({})
