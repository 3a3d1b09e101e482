//! The bit of HTTP/1.1 the fake OpenStack services speak (`fake_nova`, and the Manila fake of
//! the integration tests): one request per connection, `Content-Length` bodies, JSON answers,
//! `Connection: close`. A thread per connection, so a slow answer delays no other.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use serde_json::Value;

/// One request as received.
pub struct Request {
    /// The request line, as sent.
    pub line: String,
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Header lines, as sent (without their line ends).
    pub headers: Vec<String>,
    pub body: String,
}

impl Request {
    /// A header's value (names compared without case).
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.iter().find_map(|h| {
            h.split_once(':')
                .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
                .map(|(_, v)| v.trim().to_string())
        })
    }
}

/// Binds a loopback port and serves every connection on a thread of its own with `handle`,
/// which answers with (status, extra header lines ending in `\r\n`, JSON body).
pub fn serve<F>(handle: F) -> SocketAddr
where
    F: Fn(&Request, SocketAddr) -> (u16, String, Value) + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::sync::Arc::new(handle);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let handle = handle.clone();
            std::thread::spawn(move || {
                if let Some(req) = read(&conn) {
                    let (code, extra, value) = handle(&req, addr);
                    respond(conn, code, &extra, &value);
                }
            });
        }
    });
    addr
}

fn read(conn: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return None;
    }
    let mut headers = Vec::new();
    let mut length = 0;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        headers.push(h.trim_end().to_string());
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or("").to_string(), words.next().unwrap_or("").to_string());
    Some(Request {
        line: line.trim_end().to_string(),
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn respond(mut conn: TcpStream, code: u16, extra: &str, value: &Value) {
    let body = value.to_string();
    let resp = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        reason(code),
        body.len()
    );
    let _ = conn.write_all(resp.as_bytes());
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        406 => "Not Acceptable",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}
