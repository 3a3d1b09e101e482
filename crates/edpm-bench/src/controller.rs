//! `edpm-bench controller`: `status controller` against the fake API server at scale: the
//! first sync, the latency from one Job change to the write it causes, a churn of changes
//! that move nothing, and the steady state; beside `status report` run once on the same
//! cluster (what running it periodically costs per run).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;
use crate::fake_api;
use crate::node::{cpu_ticks, status_kib};
use crate::readiness::readiness_manifests;

pub(crate) fn controller_bench(args: &[String]) -> Result<(), String> {
    let nodes: usize = flag(args, "--nodes", 10_000)?;
    let services: usize = flag(args, "--services", 15)?;
    let changes: usize = flag(args, "--changes", 20)?;
    let churn = flag(args, "--churn-seconds", 60u64)?;
    let idle = flag(args, "--idle-seconds", 60u64)?;
    let sets = nodes.div_ceil(100);
    let api = fake_api::FakeApi::start();
    api.add_readiness_crds();
    for d in serde_saphyr::from_multiple::<serde_json::Value>(&readiness_manifests(nodes, services))
        .map_err(|e| e.to_string())?
    {
        api.put(d);
    }
    // One Job per NodeSet (the last service's), which the latency test changes.
    let last = format!("svc-{:02}", services - 1);
    for s in 0..sets {
        let ns = format!("nodeset-{s:04}");
        api.put(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": format!("{last}-deploy-{s:04}-{ns}"),
            "namespace": "openstack", "labels": {"app": "openstackansibleee", "openstackdataplaneservice": last,
            "openstackdataplanedeployment": format!("deploy-{s:04}"), "openstackdataplanenodeset": ns}},
            "spec": {"backoffLimit": 6}, "status": {"succeeded": 1}}));
    }
    let kc = api.kubeconfig();
    let agent = std::env::current_exe().map_err(|e| e.to_string())?.with_file_name("edpm-agent");
    let objects = nodes + sets;
    let status_writes = |api: &fake_api::FakeApi| api.count("PATCH", "/apis/agent.edpm.openstack.org/");

    // The peer first, on the same cluster: `status report` (it creates the objects, so the
    // controller's first evaluation then finds them and writes nothing), then again with
    // nothing changed: what each run of a periodic report costs.
    for pass in ["one-shot, creating every object", "again, nothing changed (each periodic run)"] {
        let before = status_writes(&api);
        let m = measure(Command::new(&agent).args([
            "--source",
            "kube",
            "--kubeconfig",
            kc.to_str().unwrap_or_default(),
            "status",
            "report",
        ]))?;
        println!(
            "peer: status report {pass}, {objects} objects: {} wall, {} CPU, peak RSS {:.0} MiB, {} write requests",
            ms(m.wall),
            ms(m.cpu),
            m.max_rss_kib as f64 / 1024.0,
            status_writes(&api) - before
        );
    }

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| e.to_string())?
        .local_addr()
        .map_err(|e| e.to_string())?
        .port();
    let addr = format!("127.0.0.1:{port}");
    let before = status_writes(&api);
    let started = Instant::now();
    // EDPM_BENCH_WRAP=heaptrack (or another profiler taking a command) runs the controller
    // under it; the RSS figures are then the wrapper's.
    let wrap = std::env::var("EDPM_BENCH_WRAP").ok();
    let mut child = match &wrap {
        Some(w) => {
            let mut c = Command::new(w);
            c.arg(&agent);
            c
        }
        None => Command::new(&agent),
    }
    .args(["--source", "kube", "--kubeconfig", kc.to_str().unwrap_or_default(), "status", "controller"])
    // Plain /metrics beside the probes on one address: --metrics-secure (the default) would
    // want an address of its own and a TokenReview for each scrape.
    .args(["--metrics-bind-address", &addr, "--health-probe-bind-address", &addr, "--metrics-secure=false"])
    .args(["--debounce-ms", "100"])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .map_err(|e| format!("cannot run {}: {e}", agent.display()))?;
    let pid = child.id();
    let ready = || -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
        let _ = write!(s, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut t = String::new();
        let _ = s.read_to_string(&mut t);
        t.starts_with("HTTP/1.1 200")
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    while !ready() {
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err("the controller never became ready".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let synced = started.elapsed();
    // The first evaluation after the lists: wait until it has run (its metrics appear).
    std::thread::sleep(Duration::from_secs(3));
    println!(
        "controller: ready (every kind listed) {} after start; writes in its first evaluation over objects `status report` wrote: {}; RSS {:.0} MiB",
        ms(synced),
        status_writes(&api) - before,
        status_kib(pid, "VmRSS:") as f64 / 1024.0
    );

    // Latency: a new attempt's pod of a failed Job says why its host failed (one NodeSet in
    // ten has a Job that failed on its first node): that node's status write is what the fake
    // server receives next, and nothing else.
    if sets < 10 {
        return Err("--nodes must be at least 1000 (ten NodeSets): one in ten has the failed Job".into());
    }
    let mut latencies = Vec::new();
    let mut extra_writes = 0;
    for i in 0..changes {
        let s = (i * 10 + 9) % (sets - sets % 10);
        let ns = format!("nodeset-{s:04}");
        let job = format!("{last}-deploy-{s:04}-{ns}");
        let node = format!("compute-{s:04}-000");
        let message = json!({"failedHostList": [node], "failedHosts": 1, "failurePercent": 1, "hostFailures": {node.as_str(): format!("Deploy (x.yml:1): change {i}")},
            "rc": 2, "status": "failed", "totalHosts": 100, "truncated": false, "unreachableHostList": [], "unreachableHosts": 0}).to_string();
        let from = api.requests_timed(0).len();
        let t0 = Instant::now();
        api.put(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("{job}-a{i}"), "namespace": "openstack",
            "creationTimestamp": format!("2026-11-02T{:02}:{:02}:00Z", i / 60, i % 60), "labels": {"batch.kubernetes.io/job-name": job}},
            "status": {"containerStatuses": [{"name": "r", "state": {"terminated": {"exitCode": 2, "message": message}}}]}}));
        let object = format!("{ns}-{node}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let landed = loop {
            if let Some((t, _)) = api
                .requests_timed(from)
                .into_iter()
                .find(|(_, r)| r.starts_with("PATCH") && r.contains(&format!("/{object}/status")))
            {
                break t;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!("no write for {object} within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        latencies.push(landed.duration_since(t0));
        std::thread::sleep(Duration::from_millis(300));
        extra_writes += api
            .requests_timed(from)
            .iter()
            .filter(|(_, r)| {
                r.starts_with("PATCH")
                    && r.contains("/apis/agent.edpm.openstack.org/")
                    && !r.contains(&format!("/{object}/"))
            })
            .count();
    }
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1];
    println!(
        "controller: a failed Job's new pod naming one node's reason → that node's status write: median {}, p99 {}, max {} over {changes} changes; {extra_writes} writes of other objects",
        ms(p(0.5)),
        ms(p(0.99)),
        ms(latencies[latencies.len() - 1])
    );

    // Churn: 100 changes a second that move no condition (a Job's annotation).
    std::thread::sleep(Duration::from_secs(2));
    let before = status_writes(&api);
    let ticks = cpu_ticks(pid);
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < Duration::from_secs(churn) {
        let s = (n as usize * 13) % sets;
        let job = format!("{last}-deploy-{s:04}-nodeset-{s:04}");
        if let Some(mut j) = api.object("Job", &job) {
            j["metadata"]["annotations"] = json!({"bench/churn": n.to_string()});
            api.put_replace(j);
        }
        n += 1;
        let next = Duration::from_millis(10 * n);
        if let Some(wait) = next.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cpu = (cpu_ticks(pid) - ticks) as f64 / hz;
    println!(
        "controller: {n} changes that move nothing in {churn} s ({:.0}/s): {} status writes, CPU {:.1} % of a core",
        n as f64 / churn as f64,
        status_writes(&api) - before,
        cpu * 100.0 / (churn as f64 + 2.0)
    );

    // Steady state.
    let before = status_writes(&api);
    let ticks = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(idle));
    let cpu = (cpu_ticks(pid) - ticks) as f64 / hz;
    println!(
        "controller: nothing changing for {idle} s: {} writes, CPU {:.2} % of a core, RSS {:.0} MiB (peak {:.0} MiB)",
        status_writes(&api) - before,
        cpu * 100.0 / idle as f64,
        status_kib(pid, "VmRSS:") as f64 / 1024.0,
        status_kib(pid, "VmHWM:") as f64 / 1024.0
    );
    // SIGTERM, as Kubernetes stops it (a profiler wrapping it then writes its data).
    if wrap.is_some() {
        let _ = Command::new("pkill").args(["-TERM", "-P", &pid.to_string()]).status();
    } else {
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(())
}
