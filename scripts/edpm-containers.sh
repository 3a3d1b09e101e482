#!/bin/bash
# EDPM-like service containers on a node with real systemd and real podman: run inside the
# systemd container the real-parts tests and `edpm-bench node --real` boot (see
# scripts/real-parts.sh). Each container is what edpm_container_manage leaves on a compute:
# a podman container carrying its `config_hash` label, started by an `edpm_<name>.service`
# unit (`podman start`, conmon's pid file, Type=forking), and a quadlet file
# `/etc/containers/systemd/edpm_<name>.container` whose `# config_hash=` is what should run.
# Debian's podman 4.3 has no quadlet generator, so the quadlet file is only read, as the
# node agent reads it; the unit is the one edpm_container_manage writes.
#
# usage: edpm-containers.sh NAME:HEALTH[:HASH[:QUADLET_HASH]]...
#   HEALTH: pass (checked every 2 s, or every $EDPM_HEALTH_INTERVAL), fail (unhealthy after its first check), starting (failing
#   within an hour's start period, so never counted yet), none (no health check)
#   HASH: the label the container runs with (default h-NAME); QUADLET_HASH: the quadlet
#   file's (default HASH)
# Then every unit is started. The image is a busybox root imported once; its process ends on
# SIGTERM, as a service does, so a stopped unit is inactive rather than failed.
set -euo pipefail

if ! podman image exists localhost/busybox:edpm; then
  root=$(mktemp -d)
  mkdir -p "$root/bin"
  cp /bin/busybox "$root/bin/"
  for applet in sh sleep true false cat; do ln -s busybox "$root/bin/$applet"; done
  tar -C "$root" -c . | podman import -q - localhost/busybox:edpm >/dev/null
  rm -rf "$root"
fi
mkdir -p /etc/containers/systemd
units=()
for spec in "$@"; do
  IFS=: read -r name health hash quadlet <<<"$spec"
  hash=${hash:-h-$name}
  quadlet=${quadlet:-$hash}
  case "$health" in
    pass) check=(--health-cmd true --health-interval "${EDPM_HEALTH_INTERVAL:-2s}") ;;
    fail) check=(--health-cmd false --health-interval 1s --health-retries 1) ;;
    starting) check=(--health-cmd false --health-interval 2s --health-start-period 1h) ;;
    none) check=() ;;
    *) echo "edpm-containers: $spec: HEALTH is pass, fail, starting or none" >&2; exit 2 ;;
  esac
  podman create -q --name "$name" --network host --conmon-pidfile "/run/$name.pid" \
    --label "config_hash=$hash" "${check[@]}" localhost/busybox:edpm \
    sh -c 'trap "exit 0" TERM; while :; do sleep 1; done' >/dev/null
  cat >"/etc/systemd/system/edpm_$name.service" <<UNIT
[Unit]
Description=$name container
[Service]
Restart=always
ExecStart=/usr/bin/podman start $name
ExecReload=/usr/bin/podman kill --signal HUP $name
ExecStop=/usr/bin/podman stop -t 10 $name
KillMode=none
Type=forking
PIDFile=/run/$name.pid
[Install]
WantedBy=multi-user.target
UNIT
  printf '# config_hash=%s\n[Container]\nImage=localhost/busybox:edpm\nContainerName=%s\n' \
    "$quadlet" "$name" >"/etc/containers/systemd/edpm_$name.container"
  units+=("edpm_$name.service")
done
systemctl daemon-reload
systemctl start "${units[@]}"
