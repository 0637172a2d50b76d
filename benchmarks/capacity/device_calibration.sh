#!/usr/bin/env bash
# On the device machine, one call (under 8 minutes): the capacity plan's GPU calibration,
# the products-scale job on up to 2 GPUs in worker and server-client mode, host RSS, GPU
# memory (nvidia-smi, and the allocator's by phase) and the runtime's counters against the model
# (benchmarks/capacity/gpu_calibration.py).
#   OUT=<dir> bash benchmarks/capacity/device_calibration.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
timeout "${CALIBRATION_S:-470}" python benchmarks/capacity/gpu_calibration.py \
  --out-dir "${OUT}" 2>&1 | grep -v Warning | tee "${OUT}/gpu-calibration.log" | tail -n 100
