#!/usr/bin/env bash
# The test command: sets up what the tests need (Rust dependencies, the Python venv), checks
# formatting and lints, and runs every test (unit, golden, CLI, Ansible, the fake and the real
# API server, the real parts).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
# Debian packages the tests use: rpmbuild for the RPM spec, ssh for an unreachable host,
# systemd-analyze to verify the node agent's unit.
missing=()
command -v rpmbuild >/dev/null || missing+=(rpm)
command -v ssh >/dev/null || missing+=(openssh-client)
command -v systemd-analyze >/dev/null || missing+=(systemd)
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
fi
# A real Kubernetes API server (tests/real_api.rs): kube-apiserver, etcd and kubectl built with
# Go from tests/apiserver/ once, cached. In CI a host that cannot build them fails the run;
# elsewhere those tests skip with a notice.
if ! bash scripts/apiserver.sh; then
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "test.sh: no real API server; the real-API tests will skip" >&2
fi
# Real podman and a real systemd (tests/real_systemd.rs). In CI a host that cannot run them
# fails the run; elsewhere those tests skip with a notice.
if ! bash scripts/real-parts.sh; then
  if [ -n "${CI:-}" ]; then exit 1; fi
  echo "test.sh: no container environment; the real-parts tests will skip" >&2
fi
export EDPM_AGENT_TEST_VENV="$PWD/.venv"
echo "test.sh: building and testing the workspace into target/ (several GB on a first run)"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Most integration tests wait on what they start (ansible-playbook, kube-apiserver, podman, a
# controller's debounce) more than they compute: on 2 cores, four at a time ran the integration
# tests in 383 s where two (libtest's default here) took 558 s (2026-11-29). A caller's
# RUST_TEST_THREADS wins; machines with 4 cores or more keep libtest's default.
if [ -z "${RUST_TEST_THREADS:-}" ] && [ "$(nproc)" -lt 4 ]; then
  export RUST_TEST_THREADS=4
fi
cargo test --workspace --locked
