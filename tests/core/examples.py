"""A valid experiment stack's raw config (``eksbench:*`` keys, namespace stripped), shared by the tests of
the shape (spec), the estimates (infra) and the validation (program)."""

GOOD = {
    "cluster": {"public_access_cidrs": ["198.18.0.0/32"]},
    "gpu_node_groups": [{"name": "gpu", "instance_type": "p3.16xlarge", "max_size": 2}],
    "experiments": [{"name": "r50", "workload": "resnet50", "nodes": 2}],
    "results": {"home_stack": "organization/eksbench/home"},
}
