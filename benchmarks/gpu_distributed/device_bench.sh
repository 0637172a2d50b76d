#!/usr/bin/env bash
# On the device machine, one call (under 10 minutes): the products-scale benchmark with 3 runs
# of each configuration (median and spread) on 1, 2 and, where the machine has them, 4 GPUs
# in both modes, with evaluation every epoch and profiles of the 1- and 2-GPU runs; then PyG
# in the same call: the stock NeighborLoader setup and the best-effort one (features on the
# GPU, ids only from the workers, pinned memory, trimmed layers, bf16) over a sweep of worker
# counts; then, if FP32_S is set, fp32. Each step's time limit can be set (BENCH_S,
# PYG_STOCK_S, PYG_BEST_S, FP32_S).
#   OUT=<dir> bash benchmarks/gpu_distributed/device_bench.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
BENCH_S="${BENCH_S:-340}" PYG_STOCK_S="${PYG_STOCK_S:-55}" PYG_BEST_S="${PYG_BEST_S:-150}"
FP32_S="${FP32_S:-0}"
runs=(worker-1-bf16 worker-2-bf16 server-1-bf16 server-2-bf16 worker-2-bf16-0.2)
if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then runs+=(worker-4-bf16 server-4-bf16); fi
timeout "${BENCH_S}" python benchmarks/gpu_distributed/bench.py --repeats 3 --eval-every 1 \
  --run-timeout 60 --budget "$((BENCH_S - 5))" \
  --profile worker-1-bf16 worker-2-bf16 server-2-bf16 \
  --runs "${runs[@]}" --out "${OUT}/bench.jsonl" 2>&1 | grep -v Warning > "${OUT}/bench.log"
tail -n 16 "${OUT}/bench.log"
timeout "${PYG_STOCK_S}" python benchmarks/gpu/pyg_baseline.py --setup stock --workers 12 \
  --repeats 3 --budget "$((PYG_STOCK_S - 5))" --out "${OUT}/pyg.jsonl" 2>&1 | tail -n 3
timeout "${PYG_BEST_S}" python benchmarks/gpu/pyg_baseline.py --setup best --workers 30 24 12 \
  --precision bf16 --trim on --repeats 2 --budget "$((PYG_BEST_S - 5))" \
  --out "${OUT}/pyg.jsonl" 2>&1 | tail -n 6
python benchmarks/gpu/summarise.py "${OUT}/pyg.jsonl" 2>&1 | tail -n 12
if [ "${FP32_S}" -gt 0 ]; then
  timeout "${FP32_S}" python benchmarks/gpu_distributed/bench.py --repeats 3 --eval-every 1 \
    --run-timeout 40 --budget "$((FP32_S - 5))" --runs worker-1-fp32 worker-2-fp32 \
    --work-dir /tmp/distgnn-fp32 --out "${OUT}/bench-fp32.jsonl" 2>&1 | grep -v Warning \
    > "${OUT}/bench-fp32.log"
  tail -n 6 "${OUT}/bench-fp32.log"
fi
