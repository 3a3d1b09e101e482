//! The Kubernetes client: credentials (exec plugins, CA data), timeouts over a whole command,
//! partial and refused answers, and names the API server would refuse.

use serde_json::{Value, json};

use crate::status_api::cluster;
use crate::util::run;

const NOW: (&str, &str) = ("EDPM_AGENT_NOW", "2026-11-23T12:00:00Z");

fn report(api: &crate::util::fake_api::FakeApi, extra: &[&str]) -> crate::util::Output {
    let kc = api.kubeconfig();
    let mut args =
        vec!["--source", "kube", "--kubeconfig", kc.to_str().unwrap(), "status", "report", "--no-nova"];
    args.extend_from_slice(extra);
    run(&args, &[NOW])
}

/// A node whose key is a 70-character FQDN: the object name is shortened with a hash, and so
/// are its label values (the API server refuses a label value over 63 characters: 422); the
/// whole name stays in an annotation, on the status object and on the Lease.
#[test]
fn long_node_names_make_valid_labels_and_keep_the_whole_name() {
    let api = cluster();
    let mut set = api.object("OpenStackDataPlaneNodeSet", "edpm-compute-cell1").unwrap();
    let fqdn = format!("edpm-compute-{}.ctlplane.example.com", "r".repeat(35));
    assert!(fqdn.len() > 63);
    set["spec"]["nodes"][&fqdn] = json!({"hostName": fqdn, "ansible": {"ansibleHost": "192.168.122.110"}});
    api.put(set);
    let out = report(&api, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let with_node = |kind: &str| -> Vec<Value> {
        api.objects(kind)
            .into_iter()
            .filter(|o| o["metadata"]["annotations"]["agent.edpm.openstack.org/node"] == fqdn.as_str())
            .collect()
    };
    for kind in ["EDPMNodeStatus", "Lease"] {
        let objs = with_node(kind);
        assert_eq!(objs.len(), 1, "one {kind} keeps the whole name in its annotation");
        let label = objs[0]["metadata"]["labels"]["agent.edpm.openstack.org/node"].as_str().unwrap();
        assert!(label.len() <= 63 && label.starts_with("edpm-compute-r"), "{kind}: {label}");
    }
}
