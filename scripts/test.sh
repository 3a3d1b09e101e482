#!/usr/bin/env bash
# The test command: sets up what the tests need (Rust dependencies, the Python venv), checks
# formatting and lints, and runs every test (unit, golden, CLI, Ansible, fake API server).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
export EDPM_AGENT_TEST_VENV="$PWD/.venv"
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked
