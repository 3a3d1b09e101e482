//! What an SRE deploys and watches: the kustomization as `kubectl kustomize` renders it (image,
//! probes, spread, PodDisruptionBudget, HTTPS metrics and who may read them), every manifest
//! under packaging/kubernetes read as the API server would (k8s-openapi's types for the
//! built-in kinds; a structural check of the Prometheus Operator's), and every PromQL
//! expression in the PrometheusRule and the Grafana dashboard naming only metrics a real
//! controller exports, each alert with a severity and a runbook section.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::util::repo;

// ---------------------------------------------------------------------------------------
// Reading the manifests
// ---------------------------------------------------------------------------------------

fn yaml_docs(text: &str, what: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    // A document of comments only reads as null.
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// Every `*.yaml` under `dir`, recursively, with its documents.
fn manifests(dir: &Path) -> Vec<(PathBuf, Vec<Value>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                let text = std::fs::read_to_string(&p).unwrap();
                let docs = yaml_docs(&text, &p.display().to_string());
                out.push((p, docs));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// kubectl, or `None` (skipped, with a notice) outside CI; in CI its absence fails.
fn kubectl() -> Option<&'static str> {
    let found =
        Command::new("kubectl").args(["version", "--client"]).output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "kubectl is missing in CI: the manifests must be rendered by kustomize"
        );
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED: kubectl not found (the kustomization is not rendered)");
        return None;
    }
    Some("kubectl")
}

/// `kubectl kustomize DIR`, its documents.
fn kustomize(kubectl: &str, dir: &Path) -> Vec<Value> {
    let out = Command::new(kubectl).arg("kustomize").arg(dir).output().unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_docs(&String::from_utf8(out.stdout).unwrap(), "kubectl kustomize")
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// The schema check
// ---------------------------------------------------------------------------------------

/// Where `want` (the manifest) and `got` (what the typed struct kept) differ: a field the
/// struct does not know is dropped, so it shows here as missing.
fn differences(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => differences(&p, wv, gv, out),
                    None => out.push(format!("{p}: not a field here (the schema drops it)")),
                }
            }
            for k in g.keys().filter(|k| !w.contains_key(*k)) {
                out.push(format!("{path}.{k}: added by the schema"));
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                differences(&format!("{path}[{i}]"), wv, gv, out);
            }
        }
        _ if want == got => {}
        // 0 and 0.0 are one JSON number (kustomize writes `minimum: 0.0` as 0).
        (Value::Number(w), Value::Number(g)) if w.as_f64() == g.as_f64() => {}
        _ => out.push(format!("{path}: {want} reads as {got}")),
    }
}

/// Reads `doc` as the typed `T` and writes it back: anything the type does not hold (a
/// misspelled or misplaced field) or cannot read (a string where a number goes) is an error.
fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<(), String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    differences("", doc, &back, &mut out);
    if out.is_empty() { Ok(()) } else { Err(out.join("; ")) }
}

/// `doc` against the schema of its kind: k8s-openapi's types for the built-in kinds shipped
/// here, a structural check for the Prometheus Operator's; any other kind is an error, so a
/// new kind gets a check before it ships.
fn check_manifest(doc: &Value) -> Result<(), String> {
    use k8s_openapi::api::{apps, core, networking, policy, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let kind = doc["kind"].as_str().ok_or("no kind")?;
    let api = doc["apiVersion"].as_str().ok_or("no apiVersion")?;
    match (api, kind) {
        ("apps/v1", "Deployment") => round_trip::<apps::v1::Deployment>(doc),
        ("v1", "Service") => round_trip::<core::v1::Service>(doc),
        ("v1", "ServiceAccount") => round_trip::<core::v1::ServiceAccount>(doc),
        ("v1", "Secret") => round_trip::<core::v1::Secret>(doc),
        ("v1", "ConfigMap") => round_trip::<core::v1::ConfigMap>(doc),
        ("v1", "Namespace") => round_trip::<core::v1::Namespace>(doc),
        ("rbac.authorization.k8s.io/v1", "Role") => round_trip::<rbac::v1::Role>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => round_trip::<rbac::v1::ClusterRole>(doc),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => round_trip::<rbac::v1::RoleBinding>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            round_trip::<rbac::v1::ClusterRoleBinding>(doc)
        }
        ("policy/v1", "PodDisruptionBudget") => round_trip::<policy::v1::PodDisruptionBudget>(doc),
        ("networking.k8s.io/v1", "NetworkPolicy") => round_trip::<networking::v1::NetworkPolicy>(doc),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            round_trip::<CustomResourceDefinition>(doc)
        }
        ("monitoring.coreos.com/v1", "ServiceMonitor") => structure(doc, &service_monitor_shape()),
        ("monitoring.coreos.com/v1", "PrometheusRule") => structure(doc, &prometheus_rule_shape()),
        ("kustomize.config.k8s.io/v1beta1", "Kustomization") => structure(doc, &kustomization_shape()),
        _ => Err(format!("{api} {kind}: no schema check for this kind (add one to tests/monitoring.rs)")),
    }
}

/// A subset of a JSON schema: for each object, the fields it may have and their shapes; a
/// field not listed is an error. Only what these manifests use (and its common siblings) is
/// listed: the Prometheus Operator's CRDs are not vendored here.
enum Shape {
    Str,
    Bool,
    /// Any value (labels, annotations: free-form maps of strings are checked as such).
    StrMap,
    List(Box<Shape>),
    Object(Vec<(&'static str, Shape)>),
}

fn obj(fields: Vec<(&'static str, Shape)>) -> Shape {
    Shape::Object(fields)
}

fn list(s: Shape) -> Shape {
    Shape::List(Box::new(s))
}

fn metadata_shape() -> Shape {
    obj(vec![
        ("name", Shape::Str),
        ("namespace", Shape::Str),
        ("labels", Shape::StrMap),
        ("annotations", Shape::StrMap),
    ])
}

fn selector_shape() -> Shape {
    obj(vec![("matchLabels", Shape::StrMap)])
}

fn key_ref() -> Shape {
    obj(vec![("name", Shape::Str), ("key", Shape::Str), ("optional", Shape::Bool)])
}

/// monitoring.coreos.com/v1 ServiceMonitor, the fields of its API reference this file uses.
fn service_monitor_shape() -> Shape {
    let tls = obj(vec![
        ("serverName", Shape::Str),
        ("insecureSkipVerify", Shape::Bool),
        ("caFile", Shape::Str),
        ("ca", obj(vec![("configMap", key_ref()), ("secret", key_ref())])),
    ]);
    let endpoint = obj(vec![
        ("port", Shape::Str),
        ("targetPort", Shape::Str),
        ("path", Shape::Str),
        ("scheme", Shape::Str),
        ("interval", Shape::Str),
        ("scrapeTimeout", Shape::Str),
        ("honorLabels", Shape::Bool),
        ("bearerTokenFile", Shape::Str),
        ("authorization", obj(vec![("type", Shape::Str), ("credentials", key_ref())])),
        ("tlsConfig", tls),
    ]);
    obj(vec![
        ("apiVersion", Shape::Str),
        ("kind", Shape::Str),
        ("metadata", metadata_shape()),
        (
            "spec",
            obj(vec![
                ("selector", selector_shape()),
                ("namespaceSelector", obj(vec![("matchNames", list(Shape::Str)), ("any", Shape::Bool)])),
                ("jobLabel", Shape::Str),
                ("endpoints", list(endpoint)),
            ]),
        ),
    ])
}

/// monitoring.coreos.com/v1 PrometheusRule.
fn prometheus_rule_shape() -> Shape {
    let rule = obj(vec![
        ("alert", Shape::Str),
        ("record", Shape::Str),
        ("expr", Shape::Str),
        ("for", Shape::Str),
        ("keep_firing_for", Shape::Str),
        ("labels", Shape::StrMap),
        ("annotations", Shape::StrMap),
    ]);
    let group = obj(vec![("name", Shape::Str), ("interval", Shape::Str), ("rules", list(rule))]);
    obj(vec![
        ("apiVersion", Shape::Str),
        ("kind", Shape::Str),
        ("metadata", metadata_shape()),
        ("spec", obj(vec![("groups", list(group))])),
    ])
}

/// kustomize's Kustomization, the fields used here (kubectl kustomize checks the rest).
fn kustomization_shape() -> Shape {
    let image = obj(vec![
        ("name", Shape::Str),
        ("newName", Shape::Str),
        ("newTag", Shape::Str),
        ("digest", Shape::Str),
    ]);
    let target = obj(vec![("kind", Shape::Str), ("name", Shape::Str), ("namespace", Shape::Str)]);
    obj(vec![
        ("apiVersion", Shape::Str),
        ("kind", Shape::Str),
        ("resources", list(Shape::Str)),
        ("components", list(Shape::Str)),
        ("images", list(image)),
        ("patches", list(obj(vec![("target", target), ("patch", Shape::Str), ("path", Shape::Str)]))),
    ])
}

fn structure(doc: &Value, shape: &Shape) -> Result<(), String> {
    let mut out = Vec::new();
    shaped("", doc, shape, &mut out);
    if out.is_empty() { Ok(()) } else { Err(out.join("; ")) }
}

fn shaped(path: &str, v: &Value, shape: &Shape, out: &mut Vec<String>) {
    match (shape, v) {
        (Shape::Str, Value::String(_)) | (Shape::Bool, Value::Bool(_)) => {}
        (Shape::StrMap, Value::Object(m)) => {
            for (k, x) in m.iter().filter(|(_, x)| !x.is_string()) {
                out.push(format!("{path}.{k}: {x} is not a string"));
            }
        }
        (Shape::List(item), Value::Array(a)) => {
            for (i, x) in a.iter().enumerate() {
                shaped(&format!("{path}[{i}]"), x, item, out);
            }
        }
        (Shape::Object(fields), Value::Object(m)) => {
            for (k, x) in m {
                match fields.iter().find(|(f, _)| f == k) {
                    Some((_, s)) => shaped(&format!("{path}.{k}"), x, s, out),
                    None => out.push(format!("{path}.{k}: not a field here")),
                }
            }
        }
        _ => out.push(format!("{path}: {v} is not of the expected type")),
    }
}

#[test]
fn every_manifest_reads_as_the_kubernetes_schema_reads_it() {
    let dir = repo().join("packaging/kubernetes");
    let mut kinds = BTreeSet::new();
    let mut failures = Vec::new();
    for (path, docs) in manifests(&dir) {
        for d in docs {
            kinds.insert(d["kind"].as_str().unwrap_or("?").to_string());
            if let Err(e) = check_manifest(&d) {
                failures.push(format!("{} {} {}: {e}", path.display(), d["kind"], d["metadata"]["name"]));
            }
        }
    }
    // As applied: what `kubectl apply -k` would send.
    if let Some(kubectl) = kubectl() {
        for d in kustomize(kubectl, &dir) {
            if let Err(e) = check_manifest(&d) {
                failures.push(format!("rendered {} {}: {e}", d["kind"], d["metadata"]["name"]));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for k in [
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ClusterRole",
        "ClusterRoleBinding",
        "ServiceMonitor",
        "PrometheusRule",
        "CustomResourceDefinition",
    ] {
        assert!(kinds.contains(k), "no {k} checked: {kinds:?}");
    }
}

#[test]
fn the_schema_check_catches_a_misspelled_or_misplaced_field() {
    let text =
        std::fs::read_to_string(repo().join("packaging/kubernetes/deployment-controller.yaml")).unwrap();
    let docs = yaml_docs(&text, "deployment-controller.yaml");
    let deployment = find(&docs, "Deployment", "edpm-agent-controller").clone();
    assert_eq!(check_manifest(&deployment), Ok(()));

    // Misspelled: kubectl apply (without --validate=strict) would drop it silently.
    let mut typo = deployment.clone();
    let c = typo["spec"]["template"]["spec"]["containers"][0].as_object_mut().unwrap();
    let policy = c.remove("imagePullPolicy").unwrap();
    c.insert("imagePulPolicy".into(), policy);
    let err = check_manifest(&typo).unwrap_err();
    assert!(err.contains(".spec.template.spec.containers[0].imagePulPolicy"), "{err}");

    // Misplaced: a pod field on the container.
    let mut misplaced = deployment.clone();
    let spread =
        misplaced["spec"]["template"]["spec"].as_object_mut().unwrap().remove("topologySpreadConstraints");
    misplaced["spec"]["template"]["spec"]["containers"][0]["topologySpreadConstraints"] = spread.unwrap();
    let err = check_manifest(&misplaced).unwrap_err();
    assert!(err.contains("containers[0].topologySpreadConstraints"), "{err}");

    // A wrong type: a port number as a word where only numbers go.
    let mut wrong = deployment.clone();
    wrong["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = json!("8443");
    assert!(check_manifest(&wrong).is_err());

    // The Prometheus Operator's kinds, by their structural check.
    let text = std::fs::read_to_string(repo().join("packaging/kubernetes/monitoring.yaml")).unwrap();
    let docs = yaml_docs(&text, "monitoring.yaml");
    let mut sm = find(&docs, "ServiceMonitor", "edpm-agent-controller").clone();
    assert_eq!(check_manifest(&sm), Ok(()));
    let tls = sm["spec"]["endpoints"][0]["tlsConfig"].as_object_mut().unwrap();
    let name = tls.remove("serverName").unwrap();
    tls.insert("servername".into(), name);
    let err = check_manifest(&sm).unwrap_err();
    assert!(err.contains(".spec.endpoints[0].tlsConfig.servername"), "{err}");
    let mut rule = find(&docs, "PrometheusRule", "edpm-agent").clone();
    rule["spec"]["groups"][0]["rules"][0]["annotation"] = json!({"summary": "x"});
    let err = check_manifest(&rule).unwrap_err();
    assert!(err.contains(".spec.groups[0].rules[0].annotation"), "{err}");

    // An unknown kind is not waved through.
    assert!(check_manifest(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}})).is_err());
}

// ---------------------------------------------------------------------------------------
// The kustomization, rendered
// ---------------------------------------------------------------------------------------

#[test]
fn the_kustomization_renders_a_controller_an_sre_would_approve() {
    let Some(kubectl) = kubectl() else { return };
    let dir = repo().join("packaging/kubernetes");
    let docs = kustomize(kubectl, &dir);
    let d = find(&docs, "Deployment", "edpm-agent-controller");
    let pod_labels = &d["spec"]["template"]["metadata"]["labels"];
    let selects_pods = |selector: &Value| {
        let m = selector["matchLabels"].as_object().unwrap();
        !m.is_empty() && m.iter().all(|(k, v)| pod_labels[k] == *v)
    };
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];

    // The image from `images:`, pulled only when absent.
    let k: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap()).unwrap();
    let image =
        k["images"].as_array().unwrap().iter().find(|i| i["name"] == "edpm-agent-controller").unwrap();
    assert_eq!(
        c["image"],
        format!("{}:{}", image["newName"].as_str().unwrap(), image["newTag"].as_str().unwrap())
    );
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");

    // Spread over nodes, by the pods' own labels.
    let spread = &pod["topologySpreadConstraints"][0];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(spread["maxSkew"], 1);
    assert!(selects_pods(&spread["labelSelector"]), "{spread}");
    assert!(pod.get("priorityClassName").is_none(), "no priority class unless asked for");

    // Probes: the startup probe holds the liveness probe off through a long first list.
    let port = |name: &str| {
        c["ports"].as_array().unwrap().iter().find(|p| p["name"] == name).unwrap()["containerPort"]
            .as_u64()
            .unwrap()
    };
    let startup = &c["startupProbe"];
    assert_eq!(startup["httpGet"]["path"], "/readyz");
    let budget = startup["periodSeconds"].as_u64().unwrap() * startup["failureThreshold"].as_u64().unwrap();
    assert!(budget >= 600, "the first list of a large data plane gets at least 10 min: {budget} s");
    let live = &c["livenessProbe"];
    assert_eq!(live["httpGet"]["path"], "/healthz");
    assert!(live.get("initialDelaySeconds").is_none(), "the startup probe gates it: {live}");
    for probe in [startup, live, &c["readinessProbe"]] {
        assert_eq!(probe["httpGet"]["port"], "probes");
        assert!(probe["httpGet"].get("scheme").is_none_or(|s| s == "HTTP"), "probes stay plain HTTP");
    }
    assert_eq!(port("probes"), 8081);

    // Leader election as kubebuilder spells it, and HTTPS metrics with the mounted certificate.
    let args = strings(&c["args"]);
    for a in [
        "--leader-elect",
        "--leader-elect-lease-duration=15s",
        "--leader-elect-renew-deadline=10s",
        "--leader-elect-retry-period=2s",
        "--metrics-bind-address=:8443",
        "--health-probe-bind-address=:8081",
    ] {
        assert!(args.contains(&a), "{a} not in {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("--metrics-secure=false")), "metrics over HTTPS: {args:?}");
    assert_eq!(port("https"), 8443);
    let cert_dir =
        args.iter().find_map(|a| a.strip_prefix("--metrics-cert-path=")).expect("--metrics-cert-path");
    let mount = c["volumeMounts"].as_array().unwrap().iter().find(|m| m["mountPath"] == cert_dir).unwrap();
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == mount["name"]).unwrap();
    assert_eq!(volume["secret"]["optional"], true, "off OpenShift the Secret does not exist: {volume}");
    let secret = volume["secret"]["secretName"].as_str().unwrap();

    // The Service: HTTPS, its certificate asked of OpenShift's service-ca under the mounted name.
    let svc = find(&docs, "Service", "edpm-agent-controller-metrics");
    assert!(selects_pods(&json!({"matchLabels": svc["spec"]["selector"]})));
    let sp = &svc["spec"]["ports"][0];
    assert_eq!(
        (sp["name"].as_str(), sp["port"].as_u64(), sp["targetPort"].as_str()),
        (Some("https"), Some(8443), Some("https"))
    );
    assert_eq!(svc["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"], secret);

    // One replica at a time may go.
    let pdb = find(&docs, "PodDisruptionBudget", "edpm-agent-controller");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert!(selects_pods(&pdb["spec"]["selector"]));
    assert!(
        d["spec"]["replicas"].as_u64().unwrap() > 1,
        "a PDB of minAvailable 1 over one replica blocks every drain"
    );

    // The NetworkPolicy: metrics from the monitoring namespaces only, probes from anywhere.
    let np = find(&docs, "NetworkPolicy", "edpm-agent-controller");
    assert!(selects_pods(&np["spec"]["podSelector"]));
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    let rules = np["spec"]["ingress"].as_array().unwrap();
    let metrics_rule = rules.iter().find(|r| r["ports"][0]["port"] == "https").unwrap();
    let from = &metrics_rule["from"][0]["namespaceSelector"]["matchExpressions"][0];
    assert_eq!(from["key"], "kubernetes.io/metadata.name");
    assert!(strings(&from["values"]).contains(&"openshift-user-workload-monitoring"), "{from}");
    let probes_rule = rules.iter().find(|r| r["ports"][0]["port"] == "probes").unwrap();
    assert!(probes_rule.get("from").is_none(), "the kubelet probes from its node: {probes_rule}");
    for r in rules {
        for p in r["ports"].as_array().unwrap() {
            port(p["port"].as_str().unwrap());
        }
    }

    // TokenReview and SubjectAccessReview for the controller; get /metrics for scrapers.
    let auth = find(&docs, "ClusterRole", "edpm-agent-metrics-auth");
    let mut granted: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for rule in auth["rules"].as_array().unwrap() {
        for g in strings(&rule["apiGroups"]) {
            for r in strings(&rule["resources"]) {
                granted.push((g, r, strings(&rule["verbs"])));
            }
        }
    }
    assert_eq!(
        granted,
        [
            ("authentication.k8s.io", "tokenreviews", vec!["create"]),
            ("authorization.k8s.io", "subjectaccessreviews", vec!["create"])
        ]
    );
    let binding = find(&docs, "ClusterRoleBinding", "edpm-agent-metrics-auth");
    assert_eq!(binding["roleRef"]["name"], "edpm-agent-metrics-auth");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": d["metadata"]["namespace"]}])
    );
    let reader = find(&docs, "ClusterRole", "edpm-agent-metrics-reader");
    assert_eq!(reader["rules"], json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]));
}

/// kustomization.yaml's commented priority-class patch works once uncommented.
#[test]
fn the_commented_priority_class_patch_sets_it() {
    let Some(kubectl) = kubectl() else { return };
    let dir = repo().join("packaging/kubernetes");
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            let text = std::fs::read_to_string(&p).unwrap();
            std::fs::write(tmp.path().join(p.file_name().unwrap()), text).unwrap();
        }
    }
    let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    let (head, patch) = text.split_once("# patches:").expect("the commented patch");
    let patch: String = std::iter::once("patches:".to_string())
        .chain(patch.lines().skip(1).map(|l| l.strip_prefix("# ").unwrap_or(l).to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(tmp.path().join("kustomization.yaml"), format!("{head}{patch}\n")).unwrap();
    let docs = kustomize(kubectl, tmp.path());
    let d = find(&docs, "Deployment", "edpm-agent-controller");
    assert_eq!(d["spec"]["template"]["spec"]["priorityClassName"], "openshift-user-critical");
}

/// The ServiceMonitor scrapes the Service's port as the controller serves it: HTTPS, the
/// certificate's name, a token of a ServiceAccount allowed to read /metrics.
#[test]
fn the_service_monitor_scrapes_the_metrics_service_as_it_is_served() {
    let dir = repo().join("packaging/kubernetes");
    let read = |f: &str| yaml_docs(&std::fs::read_to_string(dir.join(f)).unwrap(), f);
    let (deployment, monitoring, rbac) =
        (read("deployment-controller.yaml"), read("monitoring.yaml"), read("rbac-metrics.yaml"));
    let svc = find(&deployment, "Service", "edpm-agent-controller-metrics");
    let sm = find(&monitoring, "ServiceMonitor", "edpm-agent-controller");
    assert_eq!(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"]);
    assert_eq!(sm["metadata"]["namespace"], svc["metadata"]["namespace"]);
    let ep = &sm["spec"]["endpoints"][0];
    assert_eq!(ep["port"], svc["spec"]["ports"][0]["name"]);
    assert_eq!(ep["scheme"], "https");
    assert_eq!(ep["honorLabels"], true, "the data plane's namespace label is kept");
    let tls = &ep["tlsConfig"];
    let host = format!(
        "{}.{}.svc",
        svc["metadata"]["name"].as_str().unwrap(),
        svc["metadata"]["namespace"].as_str().unwrap()
    );
    assert_eq!(tls["serverName"], host);
    // The CA: service-ca's bundle, injected into the ConfigMap named.
    let ca = &tls["ca"]["configMap"];
    let cm = find(&monitoring, "ConfigMap", ca["name"].as_str().unwrap());
    assert_eq!(cm["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"], "true");
    assert_eq!(ca["key"], "service-ca.crt");
    // The token: a ServiceAccount's, and that ServiceAccount may get /metrics.
    let auth = &ep["authorization"];
    assert_eq!(auth["type"], "Bearer");
    let secret = find(&monitoring, "Secret", auth["credentials"]["name"].as_str().unwrap());
    assert_eq!(secret["type"], "kubernetes.io/service-account-token");
    assert_eq!(auth["credentials"]["key"], "token");
    let sa = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"].as_str().unwrap();
    find(&monitoring, "ServiceAccount", sa);
    let binding = monitoring
        .iter()
        .find(|d| d["kind"] == "ClusterRoleBinding" && d["subjects"][0]["name"] == sa)
        .expect("the scraper's binding");
    let role = find(&rbac, "ClusterRole", binding["roleRef"]["name"].as_str().unwrap());
    assert_eq!(role["rules"], json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]));
}

// ---------------------------------------------------------------------------------------
// Alerts, runbooks and the dashboard against what the controller exports
// ---------------------------------------------------------------------------------------

/// GitHub's heading anchors: lower case, punctuation other than `-` and `_` dropped, spaces
/// to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn alerts() -> Vec<Value> {
    let text = std::fs::read_to_string(repo().join("packaging/kubernetes/monitoring.yaml")).unwrap();
    let docs = yaml_docs(&text, "monitoring.yaml");
    let rule = find(&docs, "PrometheusRule", "edpm-agent");
    rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn every_alert_has_a_severity_and_a_runbook_section() {
    assert_eq!(anchor("EDPMNodeServicesFailed"), "edpmnodeservicesfailed");
    assert_eq!(anchor("Stale node agents: what to do?"), "stale-node-agents-what-to-do");
    let runbooks = std::fs::read_to_string(repo().join("docs/runbooks.md")).unwrap();
    let anchors: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| anchor(h.trim_start_matches('#')))
        .collect();
    let alerts = alerts();
    assert!(alerts.len() >= 7, "{alerts:?}");
    let mut names = BTreeSet::new();
    for a in &alerts {
        let name = a["alert"].as_str().expect("only alerts here");
        assert!(names.insert(name), "{name} twice");
        let severity = a["labels"]["severity"].as_str().unwrap_or_default();
        assert!(["critical", "warning", "info"].contains(&severity), "{name}: severity {severity:?}");
        for k in ["summary", "description"] {
            assert!(a["annotations"][k].as_str().is_some_and(|s| !s.is_empty()), "{name}: no {k}");
        }
        let url =
            a["annotations"]["runbook_url"].as_str().unwrap_or_else(|| panic!("{name}: no runbook_url"));
        let (page, section) = url.split_once('#').unwrap_or_else(|| panic!("{name}: {url} names no section"));
        assert!(
            page.starts_with("https://github.com/") && page.ends_with("/blob/main/docs/runbooks.md"),
            "{name}: {page}"
        );
        assert!(anchors.contains(section), "{name}: docs/runbooks.md has no heading for #{section}");
        assert_eq!(section, anchor(name), "{name}: its section is named after it");
        if let Some(f) = a.get("for") {
            let f = f.as_str().unwrap();
            assert!(f.ends_with('m') && f.trim_end_matches('m').parse::<u32>().is_ok(), "{name}: for {f}");
        }
    }
    // The issue's list: each phase's failures, stale agents, evaluation and API errors, watch
    // restarts, no leader.
    let exprs: Vec<&str> = alerts.iter().map(|a| a["expr"].as_str().unwrap()).collect();
    for needle in [
        r#"phase="-1", state="failed""#,
        r#"phase="0", state="failed""#,
        r#"phase="1", state="failed""#,
        r#"type="NodeAgentReady", status="Unknown""#,
        r#"edpm_reconcile_total{result="error"}"#,
        "edpm_api_request_errors_total",
        "edpm_watch_restarts_total",
        "edpm_leader",
    ] {
        assert!(exprs.iter().any(|e| e.contains(needle)), "no alert on {needle}");
    }
}

/// The metric names an expression queries, each with the label names its selector matches
/// on. Functions, aggregations and their `by`/`without`/`on`/`ignoring`/`group_*` label
/// lists, keywords, strings, numbers, durations, ranges and Grafana's `$variables` are not
/// metric names.
fn promql_metrics(expr: &str) -> Vec<(String, Vec<String>)> {
    const KEYWORDS: [&str; 14] = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "inf",
        "nan",
        "atan2",
    ];
    const LABEL_LISTS: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];
    // Aggregations may put `by (…)` before their parentheses: `sum by (a) (x)`.
    const AGGREGATIONS: [&str; 14] = [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut i = 0;
    let skip_string = |mut i: usize| {
        let q = b[i];
        i += 1;
        while i < b.len() && b[i] != q {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        i + 1
    };
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    // The label names of a `{…}` selector starting at `i`; the index after it.
    let selector = |mut i: usize| {
        let mut labels = Vec::new();
        i += 1;
        while i < b.len() && b[i] != b'}' {
            if b[i] == b'"' || b[i] == b'\'' || b[i] == b'`' {
                i = skip_string(i);
            } else if ident(b[i]) {
                let start = i;
                while i < b.len() && ident(b[i]) {
                    i += 1;
                }
                labels.push(expr[start..i].to_string());
            } else {
                i += 1;
            }
        }
        (labels, i + 1)
    };
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' || c == b'\'' || c == b'`' {
            i = skip_string(i);
        } else if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'[' {
            while i < b.len() && b[i] != b']' {
                i += 1;
            }
        } else if c == b'{' {
            // A selector with no name before it: `{__name__="…"}` is not used here.
            let (labels, next) = selector(i);
            assert!(!labels.iter().any(|l| l == "__name__"), "{expr}: __name__ selectors are not read");
            i = next;
        } else if c == b'$' {
            i += 1;
            if i < b.len() && b[i] == b'{' {
                while i < b.len() && b[i] != b'}' {
                    i += 1;
                }
                i += 1;
            } else {
                while i < b.len() && ident(b[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            // Numbers and durations: 0.05, 1e3, 5m, 1h30m.
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
        } else if ident(c) {
            let start = i;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            let word = &expr[start..i];
            let next = skip_ws(i);
            let lower = word.to_ascii_lowercase();
            if LABEL_LISTS.contains(&lower.as_str()) && b.get(next) == Some(&b'(') {
                while i < b.len() && b[i] != b')' {
                    i += 1;
                }
            } else if b.get(next) == Some(&b'(')
                || KEYWORDS.contains(&lower.as_str())
                || AGGREGATIONS.contains(&lower.as_str())
            {
                // A function or an aggregation, or an operator word.
            } else if b.get(next) == Some(&b'{') {
                let (labels, after) = selector(next);
                out.push((word.to_string(), labels));
                i = after;
            } else {
                out.push((word.to_string(), Vec::new()));
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn the_promql_reader_finds_metric_names_and_nothing_else() {
    let names = |e: &str| promql_metrics(e).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    assert_eq!(
        promql_metrics(r#"sum by (namespace, pod) (rate(edpm_reconcile_total{result="error"}[10m])) > 0.05"#),
        [("edpm_reconcile_total".to_string(), vec!["result".to_string()])]
    );
    assert_eq!(
        names(
            r#"edpm_node_condition{type="ServicesReady", status="False"} == 1
            and on (namespace, nodeset, node) edpm_node_condition{type="Stalled",status="True"} == 1"#
        ),
        ["edpm_node_condition", "edpm_node_condition"]
    );
    assert_eq!(names("absent(edpm_leader == 1)"), ["edpm_leader"]);
    assert_eq!(
        names(
            "histogram_quantile(0.99, sum by (le) (rate(edpm_reconcile_duration_seconds_bucket[$__rate_interval])))"
        ),
        ["edpm_reconcile_duration_seconds_bucket"]
    );
    assert_eq!(
        names(r#"sum without (status) (edpm_node_condition{nodeset=~"$nodeset"}) * 2 + 1e3 offset 5m"#),
        ["edpm_node_condition"]
    );
    assert_eq!(
        names("rate(x_total[5m]) / ignoring(code) group_left rate(y_total[5m:1m])"),
        ["x_total", "y_total"]
    );
    assert_eq!(names(r#"count(up{job="a"}) or vector(0)"#), ["up"]);
}

/// The metric names a scrape of the controller offers to PromQL, each with its label names
/// (empty for a family with no sample yet): a counter `x` is queried as `x_total`, a
/// histogram as `x_bucket`, `x_sum` and `x_count`, as Prometheus stores OpenMetrics.
fn exported(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let (family, ty) = rest.split_once(' ').unwrap();
        let samples: &[&str] = match ty {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "gauge" => &[""],
            other => panic!("{family}: type {other} is not mapped"),
        };
        for s in samples {
            names.insert(format!("{family}{s}"), BTreeSet::new());
        }
    }
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let name_end = line.find(['{', ' ']).unwrap();
        let name = &line[..name_end];
        let labels =
            names.get_mut(name).unwrap_or_else(|| panic!("sample {name} of no family mapped: {line}"));
        if line[name_end..].starts_with('{') {
            let (set, _) = line[name_end + 1..].split_once('}').unwrap();
            for pair in set.split("\",") {
                labels.insert(pair.split_once('=').unwrap().0.trim_start_matches(',').to_string());
            }
        }
    }
    names
}

/// Every expression of the dashboard: panels' targets (rows' panels too) and the variables'
/// `label_values(selector, label)` queries.
fn dashboard_exprs(d: &Value) -> Vec<String> {
    fn panels(ps: &Value, out: &mut Vec<String>) {
        for p in ps.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push(
                    t["expr"].as_str().unwrap_or_else(|| panic!("a target with no expr: {t}")).to_string(),
                );
            }
            panels(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    panels(&d["panels"], &mut out);
    for v in d["templating"]["list"].as_array().unwrap() {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"].as_str().or(v["query"].as_str()).unwrap();
        let inner = q.strip_prefix("label_values(").and_then(|q| q.strip_suffix(')')).expect(q);
        // label_values(label) queries no metric; label_values(selector, label) queries one.
        if let Some((selector, _label)) = inner.rsplit_once(',') {
            out.push(selector.to_string());
        }
    }
    out
}

/// The families every scrape may show: prometheus-client leaves out a family with no sample
/// yet (no API error so far), so the scrape is taken once each has one.
const FAMILIES: [&str; 8] = [
    "edpm_node_condition",
    "edpm_nodeset_nodes",
    "edpm_reconcile_total",
    "edpm_reconcile_duration_seconds_bucket",
    "edpm_watch_restarts_total",
    "edpm_api_request_errors_total",
    "edpm_skipped_objects_total",
    "edpm_leader",
];

/// A controller against the fake API server, its `/metrics` as the harness serves it, once
/// every family has samples: an undecodable status object (skipped), status writes failing
/// with 503 (API errors, failed evaluations), a short outage (watch restarts).
fn scrape_with_every_family() -> String {
    use crate::controller::{Controller, condition, wait_for};
    let api = crate::status_api::cluster();
    api.put(json!({"apiVersion": "agent.edpm.openstack.org/v1alpha1", "kind": "EDPMNodeStatus",
        "metadata": {"name": "edpm-compute-cell1-edpm-compute-3", "namespace": "openstack"},
        "spec": {"nodeSet": "edpm-compute-cell1", "nodeSetKind": "OpenStackDataPlaneNodeSet", "node": "edpm-compute-3"},
        "status": {"conditions": [{"type": "NodeAgentReady", "status": "Maybe", "reason": "Ready", "message": "?",
            "lastTransitionTime": "2026-11-23T12:00:00Z"}]}}));
    let c = Controller::start(&api, &[]);
    wait_for("the first writes", Duration::from_secs(20), || {
        condition(&api, "edpm-compute-cell2-edpm-compute-5", "Ready").is_some()
    });
    api.fault("/edpmnodestatuses/", crate::util::fake_api::Fault::Status(503), 1000);
    let message = json!({"failedHostList": ["edpm-compute-5"], "failedHosts": 1, "failurePercent": 100,
        "hostFailures": {"edpm-compute-5": "Deploy nova (x.yml:1): failed"}, "rc": 2, "status": "failed",
        "totalHosts": 1, "truncated": false, "unreachableHostList": [], "unreachableHosts": 0});
    api.put(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-monitoring", "namespace": "openstack",
        "creationTimestamp": "2026-11-01T12:00:00Z", "labels": {"batch.kubernetes.io/job-name": "nova-edpm-deployment-edpm-compute-cell2"}},
        "status": {"containerStatuses": [{"name": "r", "state": {"terminated": {"exitCode": 2, "message": message.to_string()}}}]}}));
    // Every request refused for 2 s: the watches fail and restart (a stream that merely ends
    // is resumed, not counted).
    api.down_for(Duration::from_secs(2));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let text = c.get("/metrics").1;
        let missing: Vec<&str> =
            FAMILIES.into_iter().filter(|f| !text.lines().any(|l| l.starts_with(f))).collect();
        if missing.is_empty() {
            api.clear_faults();
            return text;
        }
        assert!(std::time::Instant::now() < deadline, "no sample of {missing:?} in 60 s:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_dashboard_and_the_alerts_query_only_what_the_controller_exports() {
    let text = scrape_with_every_family();
    assert!(text.ends_with("# EOF\n"), "OpenMetrics: {text}");
    let exported = exported(&text);
    for n in FAMILIES {
        assert!(exported.contains_key(n), "{n} not exported: {exported:?}");
    }

    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("packaging/grafana/edpm-agent.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    let mut exprs: Vec<(String, String)> =
        dashboard_exprs(&dashboard).into_iter().map(|e| ("dashboard".to_string(), e)).collect();
    assert!(exprs.len() >= 8, "{exprs:?}");
    for a in alerts() {
        exprs.push((a["alert"].as_str().unwrap().to_string(), a["expr"].as_str().unwrap().to_string()));
    }
    let mut wrong = Vec::new();
    for (at, e) in &exprs {
        let metrics = promql_metrics(e);
        if metrics.is_empty() {
            wrong.push(format!("{at}: no metric in {e}"));
        }
        for (m, labels) in metrics {
            match exported.get(&m) {
                None => wrong.push(format!("{at}: {m} is not exported ({e})")),
                // A label the family's samples do not carry (for a family with samples).
                Some(have) if !have.is_empty() => {
                    for l in labels.iter().filter(|l| !have.contains(*l)) {
                        wrong.push(format!("{at}: {m} has no label {l} ({e})"));
                    }
                }
                Some(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_dashboard_is_grafanas_model_with_a_datasource_variable() {
    let d: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("packaging/grafana/edpm-agent.json")).unwrap(),
    )
    .unwrap();
    assert!(d["title"].is_string() && d["uid"].is_string() && d["schemaVersion"].is_u64(), "{d}");
    let vars = d["templating"]["list"].as_array().unwrap();
    let var = |name: &str| vars.iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("no ${name}"));
    assert_eq!(var("datasource")["type"], "datasource");
    assert_eq!(var("datasource")["query"], "prometheus");
    for v in ["namespace", "nodeset"] {
        assert_eq!(var(v)["type"], "query");
        assert_eq!(var(v)["datasource"]["uid"], "${datasource}");
    }
    // Every panel with queries reads them from the chosen data source, and ids are unique.
    let mut ids = BTreeSet::new();
    let mut stack: Vec<&Value> = d["panels"].as_array().unwrap().iter().collect();
    let mut kinds = BTreeSet::new();
    while let Some(p) = stack.pop() {
        assert!(ids.insert(p["id"].as_u64().expect("a panel id")), "panel id {} twice", p["id"]);
        kinds.insert(p["type"].as_str().unwrap());
        if p["targets"].is_array() {
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
            assert!(p["gridPos"]["w"].is_u64() && p["gridPos"]["h"].is_u64(), "{}", p["title"]);
        }
        stack.extend(p["panels"].as_array().into_iter().flatten());
    }
    assert!(kinds.contains("state-timeline"), "nodes × phases as a state timeline: {kinds:?}");
}
