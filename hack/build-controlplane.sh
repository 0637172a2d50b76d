#!/usr/bin/env bash
# Builds the pinned control-plane binaries that the integration tests run (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm,
# kubeconform) from Go modules through the Go module proxy, and caches them under
# ~/.cache/distgnn. A warm run finds the stamp file and returns at once.
#
# Usage: hack/build-controlplane.sh [--print-bin-dir] [--check]
#   (no flag)        build what is missing, then print the bin dir on the last line
#   --print-bin-dir  print the bin dir the pinned versions live in; build nothing
#   --check          exit 0 if every binary is built and stamped, 1 otherwise
# Environment: DISTGNN_CACHE (default ~/.cache/distgnn), GOCACHE (default ~/.cache/go-build).
set -euo pipefail

KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
HELM_VERSION=v3.21.4
KUBECONFORM_VERSION=v0.7.0
# helm's default .Capabilities.KubeVersion follows its own client-go (v0.36.2 -> 1.36),
# the way helm's Makefile stamps it.
HELM_K8S_MAJOR=1
HELM_K8S_MINOR=36
MIN_GO_MINOR=26
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm kubeconform)

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_DIR="${DISTGNN_CACHE:-${HOME}/.cache/distgnn}"
LABEL="control plane"
# shellcheck source=hack/go-module-build.sh
source "${HACK_DIR}/go-module-build.sh"
go_module_cache "${CACHE_DIR}"

# The bin dir is keyed on everything that decides the binaries' content, so changing a
# pin (or this script) builds into a fresh dir and never mixes versions.
BIN_DIR="${CACHE_DIR}/controlplane/kube-${KUBE_VERSION}-$(go_build_key "${BASH_SOURCE[0]}" \
  "${HACK_DIR}/go-module-build.sh" \
  "${HACK_DIR}/controlplane/kube/go.mod" "${HACK_DIR}/controlplane/kube/go.sum" \
  "${HACK_DIR}/controlplane/kube/tools.go" \
  "${HACK_DIR}/controlplane/etcd/go.mod" "${HACK_DIR}/controlplane/etcd/go.sum" \
  "${HACK_DIR}/controlplane/etcd/tools.go")/bin"
STAMP="${BIN_DIR}/.complete"

built() {
  [[ -f "${STAMP}" ]] || return 1
  local c
  for c in "${COMPONENTS[@]}"; do [[ -x "${BIN_DIR}/${c}" ]] || return 1; done
}

case "${1:-}" in
  --print-bin-dir) echo "${BIN_DIR}"; exit 0 ;;
  --check) built; exit $? ;;
  "") ;;
  *) echo "usage: $0 [--print-bin-dir|--check]" >&2; exit 2 ;;
esac

cached_exit
require_go "${MIN_GO_MINOR}" "the control plane is built from Go modules" "the pinned modules need"
go_env
export GOFLAGS="-buildvcs=false -trimpath -mod=readonly"
build_lock "${CACHE_DIR}/controlplane/.build.lock"
make_staging

# build NAME CMD... runs CMD (which writes ${STAGING}/NAME) unless NAME is already
# built, then moves the binary into place and records the wall time.
build() {
  local name="$1"
  shift
  if [[ -x "${BIN_DIR}/${name}" ]]; then
    echo "control plane: ${name} already built" >&2
    return
  fi
  echo "control plane: building ${name} ..." >&2
  local start=${SECONDS}
  "$@"
  mv -f "${STAGING}/${name}" "${BIN_DIR}/${name}"
  local took=$((SECONDS - start))
  record_build_time "${name}" "${took}"
  echo "control plane: built ${name} in ${took}s" >&2
}

kube_ldflags() {
  local minor="${KUBE_VERSION#v1.}"
  minor="${minor%%.*}"
  local flags="-s -w" pkg
  # kubectl reports its client version from client-go, the servers from component-base.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
  echo "${flags}"
}

kube_build() {
  (cd "${HACK_DIR}/controlplane/kube" &&
    go build -ldflags "$(kube_ldflags)" -o "${STAGING}/$1" "k8s.io/kubernetes/cmd/$1")
}

etcd_build() {
  (cd "${HACK_DIR}/controlplane/etcd" &&
    go build -ldflags "-s -w" -o "${STAGING}/etcd" go.etcd.io/etcd/server/v3)
}

total_start=${SECONDS}
build etcd etcd_build
build kube-apiserver kube_build kube-apiserver
build kube-controller-manager kube_build kube-controller-manager
build kube-scheduler kube_build kube-scheduler
build kubectl kube_build kubectl
build kwok go_install_staged "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
build helm go_install_staged "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} \
-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=${HELM_K8S_MAJOR} \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${HELM_K8S_MINOR} \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=${HELM_K8S_MAJOR} \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${HELM_K8S_MINOR}" \
  "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
build kubeconform go_install_staged "-s -w -X main.version=${KUBECONFORM_VERSION}" \
  "github.com/yannh/kubeconform/cmd/kubeconform@${KUBECONFORM_VERSION}"

# Smoke-check that each binary runs and carries the pinned version before stamping.
check_version() {
  local name="$1" want="$2"
  shift 2
  local got
  if ! got="$("${BIN_DIR}/${name}" "$@" 2>&1)" || [[ "${got}" != *"${want}"* ]]; then
    echo "error: ${BIN_DIR}/${name} $* printed '${got}', expected it to contain '${want}'" >&2
    rm -f "${BIN_DIR}/${name}"
    exit 1
  fi
}
check_version etcd "${ETCD_VERSION#v}" --version
check_version kube-apiserver "${KUBE_VERSION}" --version
check_version kube-controller-manager "${KUBE_VERSION}" --version
check_version kube-scheduler "${KUBE_VERSION}" --version
check_version kubectl "${KUBE_VERSION}" version --client
check_version kwok "${KWOK_VERSION#v}" --version
check_version helm "${HELM_VERSION}" version --short
check_version kubeconform "${KUBECONFORM_VERSION}" -v

{
  echo "kube ${KUBE_VERSION}"
  echo "etcd ${ETCD_VERSION}"
  echo "kwok ${KWOK_VERSION}"
  echo "helm ${HELM_VERSION}"
  echo "kubeconform ${KUBECONFORM_VERSION}"
  echo "go $(go env GOVERSION)"
} >"${STAMP}"
echo "control plane: ready in ${BIN_DIR} ($((SECONDS - total_start))s)" >&2
echo "${BIN_DIR}"
