#!/usr/bin/env bash
# On the device machine (2 GPUs), one call (under 10 minutes): the heterogeneous benchmark on
# the full-scale MAG-shaped graph. First distgnn (bench.py: the job's partition steps, one
# store per GPU count, side by side; our edges per seed per edge type; then REPEATS runs of
# each configuration in worker and server-client mode on 1 and 2 GPUs, bf16 then fp32, with
# evaluation every epoch and a profile of the PROFILE runs (default worker-1-bf16; each
# trace's idle GPU time summed by trace_gaps.py)), keeping the store; then PyG in the
# same call on that store: the stock hetero NeighborLoader (6 workers, as PyG's
# to_hetero_mag example; CPU features) and the best-effort one (features and embeddings on
# the GPU, ids only from persistent workers, pinned memory, prefetch 4) over a sweep of
# worker counts; then the ratio table. Each step
# has its own time limit (BENCH_S, PYG_STOCK_S, PYG_BEST_S; their sum stays under ~9 minutes
# with the set-up). RUNS, REPEATS, EPOCHS (default 2: one warm-up, one measured), RUN_TIMEOUT,
# FANOUT, HIDDEN, BEST_WORKERS and BEST_PRECISION can be set; SKIP_PYG=1 stops after ours.
# The stores stay in /tmp/distgnn-hetero-bench: a later call on the same warm machine reuses
# them.
#   OUT=<dir> bash benchmarks/gpu_hetero/device_bench.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
BENCH_S="${BENCH_S:-350}" PYG_STOCK_S="${PYG_STOCK_S:-55}" PYG_BEST_S="${PYG_BEST_S:-115}"
REPEATS="${REPEATS:-2}" EPOCHS="${EPOCHS:-2}" RUN_TIMEOUT="${RUN_TIMEOUT:-200}"
FANOUT="${FANOUT:-25 20}" HIDDEN="${HIDDEN:-128}" PROFILE="${PROFILE:-worker-1-bf16}"
BEST_WORKERS="${BEST_WORKERS:-24 16 8}" BEST_PRECISION="${BEST_PRECISION:-bf16}"
WORK=/tmp/distgnn-hetero-bench
read -ra runs <<< "${RUNS:-worker-1-bf16 worker-2-bf16 server-1-bf16 server-2-bf16 worker-1-fp32 worker-2-fp32}"
# shellcheck disable=SC2086  # FANOUT, PROFILE and the worker lists are word lists
timeout "${BENCH_S}" python benchmarks/gpu_hetero/bench.py --repeats "${REPEATS}" \
  --epochs "${EPOCHS}" --eval-every 1 --fanout ${FANOUT} --hidden "${HIDDEN}" \
  --run-timeout "${RUN_TIMEOUT}" \
  --budget "$((BENCH_S - 10))" --keep --work-dir "${WORK}" --profile ${PROFILE} \
  --runs "${runs[@]}" --out "${OUT}/hetero.jsonl" 2>&1 | grep -v Warning > "${OUT}/hetero.log"
tail -n 12 "${OUT}/hetero.log"
for trace in "${OUT}"/trace-hetero-*.json.gz; do  # the profiled runs' idle GPU time
  [ -e "${trace}" ] || continue
  python benchmarks/gpu_distributed/trace_gaps.py "${trace}" --steps 20 \
    --out "${trace%.json.gz}-gaps.json" > /dev/null
done
if [ -n "${SKIP_PYG:-}" ]; then exit 0; fi
STORE="$(ls -d "${WORK}"/data/partitions/*/ 2>/dev/null | head -n 1)"
if [ -z "${STORE}" ]; then echo "no typed store under ${WORK}: PyG not run"; exit 1; fi
# shellcheck disable=SC2086
timeout "${PYG_STOCK_S}" python benchmarks/gpu_hetero/pyg_hetero.py --setup stock --workers 6 \
  --fanout ${FANOUT} --hidden "${HIDDEN}" --repeats 2 --batches 30 \
  --budget "$((PYG_STOCK_S - 5))" --store "${STORE}" --out "${OUT}/pyg-hetero.jsonl" 2>&1 \
  | grep -v -i warn | tail -n 3
# shellcheck disable=SC2086
timeout "${PYG_BEST_S}" python benchmarks/gpu_hetero/pyg_hetero.py --setup best \
  --workers ${BEST_WORKERS} --precision ${BEST_PRECISION} --fanout ${FANOUT} \
  --hidden "${HIDDEN}" --repeats 2 --batches 40 --budget "$((PYG_BEST_S - 5))" \
  --store "${STORE}" --out "${OUT}/pyg-hetero.jsonl" 2>&1 | grep -v -i warn | tail -n 6
python benchmarks/gpu_hetero/ratios.py "${OUT}/hetero.jsonl" "${OUT}/pyg-hetero.jsonl" \
  | tee "${OUT}/ratios.txt"
