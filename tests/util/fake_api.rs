//! A small fake Kubernetes API server on loopback, for testing the kube source without a
//! cluster. It serves list/get for the objects it was given, answers 404 for resources whose
//! CRD was not registered and for absent objects (with a proper `Status` body), filters lists
//! by equality label selectors, records every request, and injects faults on request paths:
//! an HTTP status (403, 409, 429, 5xx) or a delay, each for a given number of requests.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub enum Fault {
    Status(u16),
    Delay(Duration),
}

#[derive(Default)]
struct State {
    objects: Vec<Value>,
    /// The last resourceVersion handed out.
    version: u64,
    crds: HashSet<(String, String, String)>,
    faults: Vec<(String, Fault, usize)>,
    requests: Vec<String>,
    bodies: Vec<(String, Value)>,
}

pub struct FakeApi {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    dir: tempfile::TempDir,
}

impl FakeApi {
    pub fn start() -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if sp.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || serve(conn, &st));
            }
        });
        FakeApi { addr, state, stop, dir: tempfile::tempdir().unwrap() }
    }

    pub fn add_crd(&self, group: &str, version: &str, plural: &str) {
        self.state.lock().unwrap().crds.insert((group.into(), version.into(), plural.into()));
    }

    pub fn put(&self, mut obj: Value) {
        let mut st = self.state.lock().unwrap();
        st.version += 1;
        obj["metadata"]["resourceVersion"] = json!(st.version.to_string());
        st.objects.push(obj);
    }

    /// Fails the next `times` requests whose path contains `path`.
    pub fn fault(&self, path: &str, fault: Fault, times: usize) {
        self.state.lock().unwrap().faults.push((path.into(), fault, times));
    }

    /// The stored object of a kind and name, as the server holds it now.
    pub fn object(&self, kind: &str, name: &str) -> Option<Value> {
        self.state
            .lock()
            .unwrap()
            .objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .cloned()
    }

    /// Request bodies seen for paths containing `path`, as JSON.
    pub fn bodies(&self, path: &str) -> Vec<Value> {
        self.state
            .lock()
            .unwrap()
            .bodies
            .iter()
            .filter(|(p, _)| p.contains(path))
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// Requests seen so far, as `METHOD /path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().requests.clone()
    }

    /// A kubeconfig pointing at this server, context namespace `openstack`.
    pub fn kubeconfig(&self) -> PathBuf {
        let p = self.dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\nusers:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: openstack\ncurrent-context: fake\n",
            self.addr
        );
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn plural(kind: &str) -> String {
    format!("{}s", kind.to_lowercase())
}

fn status(code: u16, message: &str) -> (u16, Value) {
    let reason = match code {
        403 => "Forbidden",
        404 => "NotFound",
        400 => "BadRequest",
        409 => "Conflict",
        429 => "TooManyRequests",
        _ => "InternalError",
    };
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}),
    )
}

fn decode(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap_or(b'?'));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn matches_selector(obj: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| match term.split_once('=') {
        Some((k, v)) => obj["metadata"]["labels"][k.trim_end_matches('=')] == v,
        None => !obj["metadata"]["labels"][term].is_null(),
    })
}

/// Server-side apply, with the semantics the client relies on: a `resourceVersion` in the
/// patch is a precondition (409 Conflict when the object changed or does not exist), fields
/// the patch does not name are kept (another manager's), and every write bumps the version.
fn apply(
    state: &Mutex<State>,
    api_version: &str,
    plural_name: &str,
    ns: &str,
    name: &str,
    body: &[u8],
) -> (u16, Value) {
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return status(400, "body is not JSON");
    };
    let mut st = state.lock().unwrap();
    st.version += 1;
    let version = st.version.to_string();
    let pos = st.objects.iter().position(|o| {
        o["apiVersion"] == api_version
            && plural(o["kind"].as_str().unwrap_or("")) == plural_name
            && o["metadata"]["namespace"] == ns
            && o["metadata"]["name"] == name
    });
    let precondition = patch["metadata"]["resourceVersion"].as_str();
    match (pos, precondition) {
        (Some(i), Some(rv)) if st.objects[i]["metadata"]["resourceVersion"] != rv => status(
            409,
            "the object has been modified; please apply your changes to the latest version and try again",
        ),
        (None, Some(_)) => status(409, "the object does not exist any more"),
        (Some(i), _) => {
            let obj = &mut st.objects[i];
            if let (Some(have), Some(new)) = (obj["spec"].as_object_mut(), patch["spec"].as_object()) {
                for (k, v) in new {
                    have.insert(k.clone(), v.clone());
                }
            }
            obj["metadata"]["resourceVersion"] = json!(version);
            (200, obj.clone())
        }
        (None, None) => {
            let mut obj = patch.clone();
            obj["metadata"]["resourceVersion"] = json!(version);
            st.objects.push(obj.clone());
            (201, obj)
        }
    }
}

fn route(state: &Mutex<State>, method: &str, target: &str, body: &[u8]) -> (u16, Value) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let selector =
        query.split('&').find_map(|kv| kv.strip_prefix("labelSelector=")).map(decode).unwrap_or_default();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let st = state.lock().unwrap();
    // /api/v1/namespaces/{ns}/{plural}[/{name}] or /apis/{g}/{v}/namespaces/{ns}/{plural}[/{name}]
    let (group, version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return status(404, "the server could not find the requested resource"),
    };
    let (ns, plural_name, name) = match rest {
        ["namespaces", ns, p] => (*ns, *p, None),
        ["namespaces", ns, p, n] => (*ns, *p, Some(*n)),
        _ => return status(404, "the server could not find the requested resource"),
    };
    let known = group.is_empty() || st.crds.contains(&(group.into(), version.into(), plural_name.into()));
    if !known || !(method == "GET" || (method == "PATCH" && name.is_some())) {
        return status(404, "the server could not find the requested resource");
    }
    let api_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    let mine = |o: &&Value| {
        o["apiVersion"] == api_version.as_str()
            && plural(o["kind"].as_str().unwrap_or("")) == plural_name
            && o["metadata"]["namespace"] == ns
    };
    if method == "PATCH" {
        drop(st);
        return apply(state, &api_version, plural_name, ns, name.unwrap_or_default(), body);
    }
    match name {
        Some(n) => match st.objects.iter().filter(mine).find(|o| o["metadata"]["name"] == n) {
            Some(o) => (200, o.clone()),
            None => status(404, &format!("{plural_name} \"{n}\" not found")),
        },
        None => {
            let items: Vec<Value> =
                st.objects.iter().filter(mine).filter(|o| matches_selector(o, &selector)).cloned().collect();
            (
                200,
                json!({"apiVersion": api_version, "kind": "List", "metadata": {"resourceVersion": "7"}, "items": items}),
            )
        }
    }
}

fn serve(conn: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let fault = {
        let mut st = state.lock().unwrap();
        st.requests.push(format!("{method} {target}"));
        if let Ok(v) = serde_json::from_slice::<Value>(&body) {
            st.bodies.push((target.to_string(), v));
        }
        let hit = st.faults.iter_mut().find(|(p, _, n)| *n > 0 && target.contains(p.as_str()));
        hit.map(|(_, f, n)| {
            *n -= 1;
            f.clone()
        })
    };
    let (code, value) = match fault {
        Some(Fault::Status(code)) => status(code, "injected fault"),
        Some(Fault::Delay(d)) => {
            std::thread::sleep(d);
            route(state, method, target, &body)
        }
        None => route(state, method, target, &body),
    };
    let body = value.to_string();
    let response = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut conn = conn;
    let _ = conn.write_all(response.as_bytes());
}
