//! TLS with pre-shared keys, on OpenSSL: rustls, which carries the X.509 mode, has
//! no external PSKs (its issue 174). The keys come from a file in psktool's format,
//! as nbdkit's and qemu-nbd's `--tls-psk` read it: one `USERNAME:HEXKEY` a line
//! (parsed by `hscm_durable::nbd::psk`, which the client side shares).
//! OpenSSL's PSK server callback serves TLS 1.2's PSK suites and, with a SHA-256
//! suite, TLS 1.3's external PSKs, which is what GnuTLS clients (libnbd, qemu) offer.
//!
//! Once the handshake is done, a pump thread carries bytes between the session and
//! the server's plaintext end, as for X.509 (see `tls.rs`), never blocking on either
//! side.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openssl::ssl::{ErrorCode, Ssl, SslContext, SslMethod, SslStream, SslVersion};

use hscm_durable::nbd::psk::parse_psk_file;

use crate::{Error, Stream};

/// The server's side of PSK TLS: its context, holding the keys.
#[derive(Clone)]
pub(crate) struct PskServer {
    context: Arc<SslContext>,
    users: usize,
}

impl PskServer {
    /// Reads `file` (psktool's `USERNAME:HEXKEY` lines) and builds the context.
    pub fn from_file(file: &Path) -> Result<PskServer, Error> {
        let text = std::fs::read_to_string(file).map_err(|source| Error::Setup {
            what: format!("reading the PSK file {}", file.display()),
            source,
        })?;
        let keys = parse_psk_file(&text).map_err(|why| Error::Setup {
            what: format!("{}: {why}", file.display()),
            source: io::Error::from(io::ErrorKind::InvalidData),
        })?;
        let users = keys.len();
        let ssl_err = |e: openssl::error::ErrorStack| Error::Setup {
            what: format!("setting up PSK TLS: {e}"),
            source: io::Error::other(e.to_string()),
        };
        let mut b = SslContext::builder(SslMethod::tls_server()).map_err(ssl_err)?;
        b.set_min_proto_version(Some(SslVersion::TLS1_2))
            .map_err(ssl_err)?;
        // TLS 1.2: the PSK suites with forward secrecy first. TLS 1.3's defaults
        // include the SHA-256 suite the PSK callback works with.
        b.set_cipher_list("ECDHE-PSK:DHE-PSK:PSK:!aNULL:!eNULL:!MD5")
            .map_err(ssl_err)?;
        b.set_psk_server_callback(move |_ssl, identity, out| {
            let key = identity
                .and_then(|id| std::str::from_utf8(id).ok())
                .and_then(|id| keys.get(id));
            match key {
                Some(key) if key.len() <= out.len() => {
                    out[..key.len()].copy_from_slice(key);
                    Ok(key.len())
                }
                // An unknown user: no key, and the handshake fails.
                _ => Ok(0),
            }
        });
        Ok(PskServer {
            context: Arc::new(b.build()),
            users,
        })
    }

    pub fn users(&self) -> usize {
        self.users
    }

    /// The handshake on `socket`, then the pump; the plaintext end.
    pub fn start(&self, socket: Stream, send_timeout: Duration) -> Result<Stream, Error> {
        let tls_err = |what: &str, e: String| Error::Protocol(format!("TLS {what}: {e}"));
        let ssl = Ssl::new(&self.context).map_err(|e| tls_err("setup", e.to_string()))?;
        let stream = ssl
            .accept(socket)
            .map_err(|e| tls_err("handshake", e.to_string()))?;
        let (plain, pumped) = UnixStream::pair()?;
        std::thread::Builder::new()
            .name("nbd-tls-psk".into())
            .spawn(move || {
                if let Err(e) = pump(stream, pumped, send_timeout) {
                    tracing::debug!("PSK TLS connection ended: {e}");
                }
            })?;
        Ok(Stream::Unix(plain))
    }
}

const BACKLOG: usize = 1 << 20;

/// Carries bytes between the TLS session and the server's plaintext end until
/// either closes or the client stops taking what is sent for `send_timeout`.
fn pump(
    mut tls: SslStream<Stream>,
    mut local: UnixStream,
    send_timeout: Duration,
) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags};
    super::set_nonblocking(tls.get_ref(), true)?;
    local.set_nonblocking(true)?;
    let mut to_local: Vec<u8> = Vec::new();
    let mut to_client: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut client_open = true;
    // What OpenSSL waits for on the socket before a read or write can go on.
    let mut read_wants_out = false;
    let mut write_wants_in = false;
    let mut stalled_since: Option<Instant> = None;
    loop {
        if !client_open && to_local.is_empty() {
            let _ = local.shutdown(std::net::Shutdown::Write);
            return Ok(());
        }
        // Ciphertext for the client first: a write that OpenSSL started must be
        // retried with the same bytes.
        if !to_client.is_empty() {
            match tls.ssl_write(&to_client) {
                Ok(n) => {
                    to_client.drain(..n);
                    stalled_since = None;
                    write_wants_in = false;
                }
                Err(e) if e.code() == ErrorCode::WANT_WRITE => {
                    let since = *stalled_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > send_timeout {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the client stopped taking replies",
                        ));
                    }
                }
                Err(e) if e.code() == ErrorCode::WANT_READ => write_wants_in = true,
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
        let mut sflags = PollFlags::empty();
        if (client_open && to_local.len() < BACKLOG) || write_wants_in {
            sflags |= PollFlags::IN;
        }
        if !to_client.is_empty() || read_wants_out {
            sflags |= PollFlags::OUT;
        }
        let mut lflags = PollFlags::empty();
        if to_client.is_empty() {
            lflags |= PollFlags::IN;
        }
        if !to_local.is_empty() {
            lflags |= PollFlags::OUT;
        }
        let pending = tls.ssl().pending() > 0;
        {
            let mut fds = [
                PollFd::from_borrowed_fd(super::socket_fd(tls.get_ref()), sflags),
                PollFd::from_borrowed_fd(local.as_fd(), lflags),
            ];
            if !pending {
                let _ = poll(&mut fds, 1000);
            }
        }
        // Everything the session can decrypt now.
        if client_open && to_local.len() < BACKLOG {
            read_wants_out = false;
            loop {
                match tls.ssl_read(&mut buf) {
                    Ok(0) => {
                        client_open = false;
                        break;
                    }
                    Ok(n) => to_local.extend_from_slice(&buf[..n]),
                    Err(e) if e.code() == ErrorCode::WANT_READ => break,
                    Err(e) if e.code() == ErrorCode::WANT_WRITE => {
                        read_wants_out = true;
                        break;
                    }
                    Err(e) if e.code() == ErrorCode::ZERO_RETURN => {
                        client_open = false;
                        break;
                    }
                    Err(e) => return Err(io::Error::other(e.to_string())),
                }
            }
        }
        if !to_local.is_empty() {
            match local.write(&to_local) {
                Ok(n) => {
                    to_local.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if to_client.is_empty() {
            match local.read(&mut buf) {
                Ok(0) => {
                    // The server ended the connection.
                    super::set_nonblocking(tls.get_ref(), false)?;
                    let _ = tls.shutdown();
                    return Ok(());
                }
                Ok(n) => to_client.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
}
