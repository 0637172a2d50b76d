#!/usr/bin/env bash
# Fetches Debian's docker-registry package (the CNCF distribution registry, a static Go binary)
# and unpacks its binary under ~/.cache/distgnn/registry, for the images tier's push test: a
# real OCI registry on loopback that `hack/build-images.sh --push` pushes to. The package is
# unpacked with dpkg-deb, not installed: no service, user or configuration on the machine. A
# warm run finds the binary and returns at once.
#
# Usage: hack/fetch-registry.sh [--print-bin|--check]
#   (no flag)     fetch what is missing, then print the binary's path on the last line
#   --print-bin   print where the pinned binary lives; fetch nothing
#   --check       exit 0 if the binary is there, 1 otherwise
# Environment: DISTGNN_CACHE (default ~/.cache/distgnn).
set -euo pipefail

PACKAGE=docker-registry
VERSION=2.8.2+ds1-1  # Debian bookworm's

CACHE_DIR="${DISTGNN_CACHE:-${HOME}/.cache/distgnn}"
DIR="${CACHE_DIR}/registry/${PACKAGE}_${VERSION}"
BIN="${DIR}/docker-registry"

fetched() { [[ -x "${BIN}" ]]; }

case "${1:-}" in
  --print-bin) echo "${BIN}"; exit 0 ;;
  --check) fetched; exit $? ;;
  "") ;;
  *) echo "usage: $0 [--print-bin|--check]" >&2; exit 2 ;;
esac

if fetched; then
  echo "registry: cached in ${BIN}" >&2
  echo "${BIN}"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "error: apt-get and dpkg-deb are needed to fetch Debian's ${PACKAGE} package" >&2
  exit 1
fi

mkdir -p "${CACHE_DIR}/registry"
exec 9>"${CACHE_DIR}/registry/.lock"
flock 9
fetched && { echo "${BIN}"; exit 0; }

work="$(mktemp -d "${CACHE_DIR}/registry/.fetch.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
apt_opts=(-qq -o "APT::Sandbox::User=root")
# A fresh machine has no package lists: update them (as root) only when the download needs it.
if ! (cd "${work}" && apt-get download "${apt_opts[@]}" "${PACKAGE}=${VERSION}") >/dev/null 2>&1; then
  if [[ "$(id -u)" != 0 ]]; then
    echo "error: apt-get download ${PACKAGE}=${VERSION} failed; as root this script updates the package lists first" >&2
    exit 1
  fi
  apt-get update "${apt_opts[@]}"
  (cd "${work}" && apt-get download "${apt_opts[@]}" "${PACKAGE}=${VERSION}") >/dev/null
fi
dpkg-deb -x "${work}/${PACKAGE}_"*.deb "${work}/root"
"${work}/root/usr/bin/docker-registry" --version >&2
mkdir -p "${DIR}"
cp "${work}/root/usr/bin/docker-registry" "${BIN}.part"
mv "${BIN}.part" "${BIN}"
echo "registry: fetched ${PACKAGE} ${VERSION} into ${BIN}" >&2
echo "${BIN}"
