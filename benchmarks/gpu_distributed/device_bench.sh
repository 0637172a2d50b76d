#!/usr/bin/env bash
# On the 2-GPU device machine, one call (under 10 minutes): the products-scale benchmark with
# 3 runs of each configuration (median and spread), and PyG in the same call: the stock
# NeighborLoader setup and the best-effort one (features on the GPU, ids only from the
# workers, pinned memory, trimmed layers, bf16) over a sweep of worker counts; then fp32.
# Each step's time limit can be set (BENCH_S, PYG_STOCK_S, PYG_BEST_S, FP32_S).
#   OUT=<dir> bash benchmarks/gpu_distributed/device_bench.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
BENCH_S="${BENCH_S:-260}" PYG_STOCK_S="${PYG_STOCK_S:-65}" PYG_BEST_S="${PYG_BEST_S:-150}"
FP32_S="${FP32_S:-130}"
timeout "${BENCH_S}" python benchmarks/gpu_distributed/bench.py --repeats 3 --eval-every 1 \
  --run-timeout 60 --budget "$((BENCH_S - 5))" --profile server-2-bf16 \
  --runs worker-1-bf16 worker-2-bf16 server-1-bf16 server-2-bf16 worker-2-bf16-0.2 \
  --out "${OUT}/bench.jsonl" 2>&1 | grep -v Warning > "${OUT}/bench.log"
tail -n 14 "${OUT}/bench.log"
timeout "${PYG_STOCK_S}" python benchmarks/gpu/pyg_baseline.py --setup stock --workers 12 \
  --repeats 3 --budget "$((PYG_STOCK_S - 5))" --out "${OUT}/pyg.jsonl" 2>&1 | tail -n 3
timeout "${PYG_BEST_S}" python benchmarks/gpu/pyg_baseline.py --setup best --workers 30 24 12 \
  --precision bf16 --trim on --repeats 2 --budget "$((PYG_BEST_S - 5))" \
  --out "${OUT}/pyg.jsonl" 2>&1 | tail -n 6
python benchmarks/gpu/summarise.py "${OUT}/pyg.jsonl" 2>&1 | tail -n 12
timeout "${FP32_S}" python benchmarks/gpu_distributed/bench.py --repeats 3 --eval-every 1 \
  --run-timeout 40 --budget "$((FP32_S - 5))" --runs worker-1-fp32 worker-2-fp32 \
  --work-dir /tmp/distgnn-fp32 --out "${OUT}/bench-fp32.jsonl" 2>&1 | grep -v Warning \
  > "${OUT}/bench-fp32.log"
tail -n 6 "${OUT}/bench-fp32.log"
