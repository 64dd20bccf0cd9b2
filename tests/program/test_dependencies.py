"""Creation and deletion order that AWS and Kubernetes need, read from the mock engine's dependency graph.

Each RegisterResource request carries ``dependencies`` (explicit ``depends_on`` plus the resources
whose outputs its inputs use; a component stands for its children). Pulumi creates a resource after
everything it depends on and deletes it before them, so an edge here is the order on a real account.
"""

import pytest

from infra.access.policies import NODE_ROLE_POLICIES
from tests.program.test_aws_ready import (
    EGRESS,
    INGRESS,
    NODE_GROUP,
    of_type,
    one,
    recorded,
)
from tests.program.test_program import DEV, P5_FILLED

LUSTRE_FS = "aws:fsx/lustreFileSystem:LustreFileSystem"
POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


@pytest.fixture(scope="module")
def dev():
    return recorded(DEV)[1]


@pytest.fixture(scope="module")
def fsx():
    return recorded(P5_FILLED, "p5-fsx")[1]


def waits_for(regs, urn):
    """Every resource ``urn`` waits for, directly or through others (a component: through its children)."""
    by_urn = {r.urn: r for r in regs}
    children = {}
    for r in regs:
        children.setdefault(r.parent, []).append(r.urn)
    seen, todo = set(), list(by_urn[urn].dependencies)
    while todo:
        u = todo.pop()
        if u in seen:
            continue
        seen.add(u)
        todo += children.get(u, [])
        if u in by_urn:
            todo += by_urn[u].dependencies
    return seen


# --- 3. FSx waits for the Lustre rules it checks at creation -----------------------------------

def test_fsx_file_system_waits_for_its_own_lustre_rules(fsx):
    """FSx fails with InvalidNetworkSettings when its group does not yet admit Lustre among its servers
    (aws/aws-parallelcluster#6181): every rule of the file system's group that references the group
    itself is created before the file system."""
    fs = one(fsx, LUSTRE_FS)
    group = one(fsx, "aws:ec2/securityGroup:SecurityGroup", "storage-sg").name + "-id"
    assert fs.inputs["securityGroupIds"] == [group]
    own = [r for r in of_type(fsx, INGRESS) + of_type(fsx, EGRESS)
           if r.inputs["securityGroupId"] == group and r.inputs.get("referencedSecurityGroupId") == group]
    covered = {(r.type, r.inputs["fromPort"], r.inputs["toPort"]) for r in own}
    assert covered == {(t, lo, hi) for t in (INGRESS, EGRESS) for lo, hi in ((988, 988), (1018, 1023))}
    missing = [r.name for r in own if r.urn not in fs.dependencies]
    assert not missing, f"the file system does not wait for {missing}"


def test_fsx_file_system_does_not_wait_for_the_cluster(fsx):
    """The rules that reference the nodes' group need the cluster (~12 min); the file system (~10 min)
    must not wait for them, or it moves onto the critical path."""
    fs = one(fsx, LUSTRE_FS)
    cluster = one(fsx, "eks:index:Cluster")
    assert cluster.urn not in waits_for(fsx, fs.urn)


# --- 6. node groups wait for the node role's permissions --------------------------------------

@pytest.mark.parametrize("stack", ["dev", "fsx"])
def test_node_groups_wait_for_the_node_role_policy_attachments(stack, dev, fsx):
    """Created after and deleted before the role's policy attachments: at destroy EKS still needs them
    to drain nodes and delete instances and network interfaces (pulumi-aws NodeGroup example)."""
    regs = {"dev": dev, "fsx": fsx}[stack]
    role = one(regs, "aws:iam/role:Role", "cluster-node-role")
    attachments = [r for r in of_type(regs, POLICY_ATTACHMENT) if r.parent == role.parent
                   and r.name.startswith("cluster-node-role-")]
    assert sorted(a.inputs["policyArn"] for a in attachments) == sorted(NODE_ROLE_POLICIES)
    groups = of_type(regs, NODE_GROUP)
    assert len(groups) == 2
    for g in groups:
        missing = [a.inputs["policyArn"] for a in attachments if a.urn not in g.dependencies]
        assert not missing, f"{g.name} does not wait for {missing}"


# --- 8. namespaced objects wait for the namespace ---------------------------------------------

@pytest.mark.parametrize("stack", ["dev", "fsx"])
def test_every_namespaced_object_waits_for_the_namespace(stack, dev, fsx):
    """A namespaced object created before its namespace is refused by the API server ("namespaces ...
    not found"); the storage claim used to reach it by no path."""
    regs = {"dev": dev, "fsx": fsx}[stack]
    namespace = one(regs, "kubernetes:core/v1:Namespace")
    name = namespace.inputs["metadata"]["name"]
    namespaced = [r for r in regs if r.type.startswith("kubernetes:") and r.custom
                  and (r.inputs.get("metadata") or {}).get("namespace") == name]
    assert "storage-pvc" in {r.name for r in namespaced}
    late = [r.name for r in namespaced if namespace.urn not in waits_for(regs, r.urn)]
    assert not late, f"created without waiting for namespace {name!r}: {late}"
