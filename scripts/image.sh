#!/usr/bin/env bash
# Builds and pushes edpm-agent's images from source (packaging/Containerfile), with podman or
# docker, whichever is present (podman first):
#
#   scripts/image.sh build [OPTIONS] REGISTRY[:TAG]   # REGISTRY/edpm-agent-controller:TAG
#                                                     # REGISTRY/edpm-agent-runner:TAG
#   scripts/image.sh push REGISTRY[:TAG]
#
# TAG defaults to the version in Cargo.toml. Options (build):
#   --builder IMAGE           the Rust builder (default: the Containerfile's BUILDER_IMAGE)
#   --controller-base IMAGE   the controller's runtime base (default: ubi10/ubi-micro, pinned)
#   --runner-base IMAGE       the runner's base (default: upstream's openstack-ansibleee-runner)
#   --profile release|dev     the cargo profile (default release; CI builds dev, quicker)
#   --only controller|runner  one image only
#   --host-toolchain          (podman) mount this host's Rust toolchain (RUSTUP_HOME, CARGO_HOME/bin)
#                             and crate cache into a builder that has none: for a machine that
#                             cannot pull the default builder (docs/kubernetes.md)
#
# With podman, the build mounts a target directory kept under the cache directory
# (${XDG_CACHE_HOME:-~/.cache}/edpm-agent/image-target; emptied when it passes 4 GiB) and,
# without --host-toolchain, a crate cache beside it: a second build compiles only what changed.
# docker builds without them (docker build takes no volumes), from scratch each time.
set -euo pipefail
# This script's own path, read before the cd below (run as ./image.sh from scripts/, "$0" is
# relative to there).
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$self")/.."

usage() { sed -n '2,21p' "$self" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fail() { echo "image.sh: $*" >&2; exit 1; }

engine=${CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null; then engine=podman
  elif command -v docker >/dev/null; then engine=docker
  else fail "neither podman nor docker is installed; install one (or set CONTAINER_ENGINE)"; fi
fi

[ $# -ge 1 ] || usage
action=$1; shift
builder='' controller_base='' runner_base='' profile=release only='' host_toolchain=''
while [ $# -gt 1 ]; do
  case $1 in
    --builder) builder=$2; shift 2 ;;
    --controller-base) controller_base=$2; shift 2 ;;
    --runner-base) runner_base=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --host-toolchain) host_toolchain=1; shift ;;
    *) echo "image.sh: unknown option $1" >&2; usage ;;
  esac
done
[ $# -eq 1 ] || usage
target=$1
case $profile in release|dev) ;; *) fail "--profile $profile: give release or dev" ;; esac
case $only in ''|controller|runner) ;; *) fail "--only $only: give controller or runner" ;; esac

case $target in -*) fail "$target: give REGISTRY[:TAG] last, after the options" ;; esac
# REGISTRY[:TAG]: a colon after the last slash starts the tag; a registry alone with a port
# (`localhost:5000`, digits after the colon and no slash) keeps its port.
last=${target##*/}
if [[ $last == *:* ]] && ! [[ $target != */* && ${target##*:} =~ ^[0-9]+$ ]]; then
  registry=${target%:*}; tag=${target##*:}
else
  registry=$target
  tag=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
fi
[ -n "$registry" ] && [ -n "$tag" ] || fail "$target: give REGISTRY[:TAG], e.g. quay.io/example or registry.local:5000/edpm:1.0"
# An image reference as the container engines take it (distribution's reference grammar): a
# host (with a port) or a first path component, lower-case path components, and a tag of
# letters, digits, `_`, `.`, `-`. Anything else (`;`, spaces, `$(...)`, upper case in a path)
# would tag garbage or fail half-way, so it is refused before anything is built.
host='[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]+)?'
component='[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*'
if ! [[ $registry =~ ^($host|$component)(/$component)*$ ]] || (( ${#registry} > 200 )); then
  fail "$target: the repository part ($registry) is no image repository (give host[:port][/path] of lower-case letters, digits, '.', '_', '-'; e.g. quay.io/example)"
fi
[[ $tag =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] ||
  fail "$target: the tag $tag is no image tag (letters, digits, '_', '.', '-'; at most 128, not starting with '.' or '-')"
stages=(controller runner)
[ -z "$only" ] || stages=("$only")

case $action in
  push)
    for s in "${stages[@]}"; do
      echo "image.sh: pushing $registry/edpm-agent-$s:$tag"
      "$engine" push "$registry/edpm-agent-$s:$tag"
    done
    exit 0 ;;
  build) ;;
  *) usage ;;
esac

args=(build -f packaging/Containerfile --build-arg "CARGO_PROFILE=$profile")
[ -z "$builder" ] || args+=(--build-arg "BUILDER_IMAGE=$builder")
[ -z "$controller_base" ] || args+=(--build-arg "CONTROLLER_BASE_IMAGE=$controller_base")
[ -z "$runner_base" ] || args+=(--build-arg "RUNNER_BASE_IMAGE=$runner_base")
revision=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
args+=(--label "org.opencontainers.image.version=$tag" --label "org.opencontainers.image.revision=$revision")

if [ "$engine" = podman ]; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/edpm-agent"
  mkdir -p "$cache/image-target" "$cache/image-cargo-registry"
  # Bounded: cargo keeps every old build of what changed; past 4 GiB it starts afresh.
  used=$(du -sk "$cache/image-target" | cut -f1)
  if [ "$used" -gt $((4 * 1024 * 1024)) ]; then
    echo "image.sh: $cache/image-target holds $((used / 1024)) MiB; emptying it"
    rm -rf "$cache/image-target" && mkdir -p "$cache/image-target"
  fi
  args+=(-v "$cache/image-target:/src/target")
  if [ -n "$host_toolchain" ]; then
    rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
    cargo_home=${CARGO_HOME:-$HOME/.cargo}
    [ -d "$rustup_home/toolchains" ] && [ -x "$cargo_home/bin/cargo" ] ||
      fail "--host-toolchain: no rustup toolchain at $rustup_home or cargo at $cargo_home/bin (install Rust with rustup)"
    # Where the official rust images keep them (the local builder's ENV says the same).
    args+=(-v "$rustup_home:/usr/local/rustup:ro" -v "$cargo_home/bin:/usr/local/cargo/bin:ro"
      -v "$cargo_home/registry:/usr/local/cargo/registry")
  else
    args+=(-v "$cache/image-cargo-registry:/usr/local/cargo/registry")
  fi
  echo "image.sh: podman build, with the target directory $cache/image-target (at most 4 GiB)"
elif [ -n "$host_toolchain" ]; then
  fail "--host-toolchain needs podman (docker build mounts no volumes)"
fi

for s in "${stages[@]}"; do
  image="$registry/edpm-agent-$s:$tag"
  old=$("$engine" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
  echo "image.sh: building $image ($profile profile)"
  "$engine" "${args[@]}" --target "$s" -t "$image" . || fail "building $image failed (see above)"
  # The earlier build of this tag, now untagged, only takes space (kept if a container uses it).
  new=$("$engine" image inspect --format '{{.Id}}' "$image")
  if [ -n "$old" ] && [ "$old" != "$new" ]; then "$engine" rmi "$old" >/dev/null 2>&1 || true; fi
done
for s in "${stages[@]}"; do echo "image.sh: built $registry/edpm-agent-$s:$tag"; done
echo "image.sh: the controller's Deployment takes it from packaging/kubernetes/kustomization.yaml (images: newName $registry/edpm-agent-controller, newTag $tag)"
