#!/usr/bin/env bash
# A feature table over its GPU budget (samplers.featureMemory), in one call: the GPU tests of
# the tiers, then the products-scale benchmark (bench.py) with the whole table on the GPU and
# with FEATURE_MEMORY of each holder's table on it (the rest in pinned host memory, read in
# place through UVA), same machine, same graph (one work dir), one after the other.
#   RUNS="worker-1-bf16" FEATURE_MEMORY=20% REPEATS=2 OUT=<dir> \
#     bash benchmarks/gpu_distributed/device_feature_tiers.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
RUNS="${RUNS:-worker-1-bf16}"
FEATURE_MEMORY="${FEATURE_MEMORY:-20%}"
REPEATS="${REPEATS:-2}"
BUDGET_S="${BUDGET_S:-200}"
TESTS="${TESTS:-tests/workload/test_feature_tiers.py}"
# shellcheck disable=SC2206
runs=(${RUNS})
# shellcheck disable=SC2206
tests=(${TESTS})

if ((${#tests[@]})); then
  timeout 240 python -m pytest -q -p no:cacheprovider --noconftest -m gpu -rfEs "${tests[@]}" \
    >"${OUT}/gpu-tests.log" 2>&1
  echo "== gpu tests: $(tail -n 1 "${OUT}/gpu-tests.log")"
fi

side() {  # side NAME [BENCH-ARGS...]
  local name="$1"
  shift
  timeout "$((BUDGET_S + 30))" python benchmarks/gpu_distributed/bench.py --repeats "${REPEATS}" \
    --eval-every 1 --run-timeout 90 --budget "${BUDGET_S}" --work-dir /tmp/distgnn-bench-tiers \
    --keep --runs "${runs[@]}" --out "${OUT}/${name}.jsonl" "$@" 2>&1 | grep -v Warning \
    >"${OUT}/${name}.log"
  echo "== ${name}"
  tail -n "$((${#runs[@]} + 3))" "${OUT}/${name}.log"
}

side all-gpu
side tiered --feature-memory "${FEATURE_MEMORY}"
