"""Cluster add-ons: the GPU and EFA device plugins and etcd for torch elastic rendezvous."""
