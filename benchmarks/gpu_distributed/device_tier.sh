#!/usr/bin/env bash
# The GPU tier of the tests (every test marked gpu), in one call on the device machine. On a
# machine of 4 or more GPUs its two halves run side by side, each on two GPUs of its own: the
# examples through `distgnn run` (tests/e2e/test_cli_gpu_examples.py), and everything else;
# on fewer GPUs one after the other. Logs under $OUT (tier-examples.log, tier-rest.log).
#   OUT=<dir> bash benchmarks/gpu_distributed/device_tier.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source benchmarks/gpu_distributed/device_setup.sh
TIER_S="${TIER_S:-540}"
gpus="$(nvidia-smi --list-gpus | wc -l)"

half() {  # half NAME VISIBLE PYTEST-ARGS...
  local name="$1" visible="$2"
  shift 2
  CUDA_VISIBLE_DEVICES="${visible}" timeout "${TIER_S}" python -m pytest -q -p no:cacheprovider \
    --noconftest -m gpu -rfEs "$@" >"${OUT}/tier-${name}.log" 2>&1
  echo "== ${name}: $(tail -n 1 "${OUT}/tier-${name}.log")"
}

examples=(tests/e2e/test_cli_gpu_examples.py)
rest=(tests/workload tests/e2e tests/local tests/benchmarks --ignore=tests/e2e/test_cli_gpu_examples.py
  --continue-on-collection-errors)
if ((gpus >= 4)); then
  half examples 2,3 "${examples[@]}" &
  half rest 0,1 "${rest[@]}"
  wait
else
  half rest 0,1 "${rest[@]}"
  half examples 0,1 "${examples[@]}"
fi
grep -h -E '^(FAILED|ERROR)' "${OUT}"/tier-*.log || true
