"""What a GPU group that Cluster Autoscaler sizes carries, as plain data: its node label and ASG tags.

Pure (no Pulumi): ``infra.cluster.node_group`` puts these on the group, ``infra.addons.autoscaler``
installs Cluster Autoscaler, and ``program.validation`` checks them before anything is built.

- **Accelerator label.** The device plugin advertises ``nvidia.com/gpu`` some time after a node joins;
  until then Cluster Autoscaler may scale out again for the same pods. A node labelled
  ``k8s.amazonaws.com/accelerator`` is known as a GPU node from the start (kubernetes/autoscaler
  cluster-autoscaler/cloudprovider/aws/README.md, "Special note on GPU instances").
- **Node-template tags.** Scaling up from 0 nodes, Cluster Autoscaler knows a group only from its Auto
  Scaling group's tags: ``k8s.io/cluster-autoscaler/node-template/label/<name>``,
  ``.../taint/<name>`` (``<value>:<effect>``) and ``.../resources/<resource>`` (same README,
  "Auto-Discovery Setup"). An EFA pod requests ``vpc.amazonaws.com/efa`` and ``hugepages-2Mi``, which no
  instance type tells it: without both tags it decides the pod fits no group, and the group stays at 0.
- **Size and idle time.** The group is created at 0 nodes (no GPU boots before a Job asks for one) and the
  autoscaler removes a node idle for ``SCALE_DOWN_IDLE``: the per-group tag
  ``.../autoscaling-options/scaledownunneededtime`` (same README, "Auto-Discovery Setup", which it overrides
  ``--scale-down-unneeded-time`` with) and the chart's ``extraArgs`` for the delay after a scale-up, which has no
  per-group tag. The defaults, 10 minutes each, bill 10 idle GPU node-minutes after every experiment; sequential
  experiments follow one another within seconds (the gate resumes the next Job when one ends), so 3 minutes
  keeps the nodes through that gap and no longer.
"""

from __future__ import annotations

from core.catalog import aws as catalog
from core.catalog.fabric import EFA_HUGEPAGES_MIB_PER_NODE
from core.config.model import GpuNodeGroup
from core.contract.names import LUSTRE_CLIENT_LABEL, LUSTRE_CLIENT_READY
from infra.environment import GPU_NODE_LABEL_KEY, GPU_TAINT

ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
EFA_RESOURCES = ("vpc.amazonaws.com/efa", "hugepages-2Mi")  # what EFA pods request beyond GPUs (pod_manifests._efa)
SCALE_DOWN_IDLE = "3m0s"  # an idle node of an autoscaled group goes after this (Go duration, as the README writes it)
SCALE_DOWN_ARGS = {"scale-down-unneeded-time": SCALE_DOWN_IDLE, "scale-down-delay-after-add": SCALE_DOWN_IDLE}


def accelerator(instance_type: str) -> str:
    """The label's value: the GPU model, as the README's ``nvidia-tesla-k80`` names P2's."""
    return f"nvidia-{catalog.INSTANCE_TYPES[instance_type].gpu_model.lower()}"


def autoscaled_labels(group: GpuNodeGroup) -> dict[str, str]:
    """The node labels an opted-in group adds to its own."""
    return {ACCELERATOR_LABEL: accelerator(group.instance_type)} if group.autoscale else {}


def node_template_tags(group: GpuNodeGroup, *, lustre_client: bool = False) -> dict[str, str]:
    """The Auto Scaling group tags that let Cluster Autoscaler scale ``group`` up from 0; {} when it does not opt in.
    ``lustre_client``: its nodes will carry the Lustre client's ready label that FSx pods select (set at boot by the
    node itself, so the autoscaler must be told of it, or it would judge that no new node fits an FSx pod).
    The EFA counts are what the pods may ask of one node: one interface per network card
    (``catalog.efa_interfaces``) and the recipe's huge pages (``fabric.EFA_HUGEPAGES_MIB_PER_NODE``)."""
    if not group.autoscale:
        return {}
    tags = {f"{TEMPLATE}/autoscaling-options/scaledownunneededtime": SCALE_DOWN_IDLE,
            f"{TEMPLATE}/label/{GPU_NODE_LABEL_KEY}": group.name,
            f"{TEMPLATE}/label/{ACCELERATOR_LABEL}": accelerator(group.instance_type),
            f"{TEMPLATE}/taint/{GPU_TAINT['key']}": f"{GPU_TAINT['value']}:{GPU_TAINT['effect']}"}
    if lustre_client:
        tags[f"{TEMPLATE}/label/{LUSTRE_CLIENT_LABEL}"] = LUSTRE_CLIENT_READY
    if group.efa:
        tags[f"{TEMPLATE}/resources/vpc.amazonaws.com/efa"] = str(catalog.efa_interfaces(group.instance_type))
        tags[f"{TEMPLATE}/resources/hugepages-2Mi"] = f"{EFA_HUGEPAGES_MIB_PER_NODE}Mi"
    return tags


def missing_efa_tags(group: GpuNodeGroup, tags: dict[str, str]) -> list[str]:
    """The EFA resources an opted-in EFA group's ``tags`` leave out (the plan refuses such a group)."""
    if not (group.autoscale and group.efa):
        return []
    return [r for r in EFA_RESOURCES if f"{TEMPLATE}/resources/{r}" not in tags]
