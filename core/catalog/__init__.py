"""Dated, sourced facts about the outside world: AWS instance types and prices, images and which
GPU runs them, pinned versions, fabric and scaling anchors, workload facts and GPU peaks."""
