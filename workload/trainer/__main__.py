"""Entry point of a trainer pod: its process (or its supervisor of one process per GPU)."""

from distgnn_api.contract import Role
from distgnn_workload.runtime.bootstrap import run_role
from distgnn_workload.trainer.supervisor import local_rank, main

if __name__ == "__main__":
    run_role(Role.trainer, main, local_rank=local_rank())
