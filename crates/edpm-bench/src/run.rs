//! `edpm-bench run`: the wall time `edpm-agent run` adds over ansible-runner alone.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// A runner directory with `hosts` local hosts and a no-op play: one `debug` task, which runs
/// on the controller, so the play's own cost is Ansible's and little else.
pub(crate) fn noop_runner_dir(dir: &Path, hosts: usize, python: &Path) -> Result<(), String> {
    let mut inv = String::from("all:\n  hosts:\n");
    for i in 0..hosts {
        let _ = writeln!(inv, "    host-{i:03}: {{ansible_connection: local}}");
    }
    let _ = writeln!(inv, "  vars:\n    ansible_python_interpreter: {}", python.display());
    for (rel, text) in [
        ("inventory/hosts", inv.as_str()),
        (
            "project/noop.yml",
            "- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug: {msg: noop}\n",
        ),
        ("env/settings", "pexpect_timeout: 0.2\n"),
    ] {
        let p = dir.join(rel);
        fs_err::create_dir_all(p.parent().unwrap()).map_err(|e| e.to_string())?;
        fs_err::write(p, text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `edpm-bench run`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Local hosts the no-op play runs on.
    #[arg(long, value_name = "N", default_value_t = 50)]
    hosts: usize,
    /// Rounds, each running ansible-runner alone and through `edpm-agent run`.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = crate::common::count)]
    runs: usize,
}

pub(crate) fn run_bench(o: &Opts) -> Result<(), String> {
    let (hosts, runs) = (o.hosts, o.runs);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let agent = exe.with_file_name("edpm-agent");
    let runner = find_tool("ansible-runner").ok_or("ansible-runner not found (run scripts/setup-venv.sh)")?;
    let python = find_tool("python3")
        .filter(|p| p.starts_with(runner.parent().unwrap()))
        .unwrap_or_else(|| "python3".into());
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    noop_runner_dir(dir.path(), hosts, &python)?;
    let path =
        format!("{}:{}", runner.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let d = dir.path().to_str().unwrap().to_string();
    let time = |cmd: &mut Command| -> Result<Measured, String> {
        let m = measure(
            cmd.env("PATH", &path)
                .env("ANSIBLE_NOCOLOR", "1")
                .env("EDPM_AEE_TERMINATION_LOG", dir.path().join("tlog")),
        )?;
        if m.status != 0 {
            return Err(format!("run failed with status {}", m.status));
        }
        Ok(m)
    };
    println!(
        "edpm-agent run vs ansible-runner run: no-op play (one debug task) on {hosts} local hosts, {runs} interleaved rounds"
    );
    let (mut direct, mut ours) = (Vec::new(), Vec::new());
    // One warm-up of each, so neither side pays for a cold page cache.
    for round in 0..=runs {
        let a = time(Command::new(&runner).args([
            "run",
            &d,
            "-p",
            "noop.yml",
            "-i",
            &format!("direct-{round}"),
        ]))?;
        let b = time(Command::new(&agent).args([
            "run",
            "--",
            "ansible-runner",
            "run",
            &d,
            "-p",
            "noop.yml",
            "-i",
            &format!("agent-{round}"),
        ]))?;
        if round > 0 {
            direct.push(a);
            ours.push(b);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (label, cpu) in [("wall", false), ("cpu (user+sys, every process)", true)] {
        let get = |m: &Measured| if cpu { m.cpu } else { m.wall }.as_secs_f64();
        let d: Vec<f64> = direct.iter().map(get).collect();
        let o: Vec<f64> = ours.iter().map(get).collect();
        let ratio = median(d.iter().zip(&o).map(|(d, o)| o / d).collect());
        let diff = median(d.iter().zip(&o).map(|(d, o)| o - d).collect());
        println!(
            "  {label}: direct median {:.1} ms, through edpm-agent median {:.1} ms; paired: {:+.2}% ({:+.1} ms) median",
            median(d.clone()) * 1e3,
            median(o.clone()) * 1e3,
            (ratio - 1.0) * 100.0,
            diff * 1e3
        );
    }
    println!("  (target: under 2% of the wall time; on a loaded machine the cpu figure is the steadier one)");
    Ok(())
}
