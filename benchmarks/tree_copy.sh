#!/usr/bin/env bash
# Copies of earlier code for a device call that compares trees (device_before_after.sh's BASE
# or TREES, device_step_trees.sh's TREES): each FOLDER=REV becomes a folder of this checkout
# holding the packages and build files of REV (a commit, branch or tag) and this checkout's
# benchmarks (so every tree runs the same benchmark), without their results. Name the folders
# with a leading dot, which .git/info/exclude or the device's carry list should cover; the
# fingerprint of each is printed (benchmarks/tree_fingerprint.sh).
#   bash benchmarks/tree_copy.sh .main=main .priority=loader-priority
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
(($# > 0)) || { echo "usage: $0 FOLDER=REV..." >&2; exit 2; }
for pair in "$@"; do
  folder="${pair%%=*}" rev="${pair#*=}"
  if [[ "${pair}" != *=* || -z "${folder}" || -z "${rev}" || "${folder}" == */* ]]; then
    echo "${pair}: give FOLDER=REV, a folder name of this checkout (no /) and a revision" >&2
    exit 2
  fi
  git -C "${root}" rev-parse --verify --quiet "${rev}^{commit}" >/dev/null \
    || { echo "${rev}: no such revision" >&2; exit 2; }
  rm -rf "${root:?}/${folder}"
  mkdir "${root}/${folder}"
  git -C "${root}" archive "${rev}" api operator workload setup.py pyproject.toml \
    | tar -x -C "${root}/${folder}"
  cp -r "${root}/benchmarks" "${root}/${folder}/benchmarks"
  rm -rf "${root}/${folder}"/benchmarks/*/results
  echo "${folder} ${rev} $(bash "${root}/benchmarks/tree_fingerprint.sh" --dir "${root}/${folder}")"
done
