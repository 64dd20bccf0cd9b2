"""Device plugins: NVIDIA's on the GPU groups whose AMI lacks it (AL2023 NVIDIA), and AWS's
EFA plugin on groups with EFA, so pods can request ``nvidia.com/gpu`` and ``vpc.amazonaws.com/efa``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from infra import k8s_objects
from infra.cluster.manifests import device_plugin_manifest, efa_device_plugin_manifest
from infra.component_options import child_options


@dataclass(frozen=True)
class DevicePluginsArgs:
    """nvidia_groups: GPU node groups whose AMI has no NVIDIA device plugin. efa_groups: groups with
    EFA. region: where the EFA plugin image is pulled from. The Kubernetes provider comes through ``opts``."""
    nvidia_groups: tuple[str, ...]
    efa_groups: tuple[str, ...]
    region: str


class DevicePlugins(pulumi.ComponentResource):
    def __init__(self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("eksbench:infra:DevicePlugins", name, None, opts)
        if args.nvidia_groups:
            k8s_objects.register(f"{name}-nvidia", device_plugin_manifest(list(args.nvidia_groups)),
                                 child_options(self, opts))
        if args.efa_groups:
            k8s_objects.register(f"{name}-efa", efa_device_plugin_manifest(list(args.efa_groups), region=args.region),
                                 child_options(self, opts))
        self.register_outputs({})
