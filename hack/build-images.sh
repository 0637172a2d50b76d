#!/usr/bin/env bash
# Builds the distgnn images from docker/*.Dockerfile with buildah (no daemon: chroot isolation,
# vfs storage, as root) and writes each as an OCI archive under ~/.cache/distgnn/images.
#
# Usage: hack/build-images.sh [--push|--check|--print-references|--print-build-args] [operator|workload-cpu|workload-cuda ...]
#   (no name)           build all three images
#   --push              also copy each archive to its registry reference (skopeo copy; log in
#                       first with `skopeo login`) and print the pushed digest
#   --check             say of each image whether its archive is current; exit 1 if one is
#                       not; build nothing
#   --print-references  print each image's name and reference; build nothing
#   --print-build-args  print each image's name, reference, Dockerfile and build arguments as
#                       this run would build it (`docker build` takes the same); build nothing
#
# The images are tagged ${DISTGNN_REGISTRY}/operator:${VERSION}, .../workload:${VERSION}-cpu and
# .../workload:${VERSION}-cuda: the references the chart and the DistGNNJob defaults name. The
# registry is where an image goes, not what it is: an archive built for one registry is pushed
# to another (DISTGNN_REGISTRY=... --push) without a rebuild.
#
# Bases: where a registry answers, the Dockerfiles' own bases (python:3.11-slim-bookworm and
# the pytorch/pytorch CUDA runtime, fully qualified: docker.io/...). Where none does, a Debian
# bookworm base with python3 and pip, assembled here by mmdebstrap from Debian's packages. On
# that path the Python wheels are downloaded once into a wheelhouse that the builds install from.
#
# Package indexes: this script names none. Debian's packages come from this machine's apt
# sources (the entries for bookworm in /etc/apt/sources.list and /etc/apt/sources.list.d), or
# from DISTGNN_DEBIAN_SOURCES (a mirror URI or a sources file). Python packages come from this
# machine's pip configuration (index-url and extra-index-url, as `pip config` and PIP_* show
# them), and torch from the index in TORCH_INDEX_URL_CPU / TORCH_INDEX_URL_CUDA when one is set
# and answers (PyTorch's CPU-only or CUDA index; unset, torch comes from the configured index,
# whose Linux torch may be a CUDA build).
#
# Caching: the base's root filesystem (keyed on its package list and sources), the wheelhouse
# (keyed on pyproject.toml and the indexes) and a content key per image (Dockerfile, build
# context, build arguments, base): an image whose key is unchanged is not rebuilt.
#
# Environment: DISTGNN_CACHE (default ~/.cache/distgnn), DISTGNN_REGISTRY (default
# ghcr.io/distgnn), DISTGNN_IMAGE_VERSION (default the chart's appVersion), DISTGNN_BASES
# (auto|public|local, default auto), DISTGNN_DEBIAN_SOURCES, TORCH_INDEX_URL_CPU,
# TORCH_INDEX_URL_CUDA (no defaults: the workload images' TORCH_INDEX_URL build argument);
# DISTGNN_PUSH_TLS_VERIFY (true|false, default
# true): false lets --push use a registry that speaks plain HTTP or has a self-signed
# certificate (skopeo copy --dest-tls-verify=false), such as a test registry on localhost.
set -euo pipefail
# One compound command: bash reads the whole file before running it, so editing the file
# during a build is safe.
{

cd "$(dirname "${BASH_SOURCE[0]}")/.."
CACHE_DIR="${DISTGNN_CACHE:-${HOME}/.cache/distgnn}"
IMAGES_DIR="${CACHE_DIR}/images"
DEFAULT_REGISTRY="ghcr.io/distgnn"
REGISTRY="${DISTGNN_REGISTRY:-${DEFAULT_REGISTRY}}"
VERSION="${DISTGNN_IMAGE_VERSION:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/distgnn/Chart.yaml)}"
BASES="${DISTGNN_BASES:-auto}"
PUSH_TLS_VERIFY="${DISTGNN_PUSH_TLS_VERIFY:-true}"
# Fully qualified: buildah resolves a short name only through registries.conf, and Debian's
# defines an alias for python but none for pytorch/pytorch and no search registries.
PUBLIC_PYTHON_BASE="docker.io/library/python:3.11-slim-bookworm"
PUBLIC_CUDA_BASE="docker.io/pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
TORCH_CPU="${TORCH_INDEX_URL_CPU:-}"
TORCH_CUDA="${TORCH_INDEX_URL_CUDA:-}"
DEBIAN_SOURCES="${DISTGNN_DEBIAN_SOURCES:-}"
# The local base: what python:3.11-slim-bookworm offers (python, pip, useradd, libstdc++ that
# manylinux wheels such as numpy and torch link against), from Debian.
BASE_PACKAGES="python3,python3-pip,python-is-python3,ca-certificates,passwd,libstdc++6"

ALL=(operator workload-cpu workload-cuda)

log() { echo "build-images: $*" >&2; }

# reference NAME [REGISTRY]
reference() {
  local registry="${2:-${REGISTRY}}"
  case "$1" in
    operator) echo "${registry}/operator:${VERSION}" ;;
    workload-cpu) echo "${registry}/workload:${VERSION}-cpu" ;;
    workload-cuda) echo "${registry}/workload:${VERSION}-cuda" ;;
  esac
}

push=0
check=0
print_args=0
names=()
for arg in "$@"; do
  case "${arg}" in
    --push) push=1 ;;
    --check) check=1 ;;
    --print-build-args) print_args=1 check=1 ;;  # like --check: installs and builds nothing
    --print-references)
      for name in "${ALL[@]}"; do echo "${name} $(reference "${name}")"; done
      exit 0 ;;
    operator|workload-cpu|workload-cuda) names+=("${arg}") ;;
    *) echo "usage: $0 [--push|--check|--print-references|--print-build-args] [operator|workload-cpu|workload-cuda ...]" >&2
       exit 2 ;;
  esac
done
((${#names[@]})) || names=("${ALL[@]}")
case "${BASES}" in auto|public|local) ;; *)
  echo "error: DISTGNN_BASES=${BASES}: use auto, public or local" >&2; exit 2 ;;
esac
case "${PUSH_TLS_VERIFY}" in true|false) ;; *)
  echo "error: DISTGNN_PUSH_TLS_VERIFY=${PUSH_TLS_VERIFY}: use true or false" >&2; exit 2 ;;
esac

# --- tools: Debian's buildah, skopeo, mmdebstrap (as root; the .debs cached) -------------
need=()
for tool in buildah skopeo umoci mmdebstrap; do command -v "${tool}" >/dev/null || need+=("${tool}"); done
if ((${#need[@]} && ! check)); then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "error: ${need[*]} missing; install Debian's buildah, skopeo, umoci and mmdebstrap packages" >&2
    exit 1
  fi
  debs="${CACHE_DIR}/apt-archives"
  mkdir -p "${debs}/partial"
  apt_opts=(-o "Dir::Cache::Archives=${debs}" -o "APT::Sandbox::User=root" -qq)
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${apt_opts[@]}" "${need[@]}" >/dev/null 2>&1; then
    apt-get update "${apt_opts[@]}"
    apt-get install -y --no-install-recommends "${apt_opts[@]}" "${need[@]}" >/dev/null
  fi
fi

mkdir -p "${IMAGES_DIR}"
if ((! check)); then
  exec 9>"${IMAGES_DIR}/.lock"
  flock 9
fi
# A storage of this script's own: vfs needs no kernel overlay support.
BUILDAH=(buildah --root "${IMAGES_DIR}/storage" --runroot "${IMAGES_DIR}/run" --storage-driver vfs)
export BUILDAH_ISOLATION=chroot

reachable_registry() {
  if command -v skopeo >/dev/null; then
    timeout 60 skopeo inspect --retry-times 0 --raw \
      "docker://${PUBLIC_PYTHON_BASE}" >/dev/null 2>&1
  else
    [[ "$(curl -s -o /dev/null --max-time 20 -w '%{http_code}' https://registry-1.docker.io/v2/)" != 000 ]]
  fi
}
reachable_index() {
  curl -fsS --max-time 20 -o /dev/null "$1/torch/" 2>/dev/null
}

if [[ "${BASES}" == auto ]]; then
  if reachable_registry; then BASES=public; else BASES=local; fi
fi

# --- the local Debian base ---------------------------------------------------------------
# The apt sources of the base: DISTGNN_DEBIAN_SOURCES (a mirror URI, or a file in sources.list
# or deb822 form), else this machine's own entries for bookworm. Prints a file for mmdebstrap.
debian_sources() {
  local out="${IMAGES_DIR}/base-sources.list"
  if [[ -f "${DEBIAN_SOURCES}" ]]; then
    cp "${DEBIAN_SOURCES}" "${out}"
  elif [[ -n "${DEBIAN_SOURCES}" ]]; then
    printf 'deb %s bookworm main\n' "${DEBIAN_SOURCES}" >"${out}"
  else
    python3 -P - >"${out}" <<'EOF2'
import glob, re
entries = []
def add(types, uris, suites, components, signed_by):
    for uri in uris:
        for suite in suites:
            if "deb" in types and re.fullmatch(r"bookworm(-updates|-security)?", suite):
                option = f"[signed-by={signed_by}] " if signed_by else ""
                entries.append(f"deb {option}{uri} {suite} {' '.join(components) or 'main'}")
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
        if len(words) >= 3:
            add([words[0]], [words[1]], [words[2]], words[3:], "")
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1].isspace() and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no":
            continue
        add(fields.get("types", "").split(), fields.get("uris", "").split(),
            fields.get("suites", "").split(), fields.get("components", "").split(),
            fields.get("signed-by", "") if fields.get("signed-by", "").startswith("/") else "")
print("\n".join(entries))
EOF2
  fi
  if ! grep -q '[^[:space:]]' "${out}"; then
    echo "error: this machine's apt sources have no entry for Debian bookworm; set" \
      "DISTGNN_DEBIAN_SOURCES to a Debian mirror's URI or to a sources file" >&2
    exit 1
  fi
  echo "${out}"
}

local_base_ref() {
  local key
  key="$(printf '%s\n' "${BASE_PACKAGES}" "$(cat "${BASE_SOURCES}")" "$(sed -n '/^mmdebstrap_base()/,/^}/p' "${BASH_SOURCE[0]}")" \
    | sha256sum | cut -c1-12)"
  echo "localhost/distgnn-base:bookworm-${key}"
}

local_base() {
  local ref tarball ctr
  ref="$(local_base_ref)"
  tarball="${IMAGES_DIR}/base-bookworm-${ref##*-}.tar"
  if [[ ! -s "${tarball}" ]]; then
    log "assembling the Debian bookworm base with mmdebstrap (${BASE_PACKAGES})"
    rm -rf "${IMAGES_DIR}"/base-bookworm-*.tar
    mmdebstrap_base "${tarball}.part"
    mv "${tarball}.part" "${tarball}"
  fi
  if ! "${BUILDAH[@]}" inspect --type image "${ref}" >/dev/null 2>&1; then
    log "importing ${tarball} as ${ref}"
    "${BUILDAH[@]}" rmi --all >/dev/null 2>&1 || true  # an older base
    ctr="$("${BUILDAH[@]}" from --pull-never scratch)"
    "${BUILDAH[@]}" add "${ctr}" "${tarball}" / >/dev/null
    "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env LANG=C.UTF-8 --cmd '["python3"]' "${ctr}"
    "${BUILDAH[@]}" commit --rm --format oci "${ctr}" "${ref}" >/dev/null
  fi
}

mmdebstrap_base() {
  # essential + python3 and pip; no docs, man pages or locales; pip may install into the
  # system Python as it does in python:3.11-slim (no EXTERNALLY-MANAGED marker).
  # The merged-usr hook sets /usr up itself: no usrmerge package, which would pull in perl.
  mmdebstrap --quiet --variant=essential --format=tar --include="${BASE_PACKAGES}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/cache/debconf/*-old' \
    bookworm "$1" "${BASE_SOURCES}"
}

PIP_CONF=$'[global]\nno-index = true\nfind-links = /wheels\n'

# This machine's pip indexes (its configuration files and PIP_* variables), for the pip that
# runs inside the base: none named here, pip's own default where none is configured.
host_pip_indexes() {
  local option value
  for option in index-url extra-index-url trusted-host; do
    value="$(python3 -P -m pip config list 2>/dev/null \
      | sed -n "s/^[^.]*\.${option}='\(.*\)'$/\1/p" | tail -n 1)"
    case "${option}" in
      index-url) value="${PIP_INDEX_URL:-${value}}" ;;
      extra-index-url) value="${PIP_EXTRA_INDEX_URL:-${value}}" ;;
      trusted-host) value="${PIP_TRUSTED_HOST:-${value}}" ;;
    esac
    for word in ${value}; do printf -- '--%s\n%s\n' "${option}" "${word}"; done
  done
}

# --- the wheelhouse (local base only) ------------------------------------------------------
# Every requirement of the three images, downloaded once by the base's own pip so the wheels
# fit its Python; the builds then install from it with no index (an /etc/xdg/pip/pip.conf
# mounted only while RUN runs).
wheelhouse() {
  local base="$1" index="$2" extras="$3" key dir ctr req
  dir="${IMAGES_DIR}/wheels"
  req="${IMAGES_DIR}/wheel-req/${extras// /-}"
  mkdir -p "${dir}" "${req}" "${IMAGES_DIR}/pipconf"
  python3 -P - pyproject.toml ${extras} >"${req}/requirements.txt" <<'EOF2'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
build = tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]
extras = [req for extra in sys.argv[2:] for req in project["optional-dependencies"][extra]]
print("\n".join([*build, *project["dependencies"], *extras]))
EOF2
  printf '%s' "${PIP_CONF}" >"${IMAGES_DIR}/pipconf/pip.conf"
  local pip_indexes=()
  mapfile -t pip_indexes < <(host_pip_indexes)
  [[ -n "${index}" ]] && pip_indexes+=(--extra-index-url "${index}")
  key="$(cat "${req}/requirements.txt" <(echo "${pip_indexes[*]}" "${base}") | sha256sum | cut -c1-16)"
  if [[ -f "${dir}/.complete-${key}" ]]; then
    return
  fi
  log "downloading the wheels of ${extras} into ${dir} (indexes: ${pip_indexes[*]:-the default of pip})"
  # The download trusts this machine's CA bundle (a TLS-inspecting proxy's CA, if any).
  local certs=() cert="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
  [[ -f "${cert}" ]] && certs=(--cert /run/host-ca.crt)
  ctr="$("${BUILDAH[@]}" from --pull-never "${base}")"
  "${BUILDAH[@]}" run -v "${dir}:/wheels" -v "${req}:/req:ro" \
    ${certs[0]:+-v "${cert}:/run/host-ca.crt:ro"} "${ctr}" -- \
    pip download --disable-pip-version-check --quiet --dest /wheels "${certs[@]}" \
    "${pip_indexes[@]}" -r /req/requirements.txt
  "${BUILDAH[@]}" rm "${ctr}" >/dev/null
  touch "${dir}/.complete-${key}"
}

# --- one image -----------------------------------------------------------------------------
context_digest() {
  # What the .dockerignore lets into the context, by content.
  find pyproject.toml setup.py README.md api operator workload -type f \
    ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
}

uncompressed_bytes() {
  python3 -P - "$1" <<'EOF'
import json, sys, tarfile, zlib
with tarfile.open(sys.argv[1]) as archive:
    def blob(digest):
        return archive.extractfile("blobs/" + digest.replace(":", "/"))
    index = json.load(archive.extractfile("index.json"))
    manifest = json.load(blob(index["manifests"][0]["digest"]))
    total = 0
    for layer in manifest["layers"]:
        stream, inflate = blob(layer["digest"]), zlib.decompressobj(31)
        while chunk := stream.read(1 << 20):
            total += len(inflate.decompress(chunk))
    print(total)
EOF
}

# Sets ref, file, archive, key, args and volumes of one image.
image_plan() {
  local name="$1" index="" base=""
  ref="$(reference "${name}")"
  file="docker/${name}.Dockerfile"
  archive="${IMAGES_DIR}/${name}.oci.tar"
  args=()
  volumes=()
  case "${name}:${BASES}" in
    operator:public) args=(--build-arg "PYTHON_IMAGE=${PUBLIC_PYTHON_BASE}") ;;
    workload-cpu:public) args=(--build-arg "BASE_IMAGE=${PUBLIC_PYTHON_BASE}") ;;
    workload-cuda:public) args=(--build-arg "BASE_IMAGE=${PUBLIC_CUDA_BASE}") ;;
    operator:local) args=(--build-arg "PYTHON_IMAGE=${LOCAL_BASE}") ;;
    workload-*:local) args=(--build-arg "BASE_IMAGE=${LOCAL_BASE}") ;;
  esac
  case "${name}" in
    workload-cpu) index="${TORCH_CPU_RESOLVED}" ;;
    workload-cuda) index="${TORCH_CUDA_RESOLVED}" ;;
  esac
  [[ -n "${index}" ]] && args+=(--build-arg "TORCH_INDEX_URL=${index}")
  if [[ "${BASES}" == local ]]; then
    base="${LOCAL_BASE} ${PIP_CONF}"
    volumes=(-v "${IMAGES_DIR}/wheels:/wheels:ro" -v "${IMAGES_DIR}/pipconf:/etc/xdg/pip:ro")
  fi
  # What decides the image: its Dockerfile, build context, build arguments and base (on the
  # local path: the base's recipe and the wheelhouse's pip configuration), and its name and
  # version, not the registry it is pushed to (the name is taken under the default registry).
  key="$(cat "${file}" "${file}.dockerignore" \
    <(echo "$(reference "${name}" "${DEFAULT_REGISTRY}")" "${args[*]}" "${base}") \
    <(context_digest) | sha256sum | cut -c1-32)"
}

current() {
  [[ -s "${archive}" && "$(cat "${archive}.key" 2>/dev/null)" == "${key}" ]]
}

build_one() {
  local name="$1" ref file archive key args volumes
  image_plan "${name}"
  if current; then
    log "${name}: unchanged, ${archive}"
  else
    log "${name}: building ${ref} from ${file} (${args[*]})"
    rm -f "${archive}" "${archive}.key" "${archive}.size"
    # One layer on the base (--layers=false): vfs copies a whole root filesystem per layer.
    # The local base is only in this storage; a public one is pulled when missing.
    "${BUILDAH[@]}" build --isolation chroot --layers=false --format oci \
      "--pull=$([[ "${BASES}" == local ]] && echo never || echo false)" \
      --ignorefile "${file}.dockerignore" "${args[@]}" "${volumes[@]}" -f "${file}" -t "${ref}" .
    # gzip level 1: compressing GBs of torch at the default level takes minutes more.
    "${BUILDAH[@]}" push --quiet --compression-format gzip --compression-level 1 \
      "${ref}" "oci-archive:${archive}.part:${ref}"
    # The archive is the cache; the storage keeps only the bases.
    "${BUILDAH[@]}" rmi "${ref}" >/dev/null
    mv "${archive}.part" "${archive}"
    uncompressed_bytes "${archive}" >"${archive}.size"
    echo "${key}" >"${archive}.key"
  fi
  if ((push)); then
    log "${name}: pushing ${ref}"
    skopeo copy --quiet --dest-tls-verify="${PUSH_TLS_VERIFY}" --digestfile "${archive}.pushed" \
      "oci-archive:${archive}" "docker://${ref}"
    log "${name}: pushed ${ref}@$(cat "${archive}.pushed")"
    rm -f "${archive}.pushed"
  fi
  printf '%-14s %-46s %6s MB unpacked, %6s MB archive  %s\n' "${name}" "${ref}" \
    "$(($(cat "${archive}.size") / 1000000))" "$(($(stat -c %s "${archive}") / 1000000))" "${archive}"
}

main() {
  start=${SECONDS}
  TORCH_CPU_RESOLVED="${TORCH_CPU}"
  TORCH_CUDA_RESOLVED="${TORCH_CUDA}"
  LOCAL_BASE=""
  if [[ "${BASES}" == local ]]; then
    BASE_SOURCES="$(debian_sources)"
    LOCAL_BASE="$(local_base_ref)"
    # A torch index that does not answer is dropped: torch then comes from pip's own indexes.
    [[ -z "${TORCH_CPU}" ]] || reachable_index "${TORCH_CPU}" || TORCH_CPU_RESOLVED=""
    [[ -z "${TORCH_CUDA}" ]] || reachable_index "${TORCH_CUDA}" || TORCH_CUDA_RESOLVED=""
  fi
  if ((print_args)); then
    local ref file archive key args volumes
    for name in "${names[@]}"; do
      image_plan "${name}"
      echo "${name} ${ref} -f ${file} ${args[*]}"
    done
    return 0
  fi
  if ((check)); then
    local stale=0 ref file archive key args volumes
    for name in "${names[@]}"; do
      image_plan "${name}"
      if current; then echo "${name} current"; else echo "${name} stale"; stale=1; fi
    done
    return "${stale}"
  fi
  if [[ "${BASES}" == local ]]; then
    log "no registry answers: building on the local Debian bookworm base"
    local_base
    [[ "${TORCH_CPU_RESOLVED}" == "${TORCH_CPU}" ]] || log "${TORCH_CPU} does not answer: torch from pip's configured index"
    case " ${names[*]} " in
      *" workload-cpu "*) wheelhouse "${LOCAL_BASE}" "${TORCH_CPU_RESOLVED}" "operator workload" ;;
      *) wheelhouse "${LOCAL_BASE}" "${TORCH_CPU_RESOLVED}" "operator" ;;
    esac
    if [[ " ${names[*]} " == *" workload-cuda "* ]]; then
      wheelhouse "${LOCAL_BASE}" "${TORCH_CUDA_RESOLVED}" "operator workload"
    fi
  fi
  # Containers left by an interrupted build hold whole root filesystems under vfs.
  "${BUILDAH[@]}" rm --all >/dev/null 2>&1 || true

  echo "image          reference                                      size"
  for name in "${names[@]}"; do
    build_one "${name}"
  done
  log "done in $((SECONDS - start))s"
}

main
exit
}
