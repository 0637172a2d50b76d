#!/usr/bin/env bash
# One trainer's time apart (step_bench.py: the sampler and gather alone, the step alone, the
# loop, the trainer's epoch) for several trees in one call, on the same GPU, one after the
# other. TREES lists folders of this checkout holding a tree each ("." is this one; an
# earlier tree is made with `bash benchmarks/tree_copy.sh <folder>=<commit>`); each runs its
# own step_bench.py.
#   TREES=".base ." [STEPS=60] [EPOCHS=1] OUT=<dir> bash benchmarks/gpu_distributed/device_step_trees.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
TREES="${TREES:-.}"
for tree in ${TREES}; do
  name="$(basename "$(cd "${tree}" && pwd)")"
  [[ "${tree}" == "." ]] && name=after
  devpath "${tree}"
  (
    cd "${tree}" || exit 1
    PYTHONPATH="/tmp/site:${PWD}/build/devpath" timeout "${TREE_S:-150}" \
      python benchmarks/gpu_distributed/step_bench.py --precisions bf16 --steps "${STEPS:-60}" \
      --epochs "${EPOCHS:-1}" --out "${OUT}/step-${name}.jsonl" 2>&1 | grep -v Warning \
      >"${OUT}/step-${name}.log"
  )
  echo "== ${name}"
  cut -c1-400 "${OUT}/step-${name}.jsonl" | grep -v step_env
done
