"""``python -m distgnn_workload.partition``: the partition Job's entry point."""

import sys

from distgnn_workload.partition.job import main

if __name__ == "__main__":
    sys.exit(main())
