"""Entry point of a sampler pod: reads the contract env and the job config, then serves."""

from distgnn_workload.runtime.lifecycle import run_entry_point
from distgnn_workload.sampler.server import main

if __name__ == "__main__":
    run_entry_point(main, "sampler")
