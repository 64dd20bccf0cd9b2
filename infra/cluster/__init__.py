"""The EKS cluster and its nodes: control plane, managed node groups, the region's offerings, the offline
cost and time estimate, the namespace-level manifests and the trainers' identity."""
