#!/usr/bin/env bash
# Runs the main job on the bundled example deployment (examples/), no cluster needed: validates
# the data-plane objects, prints the Ansible inventory as Ansible reads it, explains a variable,
# renders the oslo.config files of every node, shows which extraMounts reach a service, stages
# one node's files under target/example-root, derives the NovaExternalCompute CRs, shows every
# node's phase -1/0/1 readiness (with Nova's own view of a compute, from a saved answer), and
# runs a local playbook as the AnsibleEE job entrypoint would.
# Ends with a summary of what was produced and where.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== building edpm-agent (release; the first build fetches and compiles the dependencies, about 10 minutes on 2 cores)"
cargo build --release --locked
echo "== setting up .venv (ansible-core, ansible-runner, oslo.config from PyPI; kept when current)"
bash scripts/setup-venv.sh
bin=target/release/edpm-agent
out=target/example
rm -rf "$out" target/example-root
mkdir -p "$out" target/example-root
# The seeds' Role/Node model; examples/edpm-agent-nodeset.yaml reads the NodeSet model, and
# `--source examples` reads both as one deployment.
export EDPM_AGENT_CONFIG=examples/edpm-agent.yaml
echo "== edpm-agent --source examples validate (both models: seven hosts)"
EDPM_AGENT_CONFIG= $bin --source examples validate
echo "== edpm-agent inventory --list (as Ansible runs it), written to $out/inventory.json"
$bin inventory --list --pretty >"$out/inventory.json"
python3 - "$out/inventory.json" <<'PY'
import json, sys
inv = json.load(open(sys.argv[1]))
for g, v in sorted(inv.items()):
    if g not in ("_meta", "all") and v.get("hosts"):
        print(f"   group {g}: {', '.join(v['hosts'])}")
PY
echo "== edpm-agent inventory export --format yaml (upstream's static layout), written to $out/inventory.yaml"
$bin inventory export --format yaml --output-file "$out/inventory.yaml"
echo "== edpm-agent inventory explain edpm-compute-1 ansible_port"
$bin inventory explain edpm-compute-1 ansible_port
echo "== edpm-agent render --redact --node edpm-compute-1 (what nova would read, secrets masked; first lines)"
$bin render --redact --node edpm-compute-1 --service nova | head -20
echo "== edpm-agent render --out $out/rendered (every node, written atomically, 0600 for secrets)"
$bin render --out "$out/rendered" >/dev/null
$bin render --out "$out/rendered" --check
echo "== edpm-agent oslo get: what nova-compute on edpm-compute-1 will use"
$bin oslo get --config-dir "$out/rendered/edpm-compute-1/nova" DEFAULT cpu_allocation_ratio
echo "== edpm-agent mounts propagate --as Cinder CinderVolume ceph (where each reaching volume comes from)"
$bin mounts propagate --as Cinder CinderVolume ceph | python3 -c "$(cat <<'PY'
import json, sys
for s in json.load(sys.stdin)["sources"]:
    print("   " + ", ".join(s["volumes"]) + " from " + s["from"])
PY
)"
echo "== edpm-agent mounts plan / stage for edpm-compute-0 under target/example-root"
$bin mounts plan --node edpm-compute-0 --root target/example-root
$bin stage --node edpm-compute-0 --root target/example-root >"$out/stage-report.json"
echo "== edpm-agent derive novaexternalcompute, written to $out/novaexternalcomputes.yaml"
$bin derive novaexternalcompute >"$out/novaexternalcomputes.yaml"
echo "== the NodeSet model (examples/nodeset) as Ansible sees it, written to $out/inventory-nodeset.json"
EDPM_AGENT_CONFIG=examples/edpm-agent-nodeset.yaml $bin inventory --list --pretty >"$out/inventory-nodeset.json"
echo "== edpm-agent --source examples status show (phase -1/0/1 readiness of every node, from examples/status)"
EDPM_AGENT_CONFIG= $bin --source examples status show
echo "== edpm-agent --source examples status explain edpm-compute-5 (why it is not ready, with the evidence)"
EDPM_AGENT_CONFIG= $bin --source examples status explain edpm-compute-5
echo "== edpm-agent --source examples status explain edpm-compute-3: NovaComputeReady, Nova's own view (saved answers in examples/status/nova-*.json)"
EDPM_AGENT_CONFIG= $bin --source examples status explain edpm-compute-3 | awk '/^NovaComputeReady/{p=1} /^Reconciling/{p=0} p'
echo "== edpm-agent --source examples status report --status-dir $out/status (the status objects it would apply)"
EDPM_AGENT_CONFIG= $bin --source examples status report --status-dir "$out/status"
echo "== edpm-agent run: the AnsibleEE job entrypoint, offline, on a local playbook (examples/runner)"
echo "   (asked to fail on edpm-compute-1, to show a per-host failure)"
rm -rf target/example-runner && cp -r examples/runner target/example-runner
PATH="$PWD/.venv/bin:$PATH" RUNNER_CMDLINE='-e fail_on=edpm-compute-1' \
  $bin run --runner-dir target/example-runner --inventory-source sources && rc=0 || rc=$?
echo "   exit $rc; termination message: $(cat target/example-runner/artifacts/edpm-agent/termination-log)"

echo
echo "== Summary"
echo "   inventory (seeds' model):   $out/inventory.json, $out/inventory.yaml"
echo "   inventory (NodeSet model):  $out/inventory-nodeset.json"
echo "   rendered config:            $out/rendered/<node>/<service>/ ($(find "$out/rendered" -type f | wc -l) files for $(ls "$out/rendered" | wc -l) nodes)"
echo "   staged node root:           target/example-root ($(find target/example-root -type f | wc -l) files for edpm-compute-0; report in $out/stage-report.json)"
echo "   NovaExternalComputes:       $out/novaexternalcomputes.yaml ($(grep -c '^kind: NovaExternalCompute' "$out/novaexternalcomputes.yaml") objects)"
echo "   readiness status objects:   $out/status/ ($(find "$out/status" -type f | wc -l) files)"
echo "   runner artifacts:           target/example-runner/artifacts/edpm-agent/ (edpm-summary.json, termination-log)"
