#!/usr/bin/env bash
# Runs the main job on the bundled example deployment (examples/), no cluster needed:
# validates the data-plane objects, prints the Ansible inventory, explains a variable, renders
# the oslo.config files of every node, shows which extraMounts reach a service, stages a node's
# files under target/example-root, derives the NovaExternalCompute CRs, and runs a local playbook
# as the AnsibleEE job entrypoint would (needs the .venv of scripts/setup-venv.sh).
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
echo "== edpm-agent render --redact (oslo.config files for every node, secrets masked)"
$bin render --redact --node edpm-compute-1
echo "== edpm-agent render --out target/examples-rendered (written atomically, 0600 for secrets)"
$bin render --out target/examples-rendered
echo "== edpm-agent oslo get: what nova-compute on edpm-compute-1 will use"
$bin oslo get --config-dir target/examples-rendered/edpm-compute-1/nova DEFAULT cpu_allocation_ratio
echo "== edpm-agent mounts propagate --as Cinder CinderVolume ceph"
$bin mounts propagate --as Cinder CinderVolume ceph
echo "== edpm-agent mounts plan / stage for edpm-compute-0 under target/example-root"
mkdir -p target/example-root
$bin mounts plan --node edpm-compute-0 --root target/example-root
$bin stage --node edpm-compute-0 --root target/example-root
echo "== edpm-agent derive novaexternalcompute"
$bin derive novaexternalcompute
echo "== the same hosts in the NodeSet model"
EDPM_AGENT_CONFIG=examples/edpm-agent-nodeset.yaml $bin inventory --list --pretty
echo "== edpm-agent run: the AnsibleEE job entrypoint, offline, on a local playbook (examples/runner)"
rm -rf target/example-runner && cp -r examples/runner target/example-runner
export PATH="$PWD/.venv/bin:$PATH"
RUNNER_CMDLINE='-e fail_on=edpm-compute-1' EDPM_AGENT_CONFIG=examples/edpm-agent.yaml \
  $bin run --runner-dir target/example-runner --inventory-source sources || echo "(exit $?: edpm-compute-1 failed, as asked)"
cat target/example-runner/artifacts/edpm-agent/termination-log; echo
