#!/usr/bin/env bash
# On a device machine of one GPU or more, one call (under 10 minutes): the 1-GPU worker-mode
# figures that the one typed path must keep, of an earlier tree (BASE) and of this one, on
# the same machine, one after the other, REPEATS runs each (evaluation every epoch, bf16):
#   products  products-shaped node classification (gpu_distributed/bench.py, its defaults)
#   link      citation2-shaped link prediction (gpu_link/bench.py, device_bench.sh's settings)
#   typed     the MAG-shaped typed graph (gpu_hetero/bench.py, device_bench.sh's settings)
# The earlier tree is a copy of the code at the commit to compare with, carried beside this
# checkout:
#   bash benchmarks/tree_copy.sh .base=<commit>
#   BASE=.base WHICH="products link" REPEATS=2 OUT=<dir> bash benchmarks/gpu_hetero/device_one_path.sh
# Each side partitions into a work dir of its own. Per-benchmark time limits: PRODUCTS_S,
# LINK_S, TYPED_S (seconds per side). SIDES="after" runs this tree alone. RUNS (default
# worker-1-bf16) names the runs of each benchmark, e.g. "worker-1-bf16 worker-2-bf16".
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
BASE="${BASE:?BASE: the earlier tree, a folder of this checkout}"
WHICH="${WHICH:-products link typed}"
SIDES="${SIDES:-before after}"
REPEATS="${REPEATS:-2}"
read -ra runs <<< "${RUNS:-worker-1-bf16}"
PRODUCTS_S="${PRODUCTS_S:-90}" LINK_S="${LINK_S:-170}" TYPED_S="${TYPED_S:-150}"
devpath "${BASE}"

bench() {  # bench SIDE TREE WHAT
  local side="$1" tree="$2" what="$3" limit script
  local -a args
  case "${what}" in
    products)
      limit="${PRODUCTS_S}" script=benchmarks/gpu_distributed/bench.py
      args=(--eval-every 1 --run-timeout 60) ;;
    link)
      limit="${LINK_S}" script=benchmarks/gpu_link/bench.py
      args=(--epochs 2 --positives-per-gpu 300000 --fanout 15 10 5 --hidden 256
        --batch-size 1024 --negatives 1 --eval-negatives 1000 --eval-positives 100000
        --run-timeout 100) ;;
    typed)
      limit="${TYPED_S}" script=benchmarks/gpu_hetero/bench.py
      args=(--epochs 2 --eval-every 1 --fanout 25 20 --hidden 128 --run-timeout 120) ;;
    *) echo "unknown benchmark ${what}" >&2; return 1 ;;
  esac
  (
    cd "${tree}" || exit 1
    PYTHONPATH="/tmp/site:${PWD}/build/devpath" timeout "$((limit + 20))" python "${script}" \
      --repeats "${REPEATS}" --budget "${limit}" --work-dir "/tmp/distgnn-one-path-${side}-${what}" \
      "${args[@]}" --runs "${runs[@]}" --out "${OUT}/${what}-${side}.jsonl" 2>&1 \
      | grep -v Warning >"${OUT}/${what}-${side}.log"
  )
  echo "== ${what} ${side}"
  tail -n 3 "${OUT}/${what}-${side}.log"
}

for what in ${WHICH}; do
  for side in ${SIDES}; do
    if [[ "${side}" == before ]]; then bench before "${BASE}" "${what}"; else bench after . "${what}"; fi
  done
done
