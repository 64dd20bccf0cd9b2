"""Device plugins: NVIDIA's on the GPU groups whose AMI lacks it (AL2023 NVIDIA), and AWS's
EFA plugin on groups with EFA, so pods can request ``nvidia.com/gpu`` and ``vpc.amazonaws.com/efa``.
"""

from __future__ import annotations

import pulumi

from infra import k8s_objects
from infra.cluster_manifests import device_plugin_manifest, efa_device_plugin_manifest


class DevicePlugins(pulumi.ComponentResource):
    def __init__(self, name: str, *, nvidia_groups: list[str], efa_groups: list[str], region: str, provider,
                 depends_on: list, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:DevicePlugins", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=depends_on)
        if nvidia_groups:
            k8s_objects.register(f"{name}-nvidia", device_plugin_manifest(nvidia_groups), k8s_opts)
        if efa_groups:
            k8s_objects.register(f"{name}-efa", efa_device_plugin_manifest(efa_groups, region=region), k8s_opts)
        self.register_outputs({})
