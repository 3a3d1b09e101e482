#!/usr/bin/env bash
# Installs edpm-agent, its edpm-inventory name (an Ansible dynamic inventory script) and its
# kubectl-edpm name (`kubectl edpm …`, a kubectl plugin), and the node agent's binary
# edpm-agent-node when it was built beside it.
#   PREFIX=/usr/local bash packaging/install.sh [path/to/edpm-agent]
# Installs a config file to /etc/edpm-agent/agent.yaml only when none exists.
set -euo pipefail
prefix=${PREFIX:-/usr/local}
bin=${1:-target/release/edpm-agent}
[ -x "$bin" ] || { echo "install.sh: $bin not found; run cargo build --release first" >&2; exit 1; }
install -D -m 0755 "$bin" "$prefix/bin/edpm-agent"
ln -sf edpm-agent "$prefix/bin/edpm-inventory"
ln -sf edpm-agent "$prefix/bin/kubectl-edpm"
# The node agent as it ships is built for size (cargo build --profile node -p edpm-node, in
# target/node); a node agent beside the binary is taken otherwise.
node="$(dirname "$bin")/../node/edpm-agent-node"
[ -x "$node" ] || node="$(dirname "$bin")/edpm-agent-node"
installed="$prefix/bin/edpm-agent, $prefix/bin/edpm-inventory, $prefix/bin/kubectl-edpm"
if [ -x "$node" ]; then
  install -D -m 0755 "$node" "$prefix/bin/edpm-agent-node"
  installed="$installed, $prefix/bin/edpm-agent-node"
fi
conf=${EDPM_AGENT_CONFIG_DIR:-/etc/edpm-agent}
if [ ! -e "$conf/agent.yaml" ]; then
  install -d -m 0755 "$conf"
  install -m 0644 "$(dirname "$0")/agent.yaml.example" "$conf/agent.yaml"
fi
echo "installed $installed"
