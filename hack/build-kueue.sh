#!/usr/bin/env bash
# Builds the pinned Kueue controller manager (sigs.k8s.io/kueue/cmd/kueue) from its Go module
# through the Go module proxy, for the Kueue scenarios of the integration tier, and caches it
# under ~/.cache/distgnn. Its CRDs are read from the same module in the module cache. A warm
# run finds the stamp file and returns at once.
#
# Usage: hack/build-kueue.sh [--print-bin-dir|--print-module-dir|--check]
#   (no flag)           build what is missing, then print the bin dir on the last line
#   --print-bin-dir     print the bin dir the pinned version lives in; build nothing
#   --print-module-dir  print where the module's source (and its CRDs) lives; build nothing
#   --check             exit 0 if the binary is built and stamped, 1 otherwise
# Environment: DISTGNN_CACHE (default ~/.cache/distgnn), GOCACHE (default ~/.cache/go-build).
set -euo pipefail

KUEUE_VERSION=v0.17.0
MIN_GO_MINOR=25
MODULE=sigs.k8s.io/kueue

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_DIR="${DISTGNN_CACHE:-${HOME}/.cache/distgnn}"
LABEL="kueue"
# shellcheck source=hack/go-module-build.sh
source "${HACK_DIR}/go-module-build.sh"
go_module_cache "${CACHE_DIR}"

KEY="$(go_build_key "${BASH_SOURCE[0]}" "${HACK_DIR}/go-module-build.sh")"
BIN_DIR="${CACHE_DIR}/kueue/${KUEUE_VERSION}-${KEY}/bin"
STAMP="${BIN_DIR}/.complete"
MODULE_DIR="${GOMODCACHE}/${MODULE}@${KUEUE_VERSION}"

built() { [[ -f "${STAMP}" && -x "${BIN_DIR}/kueue" && -d "${MODULE_DIR}/config/components/crd/bases" ]]; }

case "${1:-}" in
  --print-bin-dir) echo "${BIN_DIR}"; exit 0 ;;
  --print-module-dir) echo "${MODULE_DIR}"; exit 0 ;;
  --check) built; exit $? ;;
  "") ;;
  *) echo "usage: $0 [--print-bin-dir|--print-module-dir|--check]" >&2; exit 2 ;;
esac

cached_exit
require_go "${MIN_GO_MINOR}" "Kueue is built from its Go module" "${MODULE}@${KUEUE_VERSION} needs"
go_env
build_lock "${CACHE_DIR}/kueue/.build.lock"
make_staging

echo "kueue: building ${MODULE}/cmd/kueue@${KUEUE_VERSION} (minutes when cold) ..." >&2
start=${SECONDS}
# The module's go.mod has no replace directives, so 'go install PKG@VERSION' builds it as
# released; the version is stamped the way Kueue's Makefile does.
go_install_staged "-s -w -X ${MODULE}/pkg/version.GitVersion=${KUEUE_VERSION}" \
  "${MODULE}/cmd/kueue@${KUEUE_VERSION}"
mv -f "${STAGING}/kueue" "${BIN_DIR}/kueue"
took=$((SECONDS - start))
record_build_time kueue "${took}"

# The CRDs come from the same module version (downloaded by the build above).
if [[ ! -d "${MODULE_DIR}/config/components/crd/bases" ]]; then
  echo "error: ${MODULE_DIR}/config/components/crd/bases is missing after the build" >&2
  exit 1
fi
{
  echo "kueue ${KUEUE_VERSION}"
  echo "go $(go env GOVERSION)"
} >"${STAMP}"
echo "kueue: built in ${took}s into ${BIN_DIR}" >&2
echo "${BIN_DIR}"
