"""Datasets: prepare and upload what the experiments train on, and stage it onto the cluster.

The laptop side (``bench data``: catalog, sources, layouts, prepare, store) and the cluster side
(the ``DatasetStaging`` component and the in-pod program ``datasets.stage``) share one manifest
format (``file_manifest``) and one set of checks (``file_checks``). The staging ConfigMap ships
this file, so it stays free of imports. See README.md.
"""
