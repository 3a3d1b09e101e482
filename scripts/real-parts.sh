#!/usr/bin/env bash
# The real-parts test environment: rootful podman set up for this kind of host, and, built
# without any registry, a Debian base image and a systemd image on it, cached as a tarball
# keyed by their recipe. Writes target/real-parts.env, which the real-parts tests read
# (tests/real_systemd.rs); without it they skip outside CI and fail in CI.
#
# Nothing system-wide changes but the Debian packages installed: podman's configuration is a
# private containers.conf under the cache directory, named by CONTAINERS_CONF in the env file.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/edpm-agent"
env_file=target/real-parts.env
rm -f "$env_file"
fail() { echo "real-parts: $*" >&2; exit 1; }

# Packages: podman with runc (crun cannot run on cgroup v1 hybrid hosts), its network stack,
# and debootstrap for the base image.
need=()
for p in podman runc netavark aardvark-dns iptables debootstrap debian-archive-keyring; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "real-parts: installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }; } ||
    fail "cannot install ${need[*]} from Debian's packages"
fi

# podman's settings for this host: runc, and both ulimits explicit within the hard limits
# (setting one leaves the other at 1048576, which runc cannot set; nproc above pid_max fails).
mkdir -p "$cache/podman"
nofile=$(ulimit -Hn)
if [ "$nofile" = unlimited ]; then nofile=65536; fi
nproc=$(ulimit -Hu)
if [ "$nproc" = unlimited ]; then nproc=32768; fi
for cap in "$(cat /proc/sys/kernel/pid_max)" 32768; do
  if [ "$nproc" -gt "$cap" ]; then nproc=$cap; fi
done
cat >"$cache/podman/containers.conf" <<CONF
[engine]
runtime = "runc"

[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
CONF
export CONTAINERS_CONF="$cache/podman/containers.conf"
podman info >/dev/null 2>&1 || fail "this host cannot run containers: $(podman info 2>&1 | tail -1)"

# The recipe: the base's debootstrap line and the systemd image's Containerfile (an EDPM node in
# small: systemd, rpm, and podman with runc for the service containers, which are busybox). Their hash
# names the images and the cache tarball, so a changed recipe builds anew.
# Debian's own mirror as apt is configured (one-line or deb822 sources), not a third party's.
mirror=$({ grep -rhoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true; } |
  awk '{print $2}' | grep -E '/debian/?$' | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
base_recipe="debootstrap --variant=minbase bookworm"
containerfile=$(cat <<'CF'
ARG BASE
FROM $BASE
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      systemd systemd-sysv dbus rpm podman runc conmon busybox-static && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && systemctl set-default multi-user.target \
 && systemctl mask getty.target console-getty.service systemd-logind.service systemd-udevd.service \
      systemd-udev-trigger.service systemd-remount-fs.service
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
CF
)
# A stand-in for the upstream runner image (a registry this host cannot reach): Python,
# ansible-core, ansible-runner and dumb-init at the versions the tests use, and ssh. The wheels
# are downloaded by the host's pip (its index and certificates) and installed offline.
runner_pins=$(grep -E '^(ansible-core|ansible-runner|dumb-init|PyYAML)==' .ci/requirements.txt | tr '\n' ' ')
runner_containerfile=$(cat <<CF
ARG BASE
FROM \$BASE
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \\
      python3 python3-venv openssh-client && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \\
 && python3 -m venv /opt/ansible
COPY wheels /tmp/wheels
RUN /opt/ansible/bin/pip install -q --no-cache-dir --disable-pip-version-check --no-index \\
      --find-links /tmp/wheels $runner_pins && rm -rf /tmp/wheels
# As the upstream image: /runner writable by the arbitrary UID Kubernetes runs it as (group 0).
RUN mkdir -p /runner && chgrp -R 0 /runner && chmod -R g+rwX /runner
ENV PATH=/opt/ansible/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CF
)
# The Rust builder for packaging/Containerfile where rust's image cannot be pulled: the Debian
# base with a C toolchain (ring's build), and the paths of the official rust image, where
# scripts/image.sh --host-toolchain mounts this host's toolchain and crate cache.
builder_containerfile=$(cat <<'CF'
ARG BASE
FROM $BASE
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      gcc libc6-dev && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
ENV RUSTUP_HOME=/usr/local/rustup CARGO_HOME=/usr/local/cargo PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CF
)
key=$(printf '%s\n%s\n%s\n%s\n' "$base_recipe" "$containerfile" "$runner_containerfile" "$builder_containerfile" | sha256sum | cut -c1-12)
base=localhost/edpm-debian:$key
systemd_image=localhost/edpm-systemd:$key
runner_base=localhost/edpm-runner-base:$key
builder=localhost/edpm-builder:$key
tarball="$cache/images/edpm-images-$key.tar.gz"

if ! podman image exists "$systemd_image" || ! podman image exists "$runner_base" || ! podman image exists "$base" ||
  ! podman image exists "$builder"; then
  if [ -f "$tarball" ]; then
    echo "real-parts: loading the cached images from $tarball"
    gunzip -c "$tarball" | podman load -q >/dev/null || fail "cannot load the cached images from $tarball"
  else
    echo "real-parts: building a Debian base, a systemd image, a runner base and a Rust builder in podman's storage (about 1.1 GB, 1-2 minutes), cached as $tarball (about 350 MB)"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    debootstrap --variant=minbase bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
      fail "debootstrap failed (see the last lines): $(tail -3 "$work/debootstrap.log" | tr '\n' ' ')"
    rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
    tar --numeric-owner -C "$work/root" -c . | podman import --change 'CMD ["/bin/bash"]' - "$base" >"$work/import.log" 2>&1 ||
      fail "cannot import the base image: $(tail -1 "$work/import.log")"
    printf '%s\n' "$containerfile" >"$work/Containerfile"
    podman build -q --build-arg "BASE=$base" -t "$systemd_image" -f "$work/Containerfile" "$work" >"$work/build.log" 2>&1 ||
      fail "cannot build the systemd image: $(tail -3 "$work/build.log" | tr '\n' ' ')"
    printf '%s\n' "$runner_containerfile" >"$work/Containerfile.runner"
    # shellcheck disable=SC2086
    python3 -m pip download -q -d "$work/wheels" --only-binary=:all: --python-version 3.11 \
      --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any $runner_pins \
      >"$work/pip.log" 2>&1 || fail "cannot download the runner's wheels: $(tail -1 "$work/pip.log")"
    podman build -q --build-arg "BASE=$base" -t "$runner_base" -f "$work/Containerfile.runner" "$work" >"$work/build-runner.log" 2>&1 ||
      fail "cannot build the runner base image: $(tail -3 "$work/build-runner.log" | tr '\n' ' ')"
    printf '%s\n' "$builder_containerfile" >"$work/Containerfile.builder"
    podman build -q --build-arg "BASE=$base" -t "$builder" -f "$work/Containerfile.builder" "$work" >"$work/build-builder.log" 2>&1 ||
      fail "cannot build the Rust builder image: $(tail -3 "$work/build-builder.log" | tr '\n' ' ')"
    mkdir -p "$(dirname "$tarball")"
    podman save -m "$base" "$systemd_image" "$runner_base" "$builder" | gzip -1 >"$tarball.tmp" && mv "$tarball.tmp" "$tarball"
  fi
fi
# Images and tarballs of earlier recipes only take space.
podman images --format '{{.Repository}}:{{.Tag}}' | grep -E '^localhost/edpm-(debian|systemd|runner-base|builder):' |
  grep -v ":$key\$" | xargs -r podman rmi -f >/dev/null 2>&1 || true
find "$cache/images" -name 'edpm-images-*.tar.gz' ! -name "edpm-images-$key.tar.gz" -delete 2>/dev/null || true
# edpm-agent's own images, built from this checkout's source as a user builds them
# (scripts/image.sh), on the local bases, by the local builder with this host's toolchain; the
# dev profile, whose build is a third of release's.
images=localhost/edpm-agent-ci:$key
bash scripts/image.sh build --profile dev --host-toolchain --builder "$builder" \
  --controller-base "$base" --runner-base "$runner_base" "$images" ||
  fail "scripts/image.sh could not build edpm-agent's images (see above)"
# The build stage's image (the builder with the binary) is kept by podman as a cache; the target
# directory is the cache that matters, so it goes (about 500 MB each run otherwise).
podman image prune -f >/dev/null 2>&1 || true
mkdir -p target
cat >"$env_file" <<ENV
CONTAINERS_CONF=$CONTAINERS_CONF
EDPM_REAL_SYSTEMD_IMAGE=$systemd_image
EDPM_REAL_RUNNER_BASE=$runner_base
EDPM_REAL_BASE=$base
EDPM_REAL_CONTROLLER_IMAGE=localhost/edpm-agent-ci/edpm-agent-controller:$key
EDPM_REAL_RUNNER_IMAGE=localhost/edpm-agent-ci/edpm-agent-runner:$key
ENV
echo "real-parts: podman $(podman --version | awk '{print $3}') with runc; image $systemd_image"
