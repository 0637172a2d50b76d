#!/usr/bin/env bash
# On a 4-GPU device machine, one call of about 9 minutes: the 4-GPU targets of the data plane
# in one benchmark (2 repeats each, evaluation every epoch, one graph): replicated features,
# features partitioned at cacheRatio 0.1 over NCCL with every transport, the same limited to
# NCCL's socket transport (2 hosts x 2 GPUs emulated, no IPC), and server-client on 1 and 4
# GPUs (its 1 -> 4 scaling).
#   OUT=<dir> [BENCH_S=500] [REPEATS=2] bash benchmarks/gpu_distributed/device_targets4.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
BENCH_S="${BENCH_S:-500}"
timeout "${BENCH_S}" python benchmarks/gpu_distributed/bench.py --repeats "${REPEATS:-2}" \
  --eval-every 1 --run-timeout 60 --budget "$((BENCH_S - 10))" \
  --runs worker-4-bf16 worker-4-bf16-0.1 worker-4-bf16-0.1-socket server-1-bf16 server-4-bf16 \
  --out "${OUT}/bench.jsonl" 2>&1 | grep -v Warning >"${OUT}/bench.log"
tail -n 12 "${OUT}/bench.log"
