#!/usr/bin/env bash
# On the device machine (4 GPUs), one call of about 5 minutes: the neighbour-mean kernels
# (embedding_bag against the Triton segment kernel) alone, then end to end in worker mode on
# 1, 2 and 4 GPUs with each kernel, and the all-reduce inside the captured step
# (DISTGNN_OVERLAP_ALLREDUCE=graph) against the default after it. Evaluation every epoch.
#   OUT=<dir> bash benchmarks/gpu_distributed/device_kernels.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
timeout 60 python benchmarks/gpu/segment_kernel_bench.py --out "${OUT}/segment.jsonl" 2>&1 \
  | tail -n 6
bench() {
  local name=$1 budget=$2
  shift 2
  timeout "$((budget + 20))" python benchmarks/gpu_distributed/bench.py --eval-every 1 \
    --run-timeout 60 --budget "${budget}" --work-dir /tmp/distgnn-kernels \
    --keep --out "${OUT}/${name}.jsonl" "$@" 2>&1 | grep -v Warning > "${OUT}/${name}.log"
  tail -n 5 "${OUT}/${name}.log"
}
bench triton 110 --repeats 2 --runs worker-1-bf16 worker-2-bf16 worker-4-bf16
bench torch 75 --repeats 2 --runs worker-1-bf16 worker-2-bf16 --env DISTGNN_SEGMENT_KERNEL=torch
bench graph 60 --repeats 2 --runs worker-2-bf16 worker-4-bf16 --env DISTGNN_OVERLAP_ALLREDUCE=graph
