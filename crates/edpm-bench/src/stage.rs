//! `edpm-bench stage`: staging a node's files, first and unchanged.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// Writes a one-node NodeSet running only `ovn`, whose data source holds `files` keys. TLS is
/// off: the benchmark measures staging the data source's files, and with TLS on (the
/// default) `stage` wants the CA bundle Secret too.
pub(crate) fn stage_source(
    dir: &Path,
    files: usize,
    version: &str,
    changed_every: usize,
) -> Result<(), String> {
    let mut text = String::from(
        "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneNodeSet\nmetadata:\n  name: bench\nspec:\n  tlsEnabled: false\n  services: [ovn]\n  nodeTemplate:\n    ansibleSSHPrivateKeySecret: ssh\n  nodes:\n    node-0: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ovncontroller-config\ndata:\n",
    );
    for i in 0..files {
        let v = if changed_every > 0 && i % changed_every == 0 { version } else { "base" };
        let _ = writeln!(text, "  key-{i:05}: \"{}\"", format!("{v}-{i:05}-").repeat(60));
    }
    fs_err::write(dir.join("bench.yaml"), text).map_err(|e| e.to_string())
}

/// `edpm-bench stage`'s flags.
#[derive(clap::Args)]
pub(crate) struct Opts {
    /// Files the node's data source holds, staged by `edpm-agent stage`.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    files: usize,
    /// Files Ansible's copy module stages, the peer (a sample: it takes long per file).
    #[arg(long = "ansible-files", value_name = "N", default_value_t = 300)]
    ansible_files: usize,
}

pub(crate) fn stage_bench(o: &Opts) -> Result<(), String> {
    let (files, sample) = (o.files, o.ansible_files);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let agent = exe.with_file_name("edpm-agent");
    let src = tempfile::tempdir().map_err(|e| e.to_string())?;
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let stage = || -> Result<(Duration, serde_json::Value), String> {
        let start = Instant::now();
        let out = Command::new(&agent)
            .args([
                "--source",
                src.path().to_str().unwrap(),
                "stage",
                "--node",
                "node-0",
                "--root",
                root.path().to_str().unwrap(),
            ])
            .output()
            .map_err(|e| e.to_string())?;
        let t = start.elapsed();
        if !out.status.success() {
            return Err(format!("stage failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok((t, serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?))
    };
    let n = |v: &serde_json::Value, k: &str| v[k].as_array().map_or(0, Vec::len);
    stage_source(src.path(), files, "base", 0)?;
    println!("edpm-agent stage: {files} files of ~1 KiB from one data source");
    let (t1, r1) = stage()?;
    println!(
        "  first run:        {:>9}  {} written ({:.1} µs per file)",
        ms(t1),
        n(&r1, "changed"),
        t1.as_secs_f64() * 1e6 / files as f64
    );
    let (t2, r2) = stage()?;
    println!(
        "  no-change re-run: {:>9}  {} unchanged ({:.1} µs per file)",
        ms(t2),
        n(&r2, "unchanged"),
        t2.as_secs_f64() * 1e6 / files as f64
    );
    stage_source(src.path(), files, "v2", 100)?;
    let (t3, r3) = stage()?;
    println!(
        "  1% changed:       {:>9}  {} written, {} unchanged",
        ms(t3),
        n(&r3, "changed"),
        n(&r3, "unchanged")
    );

    if sample == 0 {
        return Ok(());
    }
    let Some(playbook_bin) = find_tool("ansible-playbook") else {
        println!("  ansible-playbook not found (run scripts/setup-venv.sh); no comparison");
        return Ok(());
    };
    // The same kind of files through Ansible's copy module, as edpm-ansible stages them today.
    let work = tempfile::tempdir().map_err(|e| e.to_string())?;
    let from = work.path().join("src");
    let to = work.path().join("dest");
    fs_err::create_dir_all(&from).map_err(|e| e.to_string())?;
    for i in 0..sample {
        fs_err::write(from.join(format!("key-{i:05}")), format!("base-{i:05}-").repeat(60))
            .map_err(|e| e.to_string())?;
    }
    let play = work.path().join("copy.yml");
    fs_err::write(
        &play,
        format!(
            "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.file: {{path: {to}, state: directory, mode: '0755'}}\n    - ansible.builtin.copy: {{src: '{from}/key-{{{{ item }}}}', dest: '{to}/', mode: '0644'}}\n      loop: \"{{{{ range({sample}) | map('string') | map('regex_replace', '^(.*)$', '0000\\\\1') | map('regex_replace', '^0*(.{{5}})$', '\\\\1') | list }}}}\"\n",
            to = to.display(),
            from = from.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let run_play = || -> Result<Duration, String> {
        let start = Instant::now();
        let out = Command::new(&playbook_bin)
            .args([
                "-i",
                "localhost,",
                "-c",
                "local",
                "-e",
                "ansible_python_interpreter={{ ansible_playbook_python }}",
                play.to_str().unwrap(),
            ])
            .env("ANSIBLE_NOCOLOR", "1")
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("ansible-playbook failed: {}", String::from_utf8_lossy(&out.stdout)));
        }
        Ok(start.elapsed())
    };
    let a1 = run_play()?;
    let a2 = run_play()?;
    let copied = std::fs::read_dir(&to).map(|d| d.count()).unwrap_or(0);
    println!("Ansible copy module (connection local), {sample} of the same files ({copied} copied):");
    println!(
        "  first run:        {:>9}  ({:.1} ms per file)",
        ms(a1),
        a1.as_secs_f64() * 1e3 / sample as f64
    );
    println!(
        "  no-change re-run: {:>9}  ({:.1} ms per file)",
        ms(a2),
        a2.as_secs_f64() * 1e3 / sample as f64
    );
    println!(
        "  per file, no-change re-run: edpm-agent {:.1} µs vs copy {:.1} ms ({:.0}x)",
        t2.as_secs_f64() * 1e6 / files as f64,
        a2.as_secs_f64() * 1e3 / sample as f64,
        (a2.as_secs_f64() / sample as f64) / (t2.as_secs_f64() / files as f64)
    );
    Ok(())
}
