#!/usr/bin/env bash
# On a 4-GPU device machine, one call of at most 9 minutes: the GPU tests of the feature
# exchange (NCCL on 2 GPUs, and worker mode through `distgnn run`'s launch plan), then the
# products-scale benchmark in worker mode (2 runs each, evaluation every epoch): 1 GPU;
# 4 GPUs replicated (cacheRatio 1); 4 GPUs with partitioned features (cacheRatio 0.1), also
# with NCCL limited to its socket transport (an emulation of 2 hosts x 2 GPUs). Each run
# reports seeds/s per GPU, accuracy and the remote feature bytes a rank pulled per step;
# trainer 0 of the partitioned run is profiled.
#   OUT=<dir> bash benchmarks/gpu_distributed/device_exchange.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
TESTS_S="${TESTS_S:-140}" BENCH_S="${BENCH_S:-320}"
timeout "${TESTS_S}" python -m pytest -q -p no:cacheprovider --noconftest -m gpu \
  tests/workload/test_feature_exchange_gpu.py \
  "tests/e2e/test_workload_gpu.py::test_two_gpus_train_with_nccl[0-0.2]" \
  > "${OUT}/gpu-tests-exchange.log" 2>&1
tail -n 15 "${OUT}/gpu-tests-exchange.log"
timeout "${BENCH_S}" python benchmarks/gpu_distributed/bench.py --repeats 2 --eval-every 1 \
  --run-timeout 60 --budget "$((BENCH_S - 5))" --profile worker-4-bf16-0.1 \
  --runs worker-1-bf16 worker-4-bf16 worker-4-bf16-0.1 worker-4-bf16-0.1-socket \
  --out "${OUT}/bench.jsonl" 2>&1 | grep -v Warning > "${OUT}/bench.log"
tail -n 8 "${OUT}/bench.log"
