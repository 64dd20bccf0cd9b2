"""How each framework is launched in the pods of a training Job: the cluster side of ``workloads/train/``.

One module per framework (``pytorch``, ``tensorflow``, ``horovod``, ``paddle``), as ``train/`` has one room per
framework for what runs in the pods; ``common`` holds the shared shape (``Launch``, the trainer's arguments),
``by_framework`` picks the builder, and ``pod_script`` writes the container's ``sh -c`` script around it.
Pure: no Pulumi, no I/O.
"""
