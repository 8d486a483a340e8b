//! NBD URIs, as the NBD project's `doc/uri.md` names exports (and libnbd, qemu and
//! nbdkit read them): `nbd://host[:port]/export`, `nbds://…` (TLS required),
//! `nbd+unix:///export?socket=PATH` and `nbds+unix://…`.
//!
//! Query parameters read here: `socket` (Unix transports), `tls-certificates` (a
//! directory holding `ca-cert.pem` and, for a server that checks its clients,
//! `client-cert.pem` and `client-key.pem`, the layout libnbd, qemu and nbdkit use),
//! `tls-hostname` (the name the server's certificate must carry; the host by default),
//! `take-over` (claim an export another opener holds: `super::owner`),
//! `tls-psk-file` (pre-shared keys in psktool's `USERNAME:HEXKEY` format, instead of
//! certificates; the key of the URI's user, `nbds://alice@host/`, or `tls-username`,
//! else the file's only one), `tls-username`, and two of hscm's own: `connections` (how many to open when the server allows
//! several) and `timeout` (seconds any one request may take, reconnections included).
//! Anything else is refused by name rather than silently ignored.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::wire::DEFAULT_PORT;

/// How long a request may take, retries and reconnections included, unless the URI
/// says otherwise: long enough to ride out a server restart, short enough that no
/// client of the volume waits on a dead home for minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections opened to a server that allows several (NBD_FLAG_CAN_MULTI_CONN).
pub const DEFAULT_CONNECTIONS: usize = 4;
/// The most connections a URI may ask for.
pub const MAX_CONNECTIONS: usize = 16;

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Tcp { host: String, port: u16 },
    Unix { socket: PathBuf },
}

/// A parsed NBD URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdUri {
    pub transport: Transport,
    pub export: String,
    /// `nbds`: the connection is refused unless TLS is negotiated.
    pub tls: bool,
    pub tls_certificates: Option<PathBuf>,
    pub tls_hostname: Option<String>,
    /// Pre-shared keys (psktool's format) instead of certificates.
    pub tls_psk_file: Option<PathBuf>,
    /// Whose key in `tls_psk_file`: the URI's `user@`, or `tls-username=`.
    pub tls_username: Option<String>,
    /// None: [`DEFAULT_CONNECTIONS`] where the server allows several, else one.
    pub connections: Option<usize>,
    pub timeout: Duration,
    /// `take-over`: claim the export even though another opener holds it (its
    /// machine is gone or stopped; see `owner`).
    pub take_over: bool,
    /// The URI as given, for messages.
    text: String,
}

/// True when `name` is an NBD URI rather than a path.
pub fn is_nbd_uri(name: &str) -> bool {
    ["nbd://", "nbds://", "nbd+unix://", "nbds+unix://"]
        .iter()
        .any(|s| name.starts_with(s))
}

impl NbdUri {
    pub fn parse(text: &str) -> Result<NbdUri, String> {
        let bad = |why: &str| format!("{text}: {why}");
        let (scheme, rest) = text.split_once("://").ok_or_else(|| {
            bad("not an NBD URI (nbd://host/export, nbd+unix:///export?socket=PATH)")
        })?;
        let (tls, unix) = match scheme {
            "nbd" => (false, false),
            "nbds" => (true, false),
            "nbd+unix" => (false, true),
            "nbds+unix" => (true, true),
            other => {
                return Err(bad(&format!(
                    "the scheme {other:?} is not one hscm speaks (nbd, nbds, nbd+unix, nbds+unix)"
                )))
            }
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let export = percent_decode(path).map_err(|e| bad(&e))?;
        let mut socket = None;
        let mut uri = NbdUri {
            transport: Transport::Unix {
                socket: PathBuf::new(),
            },
            export,
            tls,
            tls_certificates: None,
            tls_hostname: None,
            tls_psk_file: None,
            tls_username: None,
            connections: None,
            timeout: DEFAULT_TIMEOUT,
            take_over: false,
            text: text.to_string(),
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value).map_err(|e| bad(&e))?;
            match key {
                "socket" => socket = Some(PathBuf::from(value)),
                "tls-certificates" => uri.tls_certificates = Some(PathBuf::from(value)),
                "tls-hostname" => uri.tls_hostname = Some(value),
                "take-over" => {
                    uri.take_over = match value.as_str() {
                        "" | "1" | "true" | "yes" => true,
                        "0" | "false" | "no" => false,
                        _ => return Err(bad(&format!("take-over={value}: 1 or 0"))),
                    }
                }
                "tls-psk-file" => uri.tls_psk_file = Some(PathBuf::from(value)),
                "tls-username" => uri.tls_username = Some(value),
                "connections" => {
                    let n: usize = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_CONNECTIONS).contains(n))
                        .ok_or_else(|| {
                            bad(&format!("connections={value}: a number from 1 to {MAX_CONNECTIONS}"))
                        })?;
                    uri.connections = Some(n);
                }
                "timeout" => {
                    let s: f64 = value
                        .parse()
                        .ok()
                        .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                        .ok_or_else(|| bad(&format!("timeout={value}: seconds, more than 0 and at most a day")))?;
                    uri.timeout = Duration::from_secs_f64(s);
                }
                other => {
                    return Err(bad(&format!(
                        "the query parameter {other:?} is not one hscm reads (socket, tls-certificates, tls-hostname, tls-psk-file, tls-username, connections, timeout, take-over)"
                    )))
                }
            }
        }
        // `user@` names whose pre-shared key to use (as libnbd reads it).
        let authority = match authority.rsplit_once('@') {
            Some((user, host)) => {
                let user = percent_decode(user).map_err(|e| bad(&e))?;
                if uri.tls_username.as_ref().is_some_and(|u| *u != user) {
                    return Err(bad("the user before @ and tls-username= differ"));
                }
                uri.tls_username = Some(user);
                host
            }
            None => authority,
        };
        if unix {
            if !authority.is_empty() {
                return Err(bad(
                    "a Unix-socket URI has no host: nbd+unix:///export?socket=PATH",
                ));
            }
            let socket = socket.ok_or_else(|| bad("a Unix-socket URI needs ?socket=PATH"))?;
            uri.transport = Transport::Unix { socket };
        } else {
            if socket.is_some() {
                return Err(bad("socket= belongs to nbd+unix:// URIs"));
            }
            let (host, port) = split_host_port(authority).map_err(|e| bad(&e))?;
            uri.transport = Transport::Tcp { host, port };
        }
        if uri.tls_psk_file.is_some() && !uri.tls {
            return Err(bad(
                "tls-psk-file= without TLS: use nbds:// (or nbds+unix://)",
            ));
        }
        if uri.tls_psk_file.is_some() && uri.tls_certificates.is_some() {
            return Err(bad(
                "tls-psk-file= and tls-certificates= together: TLS takes one or the other",
            ));
        }
        if uri.tls_username.is_some() && uri.tls_psk_file.is_none() {
            return Err(bad(
                "a user name belongs to pre-shared-key TLS: add ?tls-psk-file=FILE",
            ));
        }
        if uri.tls_certificates.is_some() && !uri.tls {
            return Err(bad(
                "tls-certificates= without TLS: use nbds:// (or nbds+unix://)",
            ));
        }
        Ok(uri)
    }

    /// The name the server's certificate must carry.
    pub fn server_name(&self) -> String {
        if let Some(h) = &self.tls_hostname {
            return h.clone();
        }
        match &self.transport {
            Transport::Tcp { host, .. } => host.clone(),
            Transport::Unix { .. } => "localhost".into(),
        }
    }
}

impl fmt::Display for NbdUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; the port defaults to NBD's.
fn split_host_port(authority: &str) -> Result<(String, u16), String> {
    if authority.is_empty() {
        return Err("no host: nbd://host[:port]/export".into());
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address opened with [ is not closed with ]")?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("port {p:?} is not a number from 1 to 65535"))?,
    };
    Ok((host.to_string(), port))
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape at byte {i} of {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} decodes to bytes that are not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uri_forms_of_the_standard() {
        let u = NbdUri::parse("nbd://example.com/disk").unwrap();
        assert_eq!(
            u.transport,
            Transport::Tcp {
                host: "example.com".into(),
                port: 10809
            }
        );
        assert_eq!(u.export, "disk");
        assert!(!u.tls);
        let u = NbdUri::parse("nbds://[::1]:1234/a%20b?tls-certificates=/etc/pki").unwrap();
        assert_eq!(
            u.transport,
            Transport::Tcp {
                host: "::1".into(),
                port: 1234
            }
        );
        assert_eq!(u.export, "a b");
        assert!(u.tls);
        assert_eq!(u.tls_certificates, Some(PathBuf::from("/etc/pki")));
        let u = NbdUri::parse("nbd+unix:///?socket=/run/x.sock&timeout=2.5&connections=2").unwrap();
        assert_eq!(
            u.transport,
            Transport::Unix {
                socket: "/run/x.sock".into()
            }
        );
        assert_eq!(u.export, "");
        assert_eq!(u.timeout, Duration::from_millis(2500));
        assert_eq!(u.connections, Some(2));
        assert_eq!(u.server_name(), "localhost");
        assert_eq!(
            u.to_string(),
            "nbd+unix:///?socket=/run/x.sock&timeout=2.5&connections=2"
        );
        let u = NbdUri::parse("nbds://alice@h:99/x?tls-psk-file=/k.psk").unwrap();
        assert_eq!(u.tls_username.as_deref(), Some("alice"));
        assert_eq!(u.tls_psk_file, Some(PathBuf::from("/k.psk")));
        assert_eq!(
            u.transport,
            Transport::Tcp {
                host: "h".into(),
                port: 99
            }
        );
        let u = NbdUri::parse("nbds+unix://bob@/x?socket=/s&tls-psk-file=/k").unwrap();
        assert_eq!(u.tls_username.as_deref(), Some("bob"));
    }

    #[test]
    fn mistakes_are_named() {
        for (uri, says) in [
            ("http://h/x", "not one hscm speaks"),
            ("nbd:///x", "no host"),
            ("nbd://h:0/x", "port"),
            ("nbd://h:99999/x", "port"),
            ("nbd+unix:///x", "needs ?socket"),
            ("nbd+unix://h/x?socket=/s", "no host"),
            ("nbd://h/x?socket=/s", "belongs to nbd+unix"),
            ("nbd://h/x?tls-certificates=/d", "without TLS"),
            ("nbd://h/x?tls-psk-file=/k", "without TLS"),
            (
                "nbds://h/x?tls-psk-file=/k&tls-certificates=/d",
                "one or the other",
            ),
            ("nbds://a@h/x", "add ?tls-psk-file"),
            ("nbds://a@h/x?tls-psk-file=/k&tls-username=b", "differ"),
            ("nbd://h/x?colour=red", "\"colour\""),
            ("nbd://h/x?connections=99", "connections=99"),
            ("nbd://h/x?timeout=-1", "timeout=-1"),
            ("nbd://h/%zz", "percent escape"),
            ("nbd://[::1/x", "not closed"),
            ("/a/path", "not an NBD URI"),
        ] {
            let e = NbdUri::parse(uri).unwrap_err();
            assert!(e.contains(says) && e.starts_with(uri), "{uri}: {e}");
        }
        assert!(is_nbd_uri("nbds+unix:///x?socket=/s"));
        assert!(!is_nbd_uri("/var/lib/hscm/vol"));
    }
}
