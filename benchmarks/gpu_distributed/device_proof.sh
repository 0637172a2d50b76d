#!/usr/bin/env bash
# On the 2-GPU device machine, one call (under 10 minutes): 10 consecutive runs of each
# configuration that used to hang (remote features with evaluation every epoch, and
# server-client), each reported as hung with every process's stacks if it does, and beside
# them (no timing is taken here) the GPU tier of the tests, `distgnn run` on every GPU
# example included.
#   OUT=<dir> bash benchmarks/gpu_distributed/device_proof.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
python -c 'import triton; print("triton", triton.__version__)' 2>&1 | tee "${OUT}/triton.txt"
(
  # on a machine of 4 or more GPUs the tier runs on the last two, beside the proof's runs
  if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then export CUDA_VISIBLE_DEVICES=2,3; fi
  timeout 230 python -m pytest -q -p no:cacheprovider --noconftest -m gpu tests/e2e \
    > "${OUT}/gpu-tests-e2e.log" 2>&1
  timeout 120 python -m pytest -q -p no:cacheprovider --noconftest -m gpu tests/workload \
    > "${OUT}/gpu-tests-workload.log" 2>&1
) &
tier=$!
timeout 560 python benchmarks/gpu_distributed/bench.py --repeats 10 --eval-every 1 \
  --run-timeout 60 --budget 555 --work-dir /tmp/distgnn-proof \
  --runs worker-2-fp32-0.2 worker-2-bf16-0.2 server-2-bf16 \
  --out "${OUT}/proof.jsonl" 2>&1 | grep -v Warning > "${OUT}/proof.log"
tail -n 8 "${OUT}/proof.log"
wait "${tier}"
tail -n 25 "${OUT}/gpu-tests-e2e.log" "${OUT}/gpu-tests-workload.log"
