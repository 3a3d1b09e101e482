use super::*;

/// The examples' NodeSet inventory: two NodeSets and two cells (what `ansible-inventory
/// --limit` gave for each case below, with ansible-core 2.19).
fn shape() -> Shape {
    Shape::new(vec![
        ("edpm-compute-cell1".into(), vec!["edpm-compute-3", "edpm-compute-4"]),
        ("edpm-compute-cell2".into(), vec!["edpm-compute-5"]),
        ("nova-cell1".into(), vec!["edpm-compute-3", "edpm-compute-4"]),
        ("nova-cell2".into(), vec!["edpm-compute-5"]),
    ])
}

fn hosts(limit: &str) -> Result<Vec<String>, String> {
    let s = shape();
    let mut out: Vec<String> = match subset(limit, &s)? {
        None => s.hosts.clone(),
        Some(set) => set.into_iter().map(|i| s.hosts[i].clone()).collect(),
    };
    out.sort();
    Ok(out)
}

fn are(limit: &str, want: &[&str]) {
    assert_eq!(hosts(limit).unwrap_or_else(|e| panic!("{limit:?}: {e}")), want, "{limit:?}");
}

#[test]
fn every_form_ansible_reads() {
    let all = ["edpm-compute-3", "edpm-compute-4", "edpm-compute-5"];
    are("al*", &all);
    are("*", &all);
    are("edpm-*", &all);
    are("ungrouped", &[]);
    are("all[0]", &["edpm-compute-3"]);
    are("all[-1]", &["edpm-compute-5"]);
    are("nova-cell1[1:]", &["edpm-compute-4"]);
    are("edpm*[0:1]", &["edpm-compute-3", "edpm-compute-4"]);
    are("edpm*[0:3]", &all);
    are("~edpm-compute-[34]", &["edpm-compute-3", "edpm-compute-4"]);
    are("edpm-compute-3:edpm-compute-5", &["edpm-compute-3", "edpm-compute-5"]);
    are("&nova-cell1", &["edpm-compute-3", "edpm-compute-4"]);
    are("!nova-cell1", &["edpm-compute-5"]);
    are("x[9]", &[]);
    are("", &all);
    are("edpm-compute-cell1,!edpm-compute-4", &["edpm-compute-3"]);
    are("edpm-compute-cell1,&nova-cell2", &[]);
    are("nope", &[]);
}

#[test]
fn what_ansible_refuses_or_cannot_be_told_is_unknown() {
    assert!(hosts("edpm-compute-3[2:0]").unwrap_err().contains("No hosts matched the subscripted pattern"));
    assert!(hosts("nova-cell1[5]").is_err());
    assert!(hosts("@retry.txt").unwrap_err().contains("file"));
    assert!(hosts("~edpm-(?=compute)").is_err());
    assert!(hosts("!").is_err());
}

#[test]
fn a_name_is_itself_before_it_is_a_glob() {
    let s = Shape::new(vec![("ns".into(), vec!["edpm-compute-*", "edpm-compute-1", "edpm-compute-2"])]);
    let got = |l: &str| {
        let mut v: Vec<String> =
            subset(l, &s).unwrap().unwrap().into_iter().map(|i| s.hosts[i].clone()).collect();
        v.sort();
        v
    };
    assert_eq!(got("edpm-compute-*"), ["edpm-compute-*"]);
    assert_eq!(got("&edpm-compute-*"), ["edpm-compute-*", "edpm-compute-1", "edpm-compute-2"]);
    assert_eq!(got("edpm-compute-[*]"), ["edpm-compute-*"]);
}

#[test]
fn the_deployments_limit_passes_ansible_runners_shlex_first() {
    let s = shape();
    let of = |l: &str| coverage(l, &s);
    assert_eq!(of(""), Coverage::All);
    assert_eq!(of("  "), Coverage::All);
    assert_eq!(of("'edpm-compute-3'").covers("edpm-compute-3"), Covers::Yes);
    assert_eq!(of("'edpm-compute-3'").covers("edpm-compute-4"), Covers::No);
    for bad in ["edpm-compute-3, edpm-compute-4", "'edpm", "-x", "@hosts"] {
        assert!(matches!(of(bad), Coverage::Unknown(_)), "{bad:?}: {:?}", of(bad));
    }
    // The rotation batch: a regex leaving three nodes out.
    let ten = Shape::new(vec![(
        "edpm-compute".into(),
        (0..10).map(|i| format!("edpm-compute-{i}")).collect::<Vec<_>>().iter().map(String::as_str).collect(),
    )]);
    let c = coverage("~edpm-compute-[0-6]$", &ten);
    assert_eq!(c.covers("edpm-compute-6"), Covers::Yes);
    assert_eq!(c.covers("edpm-compute-7"), Covers::No);
}
