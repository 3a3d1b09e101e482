//! Fact collection, behind [`Collect`] so the loop can be driven with any facts.
//!
//! [`Host`] reads everything under a root (`/` on the node; a temporary directory in tests):
//! the host name (`proc/sys/kernel/hostname`, else `etc/hostname`), the addresses
//! (`proc/net/fib_trie`, `proc/net/if_inet6`), `etc/os-release`, edpm_network_config's
//! return codes, `stage`'s manifest and the files it records (hashed again only when their
//! size, mtime or inode changed since the last check), `deployed_services.yaml` and the
//! quadlet files; and it asks `systemctl show` (one call for every unit) and `podman ps` (one
//! call for every container), at once, for the runtime. Commands are looked up on `PATH` and
//! run through `edpm_io::process`: in their own process group, killed at `command_timeout`
//! (or at once on [`Host::cancel`], the agent's SIGTERM), their output capped.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use edpm_core::node::facts::{ContainerState, DeployedServices, Facts, StagedDrift, UnitState};
use edpm_io::process::{self, Cancel};

pub trait Collect: Send + Sync {
    fn collect(&self) -> Facts;
}

pub const DEPLOYED_SERVICES: &str = "var/lib/edpm-config/deployed_services.yaml";
const NETWORK_RETURN_CODES: [&str; 2] =
    ["var/lib/edpm-config/os-net-config.returncode", "var/lib/edpm-config/nmstate.returncode"];
const QUADLET_DIR: &str = "etc/containers/systemd";
/// `podman ps --all --format json` is 1–3 KB a container: a few hundred containers fit many
/// times over. Past this, the answer is refused rather than read half.
const OUTPUT_CAP: usize = 8 << 20;
/// Variables systemd gives the agent that are the agent's own: a program it asks (podman
/// knows `NOTIFY_SOCKET`) must not report to systemd in its name.
const OWN_VARIABLES: [&str; 4] = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS"];

/// What decides whether a staged file is hashed again: size, inode, and modification and
/// change times to the nanosecond (an edit keeping size and mtime still moves ctime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatKey(u64, u64, i64, i64, i64, i64);

impl StatKey {
    fn of(m: &std::fs::Metadata) -> StatKey {
        StatKey(m.len(), m.ino(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
    }
}

/// What a check needs of a staged file's stat (a `Metadata` is three times its size, and a
/// check holds one per staged file).
struct Stat {
    key: StatKey,
    is_file: bool,
    mode: u32,
}

impl Stat {
    fn of(m: &std::fs::Metadata) -> Stat {
        Stat { key: StatKey::of(m), is_file: m.is_file(), mode: m.mode() & 0o7777 }
    }
}

/// A staged file as `stage`'s manifest records it, held compactly: the agent keeps one per
/// staged file for as long as it runs (10,000 on a large node). Its path is a range of
/// [`Known::paths`].
struct StagedFile {
    path: std::ops::Range<usize>,
    /// `None` when the manifest's hash is not a sha256 (never matches).
    sha256: Option<[u8; 32]>,
    mode: u32,
}

/// The staged files as the manifest (with the stat it had) last listed them, in its order,
/// and beside each the stat it had and the sha256 it hashed to at the last check. Held in
/// three allocations, not three per file: what the agent keeps for its life must not be
/// scattered among the pages the manifest's parsing used and freed, or they stay resident.
#[derive(Default)]
struct Known {
    manifest: Option<StatKey>,
    /// Every staged file's path, one after another.
    paths: String,
    files: Vec<StagedFile>,
    seen: Vec<Option<(StatKey, [u8; 32])>>,
}

impl Known {
    /// A file's path.
    fn path(&self, f: &StagedFile) -> &str {
        path_in(&self.paths, f)
    }
}

/// `f`'s path in `paths` (where a check that borrows `Known`'s fields apart looks it up).
fn path_in<'p>(paths: &'p str, f: &StagedFile) -> &'p str {
    &paths[f.path.clone()]
}

/// The node under `root`.
pub struct Host {
    pub root: PathBuf,
    /// The staged files as `stage`'s manifest last listed them, and what each hashed to.
    staged: Mutex<Known>,
    /// The limit on each `systemctl` and `podman` query.
    command_timeout: Duration,
    /// Set on shutdown: the query in flight is killed, none starts.
    cancel: Cancel,
}

impl Host {
    pub fn new(root: PathBuf) -> Host {
        Host {
            root,
            staged: Mutex::new(Known::default()),
            command_timeout: edpm_core::node::config::COMMAND_TIMEOUT,
            cancel: Cancel::new(),
        }
    }

    pub fn with_command_timeout(mut self, timeout: Duration) -> Host {
        self.command_timeout = timeout;
        self
    }

    /// What stops the queries: cancel it on shutdown.
    pub fn cancel(&self) -> Cancel {
        self.cancel.clone()
    }

    /// A small text file under the root: a regular file only (a FIFO would block the loop),
    /// bounded.
    fn read(&self, rel: &str) -> std::io::Result<String> {
        use edpm_io::files::{ReadError, read_bounded};
        read_bounded(&self.root.join(rel), 1 << 20, false).map_err(|e| match e {
            ReadError::Io(e) => e,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
        })
    }

    fn hostname(&self) -> Result<String, String> {
        self.read("proc/sys/kernel/hostname")
            .or_else(|_| self.read("etc/hostname"))
            .map(|s| s.trim().to_string())
            .map_err(|e| {
                format!(
                    "neither proc/sys/kernel/hostname nor etc/hostname under {}: {e}",
                    self.root.display()
                )
            })
    }

    fn addresses(&self) -> Result<Vec<IpAddr>, String> {
        let v4 = self.read("proc/net/fib_trie");
        let v6 = self.read("proc/net/if_inet6");
        if v4.is_err() && v6.is_err() {
            return Err(format!(
                "cannot read proc/net/fib_trie or proc/net/if_inet6 under {}",
                self.root.display()
            ));
        }
        let mut out = v4.map(|t| local_v4(&t)).unwrap_or_default();
        out.extend(v6.map(|t| local_v6(&t)).unwrap_or_default());
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn os(&self) -> Result<String, String> {
        let text = self.read("etc/os-release").map_err(|e| format!("etc/os-release: {e}"))?;
        edpm_core::node::facts::os_name(&text).map_err(|e| format!("etc/os-release {e}"))
    }

    fn network(&self) -> Option<(String, Result<i32, String>)> {
        let mut found = None;
        for f in NETWORK_RETURN_CODES {
            match self.read(f) {
                Ok(t) => {
                    let code =
                        t.trim().parse::<i32>().map_err(|_| format!("not a return code: {:?}", t.trim()));
                    // A failure in either file is the one to report.
                    if !matches!(code, Ok(0)) {
                        return Some((f.to_string(), code));
                    }
                    found.get_or_insert((f.to_string(), code));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Some((f.to_string(), Err(e.to_string()))),
            }
        }
        found
    }

    /// The files `stage` recorded and whether they still hold what it wrote: stat first, hash
    /// only what changed since the last check.
    fn staged(&self) -> Result<(usize, Vec<StagedDrift>), String> {
        let mut known = self.staged.lock().unwrap_or_else(|e| e.into_inner());
        self.reread_manifest(&mut known)?;
        let Known { paths, files, seen, .. } = &mut *known;
        let path_of = |f: &StagedFile| path_in(paths, f);
        // Stats are the cost of a check where nothing changed, hashing the cost of the first:
        // both run on every core.
        let root = &self.root;
        let stats: Vec<Option<Stat>> = edpm_io::parallel::map(files, |f| {
            std::fs::symlink_metadata(root.join(path_of(f))).ok().map(|m| Stat::of(&m))
        });
        let todo: Vec<usize> = (0..files.len())
            // Only regular files are hashed: a FIFO in a staged file's place would block the
            // read (it is drift, reported below from its stat).
            .filter(|&i| match (&stats[i], &seen[i]) {
                (Some(s), _) if !s.is_file => false,
                (Some(s), Some((key, _))) => s.key != *key,
                (Some(_), None) => true,
                (None, _) => false,
            })
            .collect();
        let hashed = edpm_io::parallel::map(&todo, |&i| {
            edpm_io::files::read_existing(&root.join(path_of(&files[i])), edpm_io::files::MAX_FILE_BYTES)
                .ok()
                .flatten()
                .map(|(b, _)| edpm_core::staging::sha256(&b))
        });
        for (&i, h) in todo.iter().zip(hashed) {
            if let (Some(s), Some(h)) = (&stats[i], h) {
                seen[i] = Some((s.key, h));
            }
        }
        let mut drift = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let path = || path_of(f).to_string();
            match (&stats[i], &seen[i]) {
                (None, _) => drift.push(StagedDrift::Missing(path())),
                (Some(s), _) if !s.is_file => drift.push(StagedDrift::Changed(path())),
                // A manifest hash that is not one never matches.
                (Some(_), Some((_, sha))) if f.sha256.as_ref() != Some(sha) => {
                    drift.push(StagedDrift::Changed(path()))
                }
                (Some(s), _) if s.mode != f.mode => drift.push(StagedDrift::Mode(path(), s.mode, f.mode)),
                _ => {}
            }
        }
        Ok((files.len(), drift))
    }

    /// `stage`'s manifest, parsed again only when its stat changed (10,000 entries are most of
    /// a quiet check otherwise); what was hashed is kept for the files still listed.
    fn reread_manifest(&self, known: &mut Known) -> Result<(), String> {
        let key = std::fs::symlink_metadata(self.root.join(edpm_core::staging::MANIFEST))
            .ok()
            .map(|m| StatKey::of(&m));
        if key.is_some() && key == known.manifest {
            return Ok(());
        }
        let m = edpm_io::node_root::read_manifest(&self.root).map_err(|e| e.to_string())?;
        let before: HashMap<&str, (StatKey, [u8; 32])> =
            known.files.iter().zip(&known.seen).filter_map(|(f, s)| Some((known.path(f), (*s)?))).collect();
        let mut paths = String::with_capacity(m.files.keys().map(String::len).sum());
        let mut files = Vec::with_capacity(m.files.len());
        let mut seen = Vec::with_capacity(m.files.len());
        for (path, rec) in &m.files {
            let start = paths.len();
            paths.push_str(path);
            files.push(StagedFile {
                path: start..paths.len(),
                sha256: edpm_core::staging::parse_sha256_hex(&rec.sha256),
                mode: rec.mode,
            });
            seen.push(before.get(path.as_str()).copied());
        }
        drop(before);
        *known = Known { manifest: key, paths, files, seen };
        Ok(())
    }

    fn deployed(&self) -> Option<Result<DeployedServices, String>> {
        match self.read(DEPLOYED_SERVICES) {
            Ok(t) => Some(DeployedServices::parse(&t).map_err(|e| format!("{DEPLOYED_SERVICES} {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(Err(format!("{DEPLOYED_SERVICES}: {e}"))),
        }
    }

    fn quadlet_hashes(&self, containers: &[String]) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for c in containers {
            if let Ok(text) = self.read(&format!("{QUADLET_DIR}/edpm_{c}.container"))
                && let Some(h) =
                    text.lines().find_map(|l| l.trim().strip_prefix("# config_hash=").map(str::trim))
            {
                out.insert(c.clone(), h.to_string());
            }
        }
        out
    }

    /// podman, when an executable file is in its place (links followed); else why not: a
    /// directory there, or a file no one may execute, is no runtime.
    fn runtime(&self) -> Result<String, String> {
        use std::os::unix::fs::PermissionsExt;
        let p = self.root.join("usr/bin/podman");
        match std::fs::metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err("podman is not installed (no program at usr/bin/podman)".into())
            }
            Err(e) => Err(format!("usr/bin/podman cannot be read: {e}")),
            Ok(m) if !m.is_file() => Err("usr/bin/podman is no program (not a regular file)".into()),
            Ok(m) if m.permissions().mode() & 0o111 == 0 => Err(format!(
                "usr/bin/podman cannot be executed (mode {:04o})",
                m.permissions().mode() & 0o7777
            )),
            Ok(_) => Ok(p.display().to_string()),
        }
    }

    /// Runs one query, bounded; its stdout. Every error names the program and what happened;
    /// text from its stderr is redacted and escaped by `edpm_io::process`.
    fn query(&self, program: &str, args: &[&str]) -> Result<String, QueryError> {
        let mut spec =
            process::Spec::new(program, self.command_timeout, OUTPUT_CAP).args(args.iter().copied());
        for v in OWN_VARIABLES {
            spec = spec.env_remove(v);
        }
        let out = process::run(&spec, Some(&self.cancel)).and_then(process::Output::success).map_err(
            |e| match e {
                process::Error::Start { .. } => QueryError::Unstartable(e.to_string()),
                _ => QueryError::Failed(e.to_string()),
            },
        )?;
        tracing::debug!(program, elapsed = ?out.elapsed, bytes = out.stdout.total, "query answered");
        if out.stdout.is_cut() {
            return Err(QueryError::Failed(format!(
                "{program} printed {} bytes, more than the {OUTPUT_CAP} an answer may have; its answer was not read",
                out.stdout.total
            )));
        }
        String::from_utf8(out.stdout.bytes)
            .map_err(|_| QueryError::Failed(format!("{program} printed text that is not UTF-8")))
    }
}

impl Collect for Host {
    fn collect(&self) -> Facts {
        let deployed = self.deployed();
        let containers: Vec<String> = match &deployed {
            Some(Ok(d)) => d.services.values().flat_map(|s| s.containers.iter().cloned()).collect(),
            _ => Vec::new(),
        };
        let units: Vec<String> = containers.iter().map(|c| format!("edpm_{c}.service")).collect();
        // systemctl and podman each take about 60 ms for 50 containers on a real node (podman
        // mostly starting up): asked at once, a check waits for the slower, not both
        // (BENCHMARKS.md, node agent on real parts).
        let (containers_state, units) = edpm_io::parallel::join(
            || if containers.is_empty() { Ok(BTreeMap::new()) } else { self.podman_ps() },
            || if units.is_empty() { Ok(BTreeMap::new()) } else { self.systemctl_show(&units) },
        );
        let containers_state = containers_state
            .unwrap_or_else(|| Err(QueryError::Failed("podman ps: the query thread panicked".into())));
        // podman in its place, but the one asked could not be started (permission denied, a
        // broken interpreter): the node has no runtime it can use, whatever its file says.
        let runtime = match (self.runtime(), &containers_state) {
            (Ok(_), Err(QueryError::Unstartable(e))) => Err(format!("podman cannot be run: {e}")),
            (runtime, _) => runtime,
        };
        let containers_state = containers_state.map_err(|e| e.to_string());
        Facts {
            hostname: self.hostname(),
            addresses: self.addresses(),
            os: self.os(),
            network: self.network(),
            runtime,
            staged: self.staged(),
            units,
            quadlet_hashes: self.quadlet_hashes(&containers),
            containers: containers_state,
            // The cluster's word, which the agent loop asks for (`AgentApi::deployed_images`).
            deployed_images: None,
            deployed,
        }
    }
}

/// `fib_trie`'s local IPv4 addresses: the `|-- a.b.c.d` line before a `/32 host LOCAL` one.
fn local_v4(text: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut last: Option<IpAddr> = None;
    for line in text.lines() {
        let t = line.trim_start_matches([' ', '|', '+', '-', '`']).trim();
        if let Ok(ip) = t.parse::<IpAddr>() {
            last = Some(ip);
        } else if t.contains("host LOCAL")
            && let Some(ip) = last
        {
            out.push(ip);
        }
    }
    out
}

/// `if_inet6`: 32 hex digits per address, first column.
fn local_v6(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|l| {
            let hex = l.split_whitespace().next()?;
            let n = u128::from_str_radix(hex, 16).ok()?;
            Some(IpAddr::V6(std::net::Ipv6Addr::from(n)))
        })
        .collect()
}

impl Host {
    /// `systemctl show` of every unit at once: blocks of `Key=value` separated by blank lines.
    fn systemctl_show(&self, units: &[String]) -> Result<BTreeMap<String, UnitState>, String> {
        let mut args = vec!["show", "--property=Id,LoadState,ActiveState,SubState,NeedDaemonReload", "--"];
        args.extend(units.iter().map(String::as_str));
        let out = self.query("systemctl", &args).map_err(|e| e.to_string())?;
        Ok(parse_show(&out))
    }

    /// `podman ps --all --format json`: every container's name, health and `config_hash` label.
    fn podman_ps(&self) -> Result<BTreeMap<String, ContainerState>, QueryError> {
        let out = self.query("podman", &["ps", "--all", "--format", "json"])?;
        parse_ps(&out).map_err(QueryError::Failed)
    }
}

/// Why a query of the host gave no answer, kept apart until the facts are made: a program
/// that could not be started at all says the node has no runtime it can use.
#[derive(Debug)]
enum QueryError {
    /// The program could not be started (not found, permission denied, a broken
    /// interpreter): `process::Error::Start`.
    Unstartable(String),
    /// It ran and failed, timed out or answered what cannot be read.
    Failed(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Unstartable(e) | QueryError::Failed(e) => f.write_str(e),
        }
    }
}

pub fn parse_show(out: &str) -> BTreeMap<String, UnitState> {
    let mut map = BTreeMap::new();
    for block in out.split("\n\n") {
        let mut id = None;
        let mut u = UnitState::default();
        for line in block.lines() {
            match line.split_once('=') {
                Some(("Id", v)) => id = Some(v.to_string()),
                Some(("LoadState", v)) => u.load = v.into(),
                Some(("ActiveState", v)) => u.active = v.into(),
                Some(("SubState", v)) => u.sub = v.into(),
                Some(("NeedDaemonReload", v)) => u.need_daemon_reload = v == "yes",
                _ => {}
            }
        }
        if let Some(id) = id {
            map.insert(id, u);
        }
    }
    map
}

pub fn parse_ps(out: &str) -> Result<BTreeMap<String, ContainerState>, String> {
    let list: Vec<serde_json::Value> = serde_json::from_str(out).map_err(|e| format!("podman ps: {e}"))?;
    let mut map = BTreeMap::new();
    for c in list {
        let names: Vec<String> = match &c["Names"] {
            serde_json::Value::Array(a) => a.iter().filter_map(|n| n.as_str().map(String::from)).collect(),
            serde_json::Value::String(s) => vec![s.clone()],
            _ => continue,
        };
        let status = c["Status"].as_str().unwrap_or("");
        let health = ["unhealthy", "healthy", "starting"]
            .into_iter()
            .find(|h| status.contains(&format!("({h})")))
            .map(String::from);
        let config_hash = c["Labels"]["config_hash"].as_str().map(String::from);
        let image = c["Image"].as_str().filter(|i| !i.is_empty()).map(String::from);
        for n in names {
            map.insert(
                n,
                ContainerState {
                    health: health.clone(),
                    config_hash: config_hash.clone(),
                    image: image.clone(),
                },
            );
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The agent's staged-file memory across checks and manifest changes: drift of content,
    /// mode and presence found on a later check, hashes kept for files a new manifest still
    /// lists, and a manifest hash that is not one never matching.
    #[test]
    #[allow(clippy::disallowed_methods, reason = "the test writes its node root directly")]
    fn staged_files_are_remembered_across_checks_and_manifests() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let write = |rel: &str, body: &str, mode: u32| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let manifest = |files: &[(&str, &str, u32)]| {
            let files: serde_json::Map<String, serde_json::Value> = files
                .iter()
                .map(|(p, sha, mode)| ((*p).to_string(), serde_json::json!({"sha256": sha, "mode": mode})))
                .collect();
            let text = serde_json::json!({ "files": files }).to_string();
            // A new inode each time, as stage's atomic write gives: the stat moves.
            let p = root.join(edpm_core::staging::MANIFEST);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&p);
            std::fs::write(&p, text).unwrap();
        };
        let sha = |b: &str| edpm_core::staging::sha256_hex(b.as_bytes());
        write("etc/a.conf", "a", 0o644);
        write("etc/b.conf", "b", 0o600);
        manifest(&[("etc/a.conf", &sha("a"), 0o644), ("etc/b.conf", &sha("b"), 0o600)]);
        let host = Host::new(root.to_path_buf());
        assert_eq!(host.staged().unwrap(), (2, vec![]));
        assert_eq!(host.staged().unwrap(), (2, vec![]));
        // Same size, new content; a mode moved; then a file gone.
        write("etc/a.conf", "A", 0o644);
        std::fs::set_permissions(root.join("etc/b.conf"), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            host.staged().unwrap().1,
            vec![
                StagedDrift::Changed("etc/a.conf".into()),
                StagedDrift::Mode("etc/b.conf".into(), 0o644, 0o600)
            ]
        );
        std::fs::remove_file(root.join("etc/b.conf")).unwrap();
        assert_eq!(host.staged().unwrap().1[1], StagedDrift::Missing("etc/b.conf".into()));
        // A new manifest: a.conf as it is now, b.conf dropped, c.conf new with a broken hash.
        write("etc/c.conf", "c", 0o644);
        manifest(&[("etc/a.conf", &sha("A"), 0o644), ("etc/c.conf", "not-a-hash", 0o644)]);
        assert_eq!(host.staged().unwrap(), (2, vec![StagedDrift::Changed("etc/c.conf".into())]));
        let known = host.staged.lock().unwrap();
        assert_eq!(known.seen[0].map(|s| s.1), Some(edpm_core::staging::sha256(b"A")));
    }

    #[test]
    fn parses_procfs_addresses() {
        let trie = "Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 192.168.122.0/24 2 0 2\n        |-- 192.168.122.103\n           /32 host LOCAL\n        |-- 192.168.122.255\n           /32 link BROADCAST\n";
        assert_eq!(local_v4(trie), vec!["192.168.122.103".parse::<IpAddr>().unwrap()]);
        let v6 = "fe800000000000005054fffe000103 02 40 20 80 eth0\n00000000000000000000000000000001 01 80 10 80 lo\n";
        assert!(local_v6(v6).contains(&"::1".parse::<IpAddr>().unwrap()));
    }

    #[test]
    fn parses_systemctl_show_and_podman_ps() {
        let show = "Id=edpm_a.service\nLoadState=loaded\nActiveState=active\nSubState=running\nNeedDaemonReload=no\n\nId=edpm_b.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nNeedDaemonReload=no\n";
        let m = parse_show(show);
        assert_eq!(m["edpm_a.service"].active, "active");
        assert_eq!(m["edpm_b.service"].load, "not-found");
        let ps = r#"[{"Names":["nova_compute"],"Status":"Up 3 hours (unhealthy)","Labels":{"config_hash":"abc"}},{"Names":["iscsid"],"Status":"Up 3 hours","Labels":null}]"#;
        let m = parse_ps(ps).unwrap();
        assert_eq!(m["nova_compute"].health.as_deref(), Some("unhealthy"));
        assert_eq!(m["nova_compute"].config_hash.as_deref(), Some("abc"));
        assert_eq!(m["iscsid"].health, None);
    }
}
