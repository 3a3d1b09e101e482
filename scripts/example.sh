#!/usr/bin/env bash
# Runs the main job on the bundled example deployment (examples/), no cluster needed:
# validates the data-plane objects, prints the Ansible inventory, and explains a variable.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --quiet
bin=target/release/edpm-agent
export EDPM_AGENT_CONFIG=examples/edpm-agent.yaml
echo "== edpm-agent validate"
$bin validate
echo "== edpm-agent inventory --list (as Ansible runs it)"
$bin inventory --list --pretty
echo "== edpm-agent inventory export --format yaml (upstream's static layout)"
$bin inventory export --format yaml
echo "== edpm-agent inventory explain edpm-compute-1 ansible_port"
$bin inventory explain edpm-compute-1 ansible_port
echo "== the same hosts in the NodeSet model"
EDPM_AGENT_CONFIG=examples/edpm-agent-nodeset.yaml $bin inventory --list --pretty
