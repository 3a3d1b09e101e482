//! The bit of HTTP/1.1 the fake OpenStack services speak (`fake_nova`, and the Manila fake of
//! the integration tests): one request per connection, `Content-Length` bodies, JSON answers,
//! `Connection: close`. A thread per connection, so a slow answer delays no other. Plain, or
//! TLS (rustls) with a given certificate, for the clients' CA-bundle paths.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};

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
    serve_with(None, handle)
}

/// [`serve`] over TLS, with this certificate chain and key (PEM); the client must trust the
/// chain's CA.
pub fn serve_tls<F>(cert_pem: &str, key_pem: &str, handle: F) -> SocketAddr
where
    F: Fn(&Request, SocketAddr) -> (u16, String, Value) + Send + Sync + 'static,
{
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    serve_with(Some(std::sync::Arc::new(config)), handle)
}

fn serve_with<F>(tls: Option<std::sync::Arc<rustls::ServerConfig>>, handle: F) -> SocketAddr
where
    F: Fn(&Request, SocketAddr) -> (u16, String, Value) + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::sync::Arc::new(handle);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let (handle, tls) = (handle.clone(), tls.clone());
            std::thread::spawn(move || match tls {
                None => exchange(BufReader::new(conn), addr, &*handle),
                Some(config) => {
                    // A client that does not trust the certificate ends the handshake: no answer.
                    let Ok(server) = rustls::ServerConnection::new(config) else { return };
                    exchange(BufReader::new(rustls::StreamOwned::new(server, conn)), addr, &*handle);
                }
            });
        }
    });
    addr
}

fn exchange<S: Read + Write>(
    mut reader: BufReader<S>,
    addr: SocketAddr,
    handle: &dyn Fn(&Request, SocketAddr) -> (u16, String, Value),
) {
    if let Some(req) = read(&mut reader) {
        let (code, extra, value) = handle(&req, addr);
        respond(reader.get_mut(), code, &extra, &value);
    }
}

fn read<S: Read>(reader: &mut BufReader<S>) -> Option<Request> {
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

fn respond<W: Write>(conn: &mut W, code: u16, extra: &str, value: &Value) {
    let body = value.to_string();
    let resp = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        reason(code),
        body.len()
    );
    let _ = conn.write_all(resp.as_bytes());
    let _ = conn.flush();
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
