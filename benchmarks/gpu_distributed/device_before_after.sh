#!/usr/bin/env bash
# Before and after in one call: the products-scale benchmark (bench.py) of an earlier tree and
# of this one, on the same machine, the same runs, one after the other (each generates its own
# graph from the same seed). The earlier tree is a copy of the code at the revision to compare
# with (`bash benchmarks/tree_copy.sh .base=<commit>`), carried to the device machine beside
# this checkout.
#   BASE=.base RUNS="worker-1-bf16 worker-4-bf16 worker-4-bf16-0.1" REPEATS=2 AFTER_ONLY="..." \
#     OUT=<dir> bash benchmarks/gpu_distributed/device_before_after.sh
# AFTER_ONLY: runs that only this tree has (e.g. a -socket run); BUDGET_S: seconds for each side.
# EASY=1 also runs this tree on the earlier benchmarks' graph (homophily 0.8, feature noise 1;
# "after-easy"), beside the default graph, so that the code and the graph change are apart.
# Several variants in one call: TREES="<dir> <dir> ..." (folders of this checkout, each a copy
# made as above) instead of BASE runs each of them, in that order, before this tree; each
# side is named by its folder without the dot, BASE's "before" (tree-<name>.txt holds its
# fingerprint).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
trees="${TREES:-${BASE:?BASE (or TREES): the earlier tree, a folder of this checkout}}"
RUNS="${RUNS:-worker-1-bf16 worker-4-bf16 worker-4-bf16-0.1}"
REPEATS="${REPEATS:-2}"
BUDGET_S="${BUDGET_S:-240}"
# shellcheck disable=SC2206
runs=(${RUNS})
# shellcheck disable=SC2206
after_only=(${AFTER_ONLY:-})

side() {  # side NAME TREE "BENCH-ARGS" RUNS...
  local name="$1" tree="$2" extra="$3"
  shift 3
  (
    cd "${tree}" || exit 1
    # shellcheck disable=SC2086
    PYTHONPATH="/tmp/site:${PWD}/build/devpath" timeout "$((BUDGET_S + 30))" \
      python benchmarks/gpu_distributed/bench.py --repeats "${REPEATS}" --eval-every 1 \
      --run-timeout 60 --budget "${BUDGET_S}" --work-dir "/tmp/distgnn-bench-${name}" ${extra} \
      --runs "$@" --out "${OUT}/${name}.jsonl" 2>&1 | grep -v Warning >"${OUT}/${name}.log"
  )
  echo "== ${name}"
  tail -n "$(($# + 2))" "${OUT}/${name}.log"
}

for tree in ${trees}; do
  name="$(basename "${tree}")"
  name="${name#.}"
  [ -n "${TREES:-}" ] || name=before
  devpath "${tree}"
  bash benchmarks/tree_fingerprint.sh --dir "${tree}" >"${OUT}/tree-${name}.txt"
  side "${name}" "${tree}" "" "${runs[@]}"
done
if [[ "${EASY:-0}" == 1 ]]; then
  side after-easy . "--homophily 0.8 --feature-noise 1" "${runs[@]}"
fi
side after . "" "${runs[@]}" "${after_only[@]}"
