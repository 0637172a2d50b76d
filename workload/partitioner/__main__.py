"""``python -m distgnn_workload.partitioner``: the partition Job's entry point."""

from distgnn_api.contract import Role
from distgnn_workload.partitioner.job import main
from distgnn_workload.runtime.bootstrap import run_role

if __name__ == "__main__":
    run_role(Role.partitioner, main)
