#!/usr/bin/env bash
# On a 4-GPU device machine, one call of under 10 minutes: device_one_path.sh's before/after
# comparison of an earlier tree (BASE) and this one, three benchmarks side by side on GPUs of
# their own: the typed MAG-shaped graph on 1 and 2 GPUs (GPUs 0,1), products then PyG's
# typed baseline on the typed run's store (GPU 2: stock and best-effort, as
# device_bench.sh runs them), and citation2-shaped link prediction (GPU 3).
#   BASE=.base OUT=<dir> bash benchmarks/gpu_hetero/device_one_path4.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
export BASE="${BASE:?BASE: the earlier tree}" REPEATS="${REPEATS:-2}" OUT
one_path() {  # one_path GPUS WHICH RUNS
  CUDA_VISIBLE_DEVICES="$1" WHICH="$2" RUNS="$3" bash benchmarks/gpu_hetero/device_one_path.sh \
    >"${OUT}/one-path-${2// /-}.txt" 2>&1
}
TYPED_S="${TYPED_S:-230}" one_path 0,1 typed "worker-1-bf16 worker-2-bf16" &
typed=$!
LINK_S="${LINK_S:-170}" one_path 3 link worker-1-bf16 &
link=$!
PRODUCTS_S="${PRODUCTS_S:-90}" one_path 2 products worker-1-bf16
# PyG's typed baseline on the store of this tree's typed run, once it is written
for _ in $(seq 120); do
  STORE="$(dirname "$(ls /tmp/distgnn-one-path-after-typed/data/partitions/*/META.json 2>/dev/null \
    | head -n 1)")"
  [ "${STORE}" != . ] && break
  sleep 2
done
FANOUT="25 20"
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=2 timeout 60 python benchmarks/gpu_hetero/pyg_hetero.py --setup stock \
  --workers 6 --fanout ${FANOUT} --hidden 128 --repeats 2 --batches 30 --budget 55 \
  --store "${STORE}" --out "${OUT}/pyg-hetero.jsonl" 2>&1 | grep -v -i warn | tail -n 3
# shellcheck disable=SC2086
CUDA_VISIBLE_DEVICES=2 timeout 130 python benchmarks/gpu_hetero/pyg_hetero.py --setup best \
  --workers 24 16 8 --precision bf16 --fanout ${FANOUT} --hidden 128 --repeats 2 --batches 40 \
  --budget 120 --store "${STORE}" --out "${OUT}/pyg-hetero.jsonl" 2>&1 | grep -v -i warn | tail -n 6
wait "${typed}" "${link}"
tail -n 4 "${OUT}"/one-path-*.txt
python benchmarks/gpu_hetero/ratios.py "${OUT}/typed-after.jsonl" "${OUT}/pyg-hetero.jsonl" \
  | tee "${OUT}/ratios.txt"
