"""The partition Job: ``python -m distgnn_workload.partitioner``.

It loads the job's dataset, partitions it with :mod:`distgnn_workload.partition` and writes
the partition store on the shared volume, inside the same
:class:`~distgnn_workload.runtime.bootstrap.RoleProcess` start-up as the other roles (the
contract's env, the job config with its job-UID check, the metrics server, the exit codes).
"""
