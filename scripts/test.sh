#!/usr/bin/env bash
# The whole test suite, from a fresh clone on a fresh machine (Python >= 3.11 with pip,
# Go >= 1.26): a cached virtualenv with '.[dev]', the pinned control plane and Kueue built
# from Go modules (cached; built in the background while the rest is set up), Debian's
# prometheus package (apt-get, as root; the .debs cached), the static checks
# (scripts/lint.sh) and pytest on every tier but gpu (images only as root, see the pytest
# stage), in parallel worker processes (pytest-xdist), with the 25 slowest tests listed at the
# end. Extra arguments go to pytest. Warm runs skip the install and the build.
#
# Usage: scripts/test.sh [--fast] [pytest arguments ...]
#   --fast  the unit tier alone: api, operator, workload units, chart, CLI and repository
#           checks; no control plane, Kueue, Prometheus, processes or lint (under a minute)
#
# Environment: DISTGNN_CACHE (default ~/.cache/distgnn), DISTGNN_VENV (default
# $DISTGNN_CACHE/venv), PYTHON (interpreter that creates the venv, default python3),
# DISTGNN_TEST_WORKERS (pytest-xdist workers; default 3 for the whole suite, 2 for --fast;
# 0 runs in one process).
set -euo pipefail

fast=0
if [[ "${1:-}" == --fast ]]; then
  fast=1
  shift
fi
# The tiers that start no process of their own: every marker below is a slower tier.
SLOW_TIERS="slow or integration or e2e or gpu or benchmark or images or prometheus"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"
CACHE_DIR="${DISTGNN_CACHE:-${HOME}/.cache/distgnn}"
VENV="${DISTGNN_VENV:-${CACHE_DIR}/venv}"
BASE_PYTHON="${PYTHON:-python3}"
mkdir -p "${CACHE_DIR}"

declare -a STAGES=()
stage_start=0
begin() {
  echo
  echo "=== $1"
  stage_start=${SECONDS}
}
end() {
  local took=$((SECONDS - stage_start))
  STAGES+=("$(printf '%-22s %5ss  %s' "$1" "${took}" "$2")")
  echo "=== $1: $2 (${took}s)"
}
summary() {
  echo
  echo "=== stage timings"
  printf '  %s\n' "${STAGES[@]}"
}
trap summary EXIT

# pytest_stage NAME PYTEST-ARGS...: run pytest as a stage; false when it failed or ran no test
# (pytest's exit 5).
pytest_stage() {
  local name="$1" code=0
  shift
  "${PY}" -P -m pytest "$@" || code=$?
  case "${code}" in
    0) end "${name}" "passed" ;;
    5) end "${name}" "FAILED: no test ran (exit 5)" ;;
    *) end "${name}" "FAILED (exit ${code})" ;;
  esac
  ((code == 0))
}

# --- 0. the Go builds, in the background -------------------------------------------
# The pinned control plane and Kueue (cached; minutes cold) build while the virtualenv
# installs and lint runs; the pytest stage waits for them.
builds_pid=""
if ((!fast)); then
  builds_dir="$(mktemp -d "${TMPDIR:-/tmp}/distgnn-builds.XXXXXX")"
  builds_log="${builds_dir}/go-builds.log"
  (
    set -e
    start=${SECONDS}
    bash hack/build-controlplane.sh >"${builds_dir}/controlplane.out"
    cp_s=$((SECONDS - start))
    # The Kueue controller manager for the Kueue scenarios (tests/integration/test_kueue.py).
    bash hack/build-kueue.sh >"${builds_dir}/kueue.out"
    echo "control plane ${cp_s}s, kueue $((SECONDS - start - cp_s))s" >"${builds_dir}/go-builds.took"
  ) 2>"${builds_log}" &
  builds_pid=$!
fi

# --- 1. virtualenv ----------------------------------------------------------------
begin "virtualenv"
# One venv serves every clone: the dependencies are reinstalled when pyproject.toml or
# setup.py change, and the editable install is re-pointed at this clone when needed.
exec 8>"${CACHE_DIR}/venv.lock"
flock 8
if [[ ! -x "${VENV}/bin/python" ]]; then
  "${BASE_PYTHON}" -P -m venv "${VENV}"
  venv_state="created"
else
  venv_state="reused"
fi
PY="${VENV}/bin/python"
deps_key="$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)-$("${PY}" -c 'import sys; print(sys.version.split()[0])')"
deps_stamp="${VENV}/.distgnn-deps"
installed_root() {
  (cd / && "${PY}" -P -c 'import pathlib, distgnn_api; print(pathlib.Path(distgnn_api.__file__).resolve().parents[1])' 2>/dev/null) || true
}
if [[ "$(cat "${deps_stamp}" 2>/dev/null)" != "${deps_key}" ]]; then
  echo "installing '.[dev]' into ${VENV} (the first time downloads torch with CUDA: several GB)"
  "${PY}" -P -m pip install --disable-pip-version-check -q -e ".[dev]"
  echo "${deps_key}" >"${deps_stamp}"
  venv_state+=", dependencies installed"
elif [[ "$(installed_root)" != "${ROOT}" ]]; then
  "${PY}" -P -m pip install --disable-pip-version-check -q --no-deps -e .
  venv_state+=", editable install re-pointed here"
else
  venv_state+=", up to date"
fi
if [[ "$(installed_root)" != "${ROOT}" ]]; then
  echo "error: ${VENV} imports distgnn_api from '$(installed_root)', not from ${ROOT}" >&2
  exit 1
fi
flock -u 8
export PATH="${VENV}/bin:${PATH}"
end "virtualenv" "${venv_state}"

if ((fast)); then
  begin "pytest (unit tier)"
  pytest_stage "pytest (unit tier)" -m "not (${SLOW_TIERS})" -n "${DISTGNN_TEST_WORKERS:-2}" \
    --durations=10 "$@" || exit 1
  echo "test.sh --fast: the unit tier passed"
  exit 0
fi

# --- 3. prometheus ----------------------------------------------------------------
begin "prometheus"
# The prometheus tier runs Debian's prometheus package (prometheus and promtool). CI runs as
# root on Debian: install it once, keeping the downloaded .debs in the cache.
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  prom_state="$(prometheus --version 2>&1 | head -n 1)"
elif command -v apt-get >/dev/null && [[ "$(id -u)" == 0 ]]; then
  debs="${CACHE_DIR}/apt-archives"
  mkdir -p "${debs}/partial"
  apt_opts=(-o "Dir::Cache::Archives=${debs}" -o "APT::Sandbox::User=root" -qq)
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine has no package lists: update them only when the install needs them.
  if ! apt-get install -y --no-install-recommends "${apt_opts[@]}" prometheus >/dev/null 2>&1; then
    apt-get update "${apt_opts[@]}"
    apt-get install -y --no-install-recommends "${apt_opts[@]}" prometheus >/dev/null
  fi
  prom_state="installed: $(prometheus --version 2>&1 | head -n 1)"
else
  echo "error: prometheus and promtool are not on PATH; install Debian's prometheus package" >&2
  exit 1
fi
end "prometheus" "${prom_state}"

failed=()

# --- 4. static checks -------------------------------------------------------------
begin "lint"
if PYTHON="${PY}" bash scripts/lint.sh; then
  end "lint" "passed"
else
  end "lint" "FAILED"
  failed+=("lint")
fi

# --- 5. control plane and Kueue (built in the background) -------------------------
begin "control plane, kueue"
if ! wait "${builds_pid}"; then
  tail -n 40 "${builds_log}" >&2
  end "control plane, kueue" "FAILED (log: ${builds_log})"
  exit 1
fi
bin_dir="$(tail -n 1 "${builds_dir}/controlplane.out")"
kueue_dir="$(tail -n 1 "${builds_dir}/kueue.out")"
export PATH="${bin_dir}:${PATH}"
end "control plane, kueue" "built in the background ($(cat "${builds_dir}/go-builds.took")): ${bin_dir}, ${kueue_dir}"

# --- 6. tests ---------------------------------------------------------------------
begin "pytest"
# The images tier (tests/images) builds images with buildah, which needs root. As root it runs
# unless DISTGNN_IMAGES_TIER=0: the operator image always (its cold build takes minutes); a
# workload image when its archive is current for this source (a warm run only unpacks and
# runs it), or every one with DISTGNN_CI_WORKLOAD_IMAGES=1 (a cold workload build installs
# torch, GBs, and takes tens of minutes on 2 cores). DISTGNN_IMAGES names the images.
markers="not gpu"
if [[ -z "${DISTGNN_IMAGES_TIER:-}" && "$(id -u)" == 0 ]]; then
  images=(operator)
  while read -r name state; do
    if [[ "${state}" == current || "${DISTGNN_CI_WORKLOAD_IMAGES:-0}" == 1 ]]; then
      images+=("${name}")
    fi
  done < <(bash hack/build-images.sh --check workload-cpu workload-cuda || true)
  DISTGNN_IMAGES_TIER=1
  DISTGNN_IMAGES="${DISTGNN_IMAGES:-$(IFS=,; echo "${images[*]}")}"
  export DISTGNN_IMAGES
  echo "images tier: ${DISTGNN_IMAGES}"
fi
[[ "${DISTGNN_IMAGES_TIER:-0}" == 1 ]] || markers+=" and not images"
# Workers share nothing but the build caches: each starts its own control plane and Kueue
# when its first test needs them. --dist loadscope keeps a module's tests (and its
# module-scoped fixtures) on one worker. Three workers on 2 cores: 670 s of pytest against
# 700 s with two and 735 s with four (more CPU contention and one more control plane).
pytest_stage "pytest" -m "${markers}" -n "${DISTGNN_TEST_WORKERS:-3}" --dist loadscope \
  --durations=25 --cpu-durations=40 "$@" || failed+=("pytest")

if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: all stages passed"
