#!/usr/bin/env bash
# On a 4-GPU device machine, one call of about 6 minutes: the GPU tests of the typed sampler
# and the sharded embeddings, then 1 -> 4 GPU scaling in both modes (3 runs each, evaluation
# every epoch), the 1-GPU runs in the same call as the 4-GPU ones.
#   OUT=<dir> bash benchmarks/gpu_distributed/device_scaling4.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
timeout 110 python -m pytest -q -p no:cacheprovider --noconftest -m gpu \
  tests/workload/test_sampling_hetero.py tests/workload/test_embeddings_gpu.py \
  > "${OUT}/gpu-tests-hetero.log" 2>&1
tail -n 15 "${OUT}/gpu-tests-hetero.log"
timeout 250 python benchmarks/gpu_distributed/bench.py --repeats 3 --eval-every 1 \
  --run-timeout 60 --budget 245 --runs worker-1-bf16 worker-4-bf16 server-1-bf16 server-4-bf16 \
  --out "${OUT}/bench.jsonl" 2>&1 | grep -v Warning > "${OUT}/bench.log"
tail -n 8 "${OUT}/bench.log"
