"""The DDP trainer: ``python -m distgnn_workload.trainer``.

One training process per GPU of the pod (a supervisor process starts them when
``DISTGNN_PROCS_PER_POD`` > 1), or one on CPU with gloo.
"""
