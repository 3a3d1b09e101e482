//! Test harnesses shared by edpm-agent's integration tests (`tests/`) and its benchmarks
//! (`edpm-bench`): one implementation of the fake Kubernetes API server, so the benchmark
//! measures against exactly the semantics the tests enforce; a fake Keystone + Nova compute API
//! (`fake_nova`), for the Nova client's tests and benchmark; a real API server (`real_api`:
//! kube-apiserver and etcd, built from Go modules), which proves what the fake can only
//! promise; one way to boot a real node (systemd and podman in a container); and building a workspace
//! binary from the test that runs it (`cargo`).

#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_macros,
    reason = "a test harness: it writes its kubeconfig and prints nothing the product relies on"
)]

pub mod cargo;
pub mod fake_api;
pub mod fake_nova;
pub mod http;
pub mod real_api;
pub mod real_node;
