"""The distgnn workload: partitioner, sampler servers and trainers.

Each role is a module entry point: ``python -m distgnn_workload.partitioner|sampler|trainer``.
It never imports kopf, kubernetes or the operator.
"""
