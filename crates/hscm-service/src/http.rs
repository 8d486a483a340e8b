//! The metrics endpoint: `GET /metrics` (Prometheus text) and `GET /status` (the same
//! snapshot as JSON) over plain HTTP/1.1, one response per connection.
//!
//! Bounded against a client that connects and never sends, sends a byte now and
//! then, or never reads: a few connections are served at once (more wait in the
//! listen queue, in the order they came, rather than being closed), each has one
//! second from accept to send its request head and two more to take the answer
//! (deadlines, not limits per read), and a request head larger than a few KiB is
//! refused. So slow clients hold a slot for seconds at most, and a scrape behind
//! them is answered within about that. Scrapers send one small GET; nothing else
//! is offered.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::exposition;
use crate::Probe;

/// Connections answered at once.
const MAX_CONNECTIONS: usize = 4;
/// Time a client has, from accept, to send its request head.
const HEAD_DEADLINE: Duration = Duration::from_secs(1);
/// Time it has then to take the answer.
const ANSWER_DEADLINE: Duration = Duration::from_secs(2);
/// The largest request head read.
const MAX_HEAD: usize = 8 << 10;
/// How often the accept loop looks at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Why the metrics endpoint cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error("{addr:?} is not an ADDRESS:PORT to serve metrics on: {why}")]
    Address { addr: String, why: String },
    #[error("cannot serve metrics on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: io::Error,
    },
}

/// A running metrics endpoint; dropping it stops it.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// `ADDR:PORT`, or a bare `PORT` / `:PORT` for loopback: metrics reach the network
/// only when asked.
pub fn resolve(addr: &str) -> Result<SocketAddr, HttpError> {
    let full = if let Some(port) = addr.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else if !addr.is_empty() && addr.chars().all(|c| c.is_ascii_digit()) {
        format!("127.0.0.1:{addr}")
    } else {
        addr.to_string()
    };
    let bad = |why: String| HttpError::Address {
        addr: addr.to_string(),
        why,
    };
    full.to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("it resolves to no address".into()))
}

impl MetricsServer {
    /// Listens on `addr` ([`resolve`]) and answers scrapes with `probe`'s snapshot.
    pub fn start(addr: &str, probe: Probe) -> Result<MetricsServer, HttpError> {
        let at = resolve(addr)?;
        let listener = TcpListener::bind(at).map_err(|source| HttpError::Bind {
            addr: at.to_string(),
            source,
        })?;
        let bound = listener.local_addr().map_err(|source| HttpError::Bind {
            addr: at.to_string(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| HttpError::Bind {
                addr: at.to_string(),
                source,
            })?;
        if !bound.ip().is_loopback() {
            tracing::warn!(
                "serving metrics and /status on {bound}, beyond loopback: anyone who can reach it sees this instance's paths, process IDs and figures (it authenticates nobody)"
            );
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("hscm-metrics".into())
                .spawn(move || accept_loop(listener, probe, stop))
                .map_err(|source| HttpError::Bind {
                    addr: at.to_string(),
                    source,
                })?
        };
        Ok(MetricsServer {
            addr: bound,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens (the port the system chose, for `:0`).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, probe: Probe, stop: Arc<AtomicBool>) {
    let busy = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        // Full: the next ones wait in the listen queue for a slot (each slot frees
        // within its deadlines), in the order they came.
        if busy.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            std::thread::sleep(POLL / 5);
            continue;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                busy.fetch_add(1, Ordering::Relaxed);
                let (probe, done) = (probe.clone(), busy.clone());
                let spawned = std::thread::Builder::new()
                    .name("hscm-metrics-client".into())
                    .spawn(move || {
                        if let Err(e) = answer(stream, &probe) {
                            tracing::debug!("metrics client: {e}");
                        }
                        done.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    // The closure, and its count, never ran.
                    busy.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(e) => {
                tracing::warn!("metrics endpoint: accept failed: {e}");
                std::thread::sleep(POLL * 10);
            }
        }
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// GET (or HEAD: the answer's head only) of a path, its query dropped.
    Page {
        page: &'a str,
        head_only: bool,
    },
    MethodNotAllowed,
}

/// The route of a request head (the bytes up to the blank line): its first line's
/// method and path. Anything malformed is a route to a page that does not exist, or
/// a method not allowed, never a panic.
pub fn route(head: &[u8]) -> Route<'_> {
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default();
    let line = std::str::from_utf8(line).unwrap_or("");
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return Route::MethodNotAllowed;
    }
    let page = target.split('?').next().unwrap_or("");
    Route::Page { page, head_only }
}

/// Reads one request head and answers it.
fn answer(mut stream: TcpStream, probe: &Probe) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let head_by = std::time::Instant::now() + HEAD_DEADLINE;
    stream.set_write_timeout(Some(ANSWER_DEADLINE))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"request head too large\n",
                false,
            )?;
            // Closing with unread bytes would reset the connection and lose the
            // answer: read on (boundedly, within the timeout) until the client stops.
            stream.shutdown(std::net::Shutdown::Write)?;
            let _ = io::copy(&mut (&stream).take(4 * MAX_HEAD as u64), &mut io::sink());
            return Ok(());
        }
        // Each read may wait only what is left of the deadline.
        let left = head_by.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no whole request head within the deadline",
            ));
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    // The answer's deadline (a write waits at most what is left of it, and the
    // answer is small enough for a few writes).
    stream.set_write_timeout(Some(ANSWER_DEADLINE))?;
    let (page, head_only) = match route(&head) {
        Route::Page { page, head_only } => (page, head_only),
        Route::MethodNotAllowed => {
            return respond(
                &mut stream,
                "405 Method Not Allowed",
                "text/plain",
                b"only GET\n",
                false,
            )
        }
    };
    match page {
        "/metrics" => {
            let body = exposition::render(&probe());
            respond(
                &mut stream,
                "200 OK",
                exposition::CONTENT_TYPE,
                body.as_bytes(),
                head_only,
            )
        }
        "/status" => {
            let body = serde_json::to_vec_pretty(&probe()).unwrap_or_default();
            respond(&mut stream, "200 OK", "application/json", &body, head_only)
        }
        "/" => respond(
            &mut stream,
            "200 OK",
            "text/plain",
            b"hscm: /metrics (Prometheus text), /status (JSON)\n",
            head_only,
        ),
        _ => respond(
            &mut stream,
            "404 Not Found",
            "text/plain",
            b"not found: try /metrics\n",
            head_only,
        ),
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_the_first_line_s_method_and_path() {
        let page = |page, head_only| Route::Page { page, head_only };
        assert_eq!(
            route(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            page("/metrics", false)
        );
        assert_eq!(
            route(b"HEAD /status HTTP/1.0\r\n\r\n"),
            page("/status", true)
        );
        assert_eq!(route(b"PUT / HTTP/1.1\r\n\r\n"), Route::MethodNotAllowed);
        assert_eq!(route(b"\xff\xfe\r\n\r\n"), Route::MethodNotAllowed);
        assert_eq!(route(b"GET\r\n\r\n"), page("", false));
    }

    #[test]
    fn a_bare_port_is_loopback() {
        assert_eq!(resolve("9477").unwrap().to_string(), "127.0.0.1:9477");
        assert_eq!(resolve(":9477").unwrap().to_string(), "127.0.0.1:9477");
        assert_eq!(resolve("0.0.0.0:9").unwrap().to_string(), "0.0.0.0:9");
        assert!(resolve("nonsense").is_err());
    }

    fn get(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_metrics_and_status_and_refuses_the_rest() {
        let probe: Probe = Arc::new(|| crate::Status {
            version: "9.9".into(),
            ..Default::default()
        });
        let server = MetricsServer::start("127.0.0.1:0", probe).unwrap();
        let addr = server.local_addr();
        let metrics = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(metrics.starts_with("HTTP/1.1 200 OK"), "{metrics}");
        assert!(metrics.contains("hscm_build_info{version=\"9.9\"} 1"));
        let status = get(addr, b"GET /status HTTP/1.0\r\n\r\n");
        assert!(status.contains("\"version\": \"9.9\""), "{status}");
        assert!(get(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(get(addr, b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        let huge = format!(
            "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD * 2)
        );
        assert!(get(addr, huge.as_bytes()).starts_with("HTTP/1.1 431"));
    }

    #[test]
    fn a_silent_client_does_not_hold_up_a_scrape() {
        let probe: Probe = Arc::new(crate::Status::default);
        let server = MetricsServer::start("127.0.0.1:0", probe).unwrap();
        let addr = server.local_addr();
        let _silent: Vec<TcpStream> = (0..MAX_CONNECTIONS * 2)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        // The silent ones time out; a scrape after them is answered.
        std::thread::sleep(HEAD_DEADLINE + Duration::from_millis(300));
        let metrics = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(metrics.starts_with("HTTP/1.1 200 OK"), "{metrics}");
    }

    /// Slow clients sending a byte of their head now and then (a slow-loris, within
    /// any limit per read) hold every slot; a scrape behind them waits in the queue
    /// and is answered within 2 s all the same.
    #[test]
    fn slow_clients_do_not_hold_up_a_scrape() {
        let probe: Probe = Arc::new(crate::Status::default);
        let server = MetricsServer::start("127.0.0.1:0", probe).unwrap();
        let addr = server.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let slow: Vec<_> = (0..MAX_CONNECTIONS)
            .map(|_| {
                let stop = stop.clone();
                let mut s = TcpStream::connect(addr).unwrap();
                std::thread::spawn(move || {
                    for b in b"GET /metrics HTTP/1.1\r\nX: aaaaaaaaaaaaaaaa" {
                        if stop.load(Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(300));
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let start = std::time::Instant::now();
        let metrics = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
        let took = start.elapsed();
        assert!(metrics.starts_with("HTTP/1.1 200 OK"), "{metrics}");
        assert!(took < Duration::from_secs(2), "the scrape took {took:?}");
        stop.store(true, Ordering::Relaxed);
        for t in slow {
            t.join().unwrap();
        }
    }
}
