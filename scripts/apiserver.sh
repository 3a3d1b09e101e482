#!/usr/bin/env bash
# The real Kubernetes API server under the tests (tests/real_api.rs): kube-apiserver, etcd and
# a kubectl of the same release, built from the Go module in tests/apiserver/ once, into a
# cache keyed by what went into them. Writes target/real-api.env, which the test kit reads
# (edpm_testkit::real_api); without it the real-API tests skip outside CI and fail in CI.
#
# Go is for this test harness only: the product is Rust, and nothing a user installs needs Go.
# Usage: scripts/apiserver.sh            build if needed, write target/real-api.env
#        scripts/apiserver.sh --print    print the cache directory and exit
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "apiserver: $*" >&2; exit 1; }
env_file=target/real-api.env
module=tests/apiserver

command -v go >/dev/null || fail "Go is not installed: the real-API tests build kube-apiserver and etcd with it (Go 1.24 or later, and the Go module proxy)"
go_version=$(go env GOVERSION)
kube_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v1\./ {print $2; exit}' "$module/go.mod")
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$module/go.mod")
[ -n "$kube_version" ] && [ -n "$etcd_version" ] || fail "$module/go.mod names no k8s.io/kubernetes or etcd version"
# The version the API server reports (/version, and the compatibility version it derives from
# it); a build outside Kubernetes' own tree reports v0.0.0-master without these stamps.
minor=$(echo "$kube_version" | cut -d. -f2)
stamp="k8s.io/component-base/version"
ldflags="-s -w -X $stamp.gitVersion=$kube_version -X $stamp.gitMajor=1 -X $stamp.gitMinor=$minor -X $stamp.gitTreeState=clean"
key=$({ cat "$module/go.mod" "$module/go.sum" "$module/tools.go"; echo "$go_version $ldflags"; } | sha256sum | cut -c1-12)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/edpm-agent/apiserver"
dir="$cache/$kube_version-$key"
if [ "${1:-}" = --print ]; then echo "$dir"; exit 0; fi
rm -f "$env_file"

if [ ! -x "$dir/bin/kube-apiserver" ] || [ ! -x "$dir/bin/etcd" ] || [ ! -x "$dir/bin/kubectl" ]; then
  echo "apiserver: building kube-apiserver $kube_version, etcd $etcd_version and kubectl $kube_version with $go_version into $dir (about 7 minutes and 1.8 GB of memory on 2 cores, once)"
  started=$(date +%s)
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  # Go's build cache for these three only, dropped afterwards: the binaries are the cache
  # (about 200 MB); the module downloads stay in Go's own module cache (about 700 MB).
  export GOCACHE="$work/gocache" GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0
  mkdir -p "$work/bin"
  (cd "$module" && go build -trimpath -ldflags "$ldflags" -o "$work/bin/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl &&
    go build -trimpath -ldflags "-s -w" -o "$work/bin/etcd" go.etcd.io/etcd/server/v3) \
    >"$work/build.log" 2>&1 || fail "go build failed: $(tail -5 "$work/build.log" | tr '\n' ' ')"
  for b in kube-apiserver etcd kubectl; do
    "$work/bin/$b" --version >/dev/null 2>&1 || "$work/bin/$b" version --client >/dev/null 2>&1 ||
      fail "the built $b does not run: $("$work/bin/$b" --version 2>&1 | tail -1)"
  done
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp" && mv "$work/bin" "$dir.tmp/bin" && rm -rf "$dir" && mv "$dir.tmp" "$dir"
  echo "apiserver: built in $(( $(date +%s) - started )) s"
  # Builds of earlier keys only take space.
  find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$(basename "$dir")" ! -name 'build.*' -exec rm -rf {} + 2>/dev/null || true
fi
mkdir -p target
cat >"$env_file" <<ENV
EDPM_REAL_KUBE_APISERVER=$dir/bin/kube-apiserver
EDPM_REAL_ETCD=$dir/bin/etcd
EDPM_REAL_KUBECTL=$dir/bin/kubectl
EDPM_REAL_KUBE_VERSION=$kube_version
ENV
echo "apiserver: kube-apiserver $kube_version and etcd $etcd_version from $dir"
