#!/usr/bin/env bash
# On the device machine (2 GPUs), one call (under 10 minutes): the link-prediction benchmark on
# the full-scale citation2-shaped graph (bench.py: the job's partition steps, one store per GPU
# count, side by side; then REPEATS runs of each configuration in worker and server-client mode
# on 1 and 2 GPUs, bf16; 3-layer GraphSAGE, hidden 256, fanout [15, 10, 5], batch 1024 positive
# edges per GPU, 1 uniform negative each; EPOCHS epochs (default 2: one warm-up, one measured)
# of POSITIVES positives per GPU each (linkPrediction.positivesPerEpoch: a fresh random subset
# of the training positives every epoch; default 300000, ~293 batches); the final ranking
# evaluation of 100k valid and 100k test positives against 1000 fixed negatives each is timed
# in every run). The stores stay in /tmp/distgnn-link-bench: a later call on the same warm
# machine reuses them. Then PyG in the same call on the 1-GPU store (pyg_link.py):
# LinkNeighborLoader stock (12 workers, CPU features, fp32) and best effort (16 persistent
# workers, features on the GPU, bf16; then 24 workers), each timed
# over PYG_TIMED_S seconds of batches after warm-up (at most PYG_BATCHES). Then the ratio
# table (link_ratios.py). RUNS, REPEATS, EPOCHS, POSITIVES, RUN_TIMEOUT, BENCH_S, PYG_S,
# PYG_TIMED_S, PYG_BATCHES, BEST_WORKERS (default "16 24"; each runs while the call has time left) can be set.
#   OUT=<dir> bash benchmarks/gpu_link/device_bench.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
BENCH_S="${BENCH_S:-400}" PYG_S="${PYG_S:-75}" REPEATS="${REPEATS:-1}" EPOCHS="${EPOCHS:-2}"
RUN_TIMEOUT="${RUN_TIMEOUT:-100}" POSITIVES="${POSITIVES:-300000}"
PYG_TIMED_S="${PYG_TIMED_S:-25}" PYG_BATCHES="${PYG_BATCHES:-300}"
BEST_WORKERS="${BEST_WORKERS:-16 24}" CALL_S="${CALL_S:-570}"
WORK=/tmp/distgnn-link-bench
read -ra runs <<< "${RUNS:-worker-1-bf16 worker-2-bf16 server-1-bf16 server-2-bf16}"
timeout "${BENCH_S}" python benchmarks/gpu_link/bench.py --repeats "${REPEATS}" \
  --epochs "${EPOCHS}" --positives-per-gpu "${POSITIVES}" --fanout 15 10 5 --hidden 256 \
  --batch-size 1024 --negatives 1 --eval-negatives 1000 --eval-positives 100000 \
  --run-timeout "${RUN_TIMEOUT}" --budget "$((BENCH_S - 10))" --keep --work-dir "${WORK}" \
  --runs "${runs[@]}" --out "${OUT}/link.jsonl" 2>&1 | grep -v Warning > "${OUT}/link.log"
tail -n 12 "${OUT}/link.log"
STORE="$(ls -d "${WORK}"/data/partitions/*/ 2>/dev/null | head -n 1)"
if [ -z "${STORE}" ]; then echo "no store under ${WORK}: PyG not run"; exit 1; fi
pyg() {  # setup workers precision
  timeout "${PYG_S}" python benchmarks/gpu_link/pyg_link.py --setup "$1" --workers "$2" \
    --precision "$3" --batches "${PYG_BATCHES}" --max-seconds "${PYG_TIMED_S}" \
    --store "${STORE}" --out "${OUT}/pyg-link.jsonl" 2>&1 | grep -v -i warn | tail -n 2
}
pyg stock 12 fp32
for w in ${BEST_WORKERS}; do
  if [ "$((SECONDS + PYG_S))" -lt "${CALL_S}" ]; then pyg best "${w}" bf16; fi
done
python benchmarks/gpu_link/link_ratios.py "${OUT}/link.jsonl" "${OUT}/pyg-link.jsonl" \
  | tee "${OUT}/ratios.txt"
