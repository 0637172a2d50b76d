"""Entry point of a trainer pod: reads the contract env and the job config, then trains."""

from distgnn_workload.runtime.lifecycle import run_entry_point
from distgnn_workload.trainer.supervisor import main

if __name__ == "__main__":
    run_entry_point(main, "trainer")
