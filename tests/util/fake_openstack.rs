//! A fake Keystone + Manila on loopback: application-credential authentication (401 for wrong
//! credentials), a catalog with a sharev2 endpoint, a share's export locations and a cephx
//! access rule, each requiring the issued token; unknown IDs answer 404.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub const TOKEN: &str = "tok-123";
pub const APP_ID: &str = "app-id";
pub const APP_SECRET: &str = "app-secret";
pub const SHARE: &str = "share-1";
pub const ACCESS: &str = "access-1";
pub const EXPORT: &str = "192.0.2.11:6789,192.0.2.12:6789:/volumes/_nogroup/share-1";
pub const KEY: &str = "AQDfakeManilaCephxKey==";

pub struct FakeOpenStack {
    pub addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FakeOpenStack {
    pub fn start() -> FakeOpenStack {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let r = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let r = r.clone();
                std::thread::spawn(move || serve(conn, addr, &r));
            }
        });
        FakeOpenStack { addr, requests }
    }

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(conn: TcpStream, addr: std::net::SocketAddr, requests: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        headers.push(h.trim_end().to_string());
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let header = |name: &str| {
        headers.iter().find_map(|h| {
            h.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string())
        })
    };
    requests.lock().unwrap().push(format!(
        "{method} {path} microversion={}",
        header("X-OpenStack-Manila-API-Version").unwrap_or_default()
    ));
    let authorized = header("X-Auth-Token").as_deref() == Some(TOKEN);
    let (code, extra, value): (u16, &str, Value) = match (method, path) {
        ("POST", "/v3/auth/tokens") => {
            let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let cred = &req["auth"]["identity"]["application_credential"];
            if cred["id"] == APP_ID && cred["secret"] == APP_SECRET {
                let catalog = json!({"token": {"catalog": [{"type": "sharev2", "endpoints": [
                    {"interface": "public", "region_id": "regionOne", "url": "http://public.invalid/v2"},
                    {"interface": "internal", "region_id": "regionOne", "url": format!("http://{addr}/manila/v2")}]}]}});
                (201, "X-Subject-Token: tok-123\r\n", catalog)
            } else {
                (
                    401,
                    "",
                    json!({"error": {"code": 401, "message": "The request you have made requires authentication."}}),
                )
            }
        }
        ("GET", _) if !authorized => (401, "", json!({"error": "no token"})),
        ("GET", p) if p == format!("/manila/v2/shares/{SHARE}/export_locations") => (
            200,
            "",
            json!({"export_locations": [{"path": "192.0.2.99:6789:/volumes/_nogroup/other", "preferred": false}, {"path": EXPORT, "preferred": true}]}),
        ),
        ("GET", p) if p == format!("/manila/v2/share-access-rules/{ACCESS}") => (
            200,
            "",
            json!({"access": {"access_to": "edpm", "access_key": KEY, "access_type": "cephx", "state": "active"}}),
        ),
        _ => (404, "", json!({"itemNotFound": {"code": 404}})),
    };
    let body = value.to_string();
    let resp = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut conn = conn;
    let _ = conn.write_all(resp.as_bytes());
}
