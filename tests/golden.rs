//! Golden inventories. Each case runs the binary and snapshots exit code, stdout and stderr,
//! so error texts are reviewed like any other output.

use crate::util::{have_shared, normalize, run, upstream};

fn snapshot(name: &str, args: &[&str]) {
    let out = run(args, &[]);
    let text = format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.code,
        normalize(&out.stdout),
        normalize(&out.stderr)
    );
    insta::with_settings!({ snapshot_path => "snapshots/golden", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!(name, text);
    });
}

const DP_605: &str = "openstack-k8s-operators__dataplane-operator@605f1a16/config/samples";
const DP_5EB: &str = "openstack-k8s-operators__dataplane-operator@5ebd8ad4/config/samples";
const DP_673: &str = "openstack-k8s-operators__dataplane-operator@673c766e/config/samples";
const OO_843: &str = "openstack-k8s-operators__openstack-operator@84322c77/config/samples";

#[test]
fn examples_seeds_model() {
    snapshot(
        "examples_seeds_list",
        &["--config", "examples/edpm-agent.yaml", "inventory", "--list", "--pretty"],
    );
    snapshot(
        "examples_seeds_yaml",
        &["--config", "examples/edpm-agent.yaml", "inventory", "export", "--format", "yaml"],
    );
    snapshot(
        "examples_seeds_ini",
        &["--config", "examples/edpm-agent.yaml", "inventory", "export", "--format", "ini"],
    );
    snapshot(
        "examples_seeds_explain",
        &[
            "--config",
            "examples/edpm-agent.yaml",
            "inventory",
            "explain",
            "edpm-compute-1",
            "--format",
            "json",
        ],
    );
    snapshot("examples_seeds_validate", &["--config", "examples/edpm-agent.yaml", "validate"]);
}

#[test]
fn examples_nodeset_model() {
    snapshot(
        "examples_nodeset_list",
        &["--config", "examples/edpm-agent-nodeset.yaml", "inventory", "--list", "--pretty"],
    );
    snapshot(
        "examples_nodeset_yaml",
        &["--config", "examples/edpm-agent-nodeset.yaml", "inventory", "export", "--format", "yaml"],
    );
    snapshot(
        "examples_nodeset_explain_text",
        &["--config", "examples/edpm-agent-nodeset.yaml", "inventory", "explain", "edpm-compute-5"],
    );
}

#[test]
fn upstream_old_model_role_and_nodes() {
    if !have_shared("upstream_old_model_role_and_nodes") {
        return;
    }
    let role = upstream(&format!("{DP_605}/dataplane_v1beta1_openstackdataplanerole_edpm_compute.yaml"));
    let n0 = upstream(&format!("{DP_605}/dataplane_v1beta1_openstackdataplanenode_edpm_compute_0.yaml"));
    let n1 = upstream(&format!("{DP_605}/dataplane_v1beta1_openstackdataplanenode_edpm_compute_1.yaml"));
    snapshot(
        "upstream_605f1a16_role_nodes",
        &["--source", &role, "--source", &n0, "--source", &n1, "inventory", "--list", "--pretty"],
    );
    snapshot(
        "upstream_605f1a16_role_nodes_validate",
        &["--source", &role, "--source", &n0, "--source", &n1, "validate"],
    );
}

#[test]
fn upstream_earliest_model_with_yaml_string_vars() {
    if !have_shared("upstream_earliest_model_with_yaml_string_vars") {
        return;
    }
    let role = upstream(&format!("{DP_5EB}/dataplane_v1beta1_openstackdataplanerole_edpm_compute.yaml"));
    let n0 = upstream(&format!("{DP_5EB}/dataplane_v1beta1_openstackdataplanenode_edpm_compute_0.yaml"));
    let n1 = upstream(&format!("{DP_5EB}/dataplane_v1beta1_openstackdataplanenode_edpm_compute_1.yaml"));
    snapshot(
        "upstream_5ebd8ad4_role_nodes",
        &["--source", &role, "--source", &n0, "--source", &n1, "inventory", "--list", "--pretty"],
    );
}

#[test]
fn upstream_dataplane_with_inline_roles_and_nodes() {
    if !have_shared("upstream_dataplane_with_inline_roles_and_nodes") {
        return;
    }
    let dp = upstream(&format!("{DP_605}/dataplane_v1beta1_openstackdataplane.yaml"));
    snapshot("upstream_605f1a16_dataplane", &["--source", &dp, "inventory", "export", "--format", "yaml"]);
}

#[test]
fn upstream_nodeset_samples() {
    if !have_shared("upstream_nodeset_samples") {
        return;
    }
    for name in [
        "nodeset",
        "nodeset_ceph",
        "nodeset_networker",
        "nodeset_sriov",
        "nodeset_ovs_dpdk",
        "nodeset_bgp",
        "nodeset_baremetal_with_ipam",
        "nodeset_customnetworks",
        "nodeset_swift",
    ] {
        let f = upstream(&format!("{DP_673}/dataplane_v1beta1_openstackdataplane{name}.yaml"));
        snapshot(
            &format!("upstream_673c766e_{name}"),
            &["--source", &f, "inventory", "export", "--format", "yaml"],
        );
    }
}

#[test]
fn upstream_head_nodeset_without_its_configmaps_fails_clearly() {
    if !have_shared("upstream_head_nodeset_without_its_configmaps_fails_clearly") {
        return;
    }
    let f = upstream(&format!("{OO_843}/dataplane_v1beta1_openstackdataplanenodeset.yaml"));
    snapshot("upstream_84322c77_nodeset_missing_configmap", &["--source", &f, "inventory", "--list"]);
    snapshot("upstream_84322c77_nodeset_validate", &["--source", &f, "validate"]);
}
