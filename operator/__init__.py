"""The distgnn operator: kopf handlers that run DistGNNJobs, and the ``distgnn`` CLI.

Installed as ``distgnn_operator``: the standard library owns the name ``operator``.
"""
