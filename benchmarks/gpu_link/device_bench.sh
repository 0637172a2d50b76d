#!/usr/bin/env bash
# On the device machine (2 GPUs), one call (under 10 minutes): the link-prediction benchmark on
# the full-scale citation2-shaped graph (bench.py: the job's partition steps, one store per GPU
# count, side by side; then REPEATS runs of each configuration in worker and server-client mode
# on 1 and 2 GPUs, bf16; 3-layer GraphSAGE, hidden 256, fanout [15, 10, 5], batch 1024 positive
# edges per GPU, 1 uniform negative each; the final ranking evaluation of 100k valid and 100k
# test positives against 1000 fixed negatives each is timed in every run). The stores stay in
# /tmp/distgnn-link-bench: a later call on the same warm machine reuses them. RUNS, REPEATS,
# EPOCHS (default 2: one warm-up, one measured), RUN_TIMEOUT and BENCH_S can be set.
#   OUT=<dir> bash benchmarks/gpu_link/device_bench.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
BENCH_S="${BENCH_S:-540}" REPEATS="${REPEATS:-1}" EPOCHS="${EPOCHS:-2}"
RUN_TIMEOUT="${RUN_TIMEOUT:-200}"
read -ra runs <<< "${RUNS:-worker-1-bf16 worker-2-bf16 server-1-bf16 server-2-bf16}"
timeout "${BENCH_S}" python benchmarks/gpu_link/bench.py --repeats "${REPEATS}" \
  --epochs "${EPOCHS}" --fanout 15 10 5 --hidden 256 --batch-size 1024 --negatives 1 \
  --eval-negatives 1000 --eval-positives 100000 --run-timeout "${RUN_TIMEOUT}" \
  --budget "$((BENCH_S - 10))" --keep --work-dir /tmp/distgnn-link-bench \
  --runs "${runs[@]}" --out "${OUT}/link.jsonl" 2>&1 | grep -v Warning > "${OUT}/link.log"
tail -n 12 "${OUT}/link.log"
