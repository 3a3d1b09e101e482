//! The one integration-test binary. Each module covers one area.

#![allow(unreachable_pub, reason = "test helpers are shared between modules of one binary")]
// Tests make their fixtures with plain file calls, read the environment they run in, and
// print what they skip.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_macros,
    reason = "tests set up fixtures directly; the rules are for the product's code"
)]
// A scenario reads best told whole, setup, steps and assertions in one function.
#![allow(clippy::too_many_lines, reason = "a test is a scenario, told whole")]

// Helpers: running the built binary, locating fixtures and Ansible, the fake API server.
mod util;

// Command-line behaviour: exit codes, stderr discipline, one-line errors, the edpm-inventory name.
mod cli;

// Golden inventories for examples/ and the upstream samples in ../shared/reference/upstream.
mod golden;

// Real ansible-inventory and ansible-playbook runs against the script and the exports.
mod ansible;

// The kube source against an in-test fake API server.
mod kube;

// NovaComputeReady: the status commands against a fake Keystone and compute API.
mod nova;

// `status controller` against the fake API server's watches: scenarios with their exact writes.
mod controller;

// The oslo.config engine against the real oslo.config package (parse, layering, writer, merge).
mod oslo_diff;

// Manifests read as Kubernetes does: limits on hostile input, very large files and lists,
// octal modes through `stage`.
mod manifests;

// Hostile and faulty input, class by class: outputs and sources that are not regular files,
// encodings, unknown kinds, empty inventories, label selectors, JSON duplicate keys, error words.
mod hostile;

// ansibleLimit against ansible-core's own InventoryManager and ansible-inventory --limit.
mod limit_diff;

// The YAML reader against PyYAML's SafeLoader, with go-yaml v2's known differences listed.
mod yaml_diff;

// render and derive: golden rendered files, oslo reading them, error chains, server-side apply.
mod render;

// The Ansible roles in roles/, with real ansible-playbook into a temporary root.
mod roles;

// extraMounts propagation.
mod mounts;

// The guides' reason tables against condition::reasons.
mod reasons;

// Readiness: conformance with upstream's conditions, status goldens, report, wait, CRDs.
mod readiness;

// status report against the fake API server: SSA, status subresource, shared map-lists.
mod status_api;

// `kubectl edpm`: the binary as a kubectl plugin, through kubectl itself where it is installed.
mod kubectl_plugin;

// What each node runs and holds: a minor update in batches, a rotated Secret delivered to some nodes.
mod scenarios;

// The node agent: one check on a temporary root, the loop against the fake API server.
mod node_agent;

// The node agent under a real systemd (PID 1 in a podman container), with the shipped unit.
mod real_systemd;

// edpm-agent's images, built from source by scripts/image.sh, run as the Job and the
// Deployment run them.
mod real_images;

// The architecture's boundaries, checked on the source text.
mod layout;

// Huge input quoted in errors is cut to a readable length (oslo, manifests).
mod echoes;

// Staging into temporary roots: ownership, links, Ceph sanity, SIGKILL crash safety.
mod staging;

// `edpm-agent run` with real ansible-runner and ansible-playbook: per-host results, timeouts,
// SIGTERM, retries, bad input, the termination message under upstream's parsing rules, and
// the runner image's entrypoint.
mod runner;

// The RPM packages, built with rpmbuild from the spec.
mod packaging;

// Every cluster behaviour on a real kube-apiserver and etcd, built from Go modules
// (scripts/apiserver.sh): manifests, readiness, the controller, the node agent, /metrics, names.
mod real_api;

// The controller's manifests as kustomize renders them and the API server reads them; the
// alerts, runbooks and Grafana dashboard against a real scrape of the controller.
mod monitoring;
