"""Entry point of a sampler pod: serves sampled mini-batches until every trainer finished."""

from distgnn_api.contract import Role
from distgnn_workload.runtime.bootstrap import run_role
from distgnn_workload.sampler.process import main

if __name__ == "__main__":
    run_role(Role.sampler, main)
