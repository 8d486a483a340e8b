//! Pre-shared keys for NBD's TLS, in the format nbdkit's and qemu-nbd's `--tls-psk`
//! read (GnuTLS's psktool writes it): one `USERNAME:HEXKEY` a line. The parser is
//! shared by both ends: the client here, the server in hscm-nbd.
//!
//! The client's side runs on the system's OpenSSL (feature `psk`): rustls has no
//! external PSKs. It offers TLS 1.2's PSK suites (forward-secret ones first) and,
//! through the same callback, TLS 1.3's external PSK, which GnuTLS servers take.

use std::collections::HashMap;

/// Refuses a secret file others may read, as ssh refuses such keys: whoever can read
/// a key can be its owner (a PSK file, a private key), on either end.
pub fn check_private(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is mode {:04o}: others may read this secret (chmod 600 it)",
                path.display(),
                mode & 0o7777
            ),
        ));
    }
    Ok(())
}

/// psktool's format: `USERNAME:HEXKEY` a line; blank lines and `#` comments skipped.
pub fn parse_psk_file(text: &str) -> Result<HashMap<String, Vec<u8>>, String> {
    let mut keys = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (user, hex) = line
            .split_once(':')
            .ok_or_else(|| format!("line {}: not USERNAME:HEXKEY", i + 1))?;
        if user.is_empty() {
            return Err(format!("line {}: an empty username", i + 1));
        }
        let key =
            decode_hex(hex.trim()).ok_or_else(|| format!("line {}: the key is not hex", i + 1))?;
        if key.is_empty() || key.len() > 256 {
            return Err(format!(
                "line {}: a key of {} bytes (1 to 256)",
                i + 1,
                key.len()
            ));
        }
        keys.insert(user.to_string(), key);
    }
    if keys.is_empty() {
        return Err("no keys".into());
    }
    Ok(keys)
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The user and key a client presents: `user`'s from the file, or the file's only one.
pub fn pick_key(
    keys: &HashMap<String, Vec<u8>>,
    user: Option<&str>,
) -> Result<(String, Vec<u8>), String> {
    match user {
        Some(u) => keys
            .get(u)
            .map(|k| (u.to_string(), k.clone()))
            .ok_or_else(|| format!("holds no key for the user {u:?}")),
        None if keys.len() == 1 => Ok(keys
            .iter()
            .next()
            .map(|(u, k)| (u.clone(), k.clone()))
            .expect("one")),
        None => Err(format!(
            "holds {} keys: name the user, nbds://USER@host/… or tls-username=USER",
            keys.len()
        )),
    }
}

#[cfg(feature = "psk")]
pub(crate) use client::PskClient;

#[cfg(feature = "psk")]
mod client {
    use std::io;
    use std::path::Path;

    use openssl::ssl::{
        HandshakeError, Ssl, SslContext, SslMethod, SslStream, SslVerifyMode, SslVersion,
    };

    use super::super::stream::Timed;

    /// The client's PSK context: its user and key.
    pub(crate) struct PskClient {
        context: SslContext,
    }

    impl PskClient {
        pub fn from_file(file: &Path, user: Option<&str>) -> Result<PskClient, String> {
            super::check_private(file).map_err(|e| e.to_string())?;
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("reading the PSK file {}: {e}", file.display()))?;
            let (user, key) = super::parse_psk_file(&text)
                .and_then(|keys| super::pick_key(&keys, user))
                .map_err(|why| format!("{}: {why}", file.display()))?;
            let ssl_err = |e: openssl::error::ErrorStack| format!("setting up PSK TLS: {e}");
            let mut b = SslContext::builder(SslMethod::tls_client()).map_err(ssl_err)?;
            b.set_min_proto_version(Some(SslVersion::TLS1_2))
                .map_err(ssl_err)?;
            b.set_cipher_list("ECDHE-PSK:DHE-PSK:PSK:!aNULL:!eNULL:!MD5")
                .map_err(ssl_err)?;
            // No certificates in PSK mode: the shared key authenticates both ends.
            b.set_verify(SslVerifyMode::NONE);
            b.set_psk_client_callback(move |_ssl, _hint, identity, psk| {
                let id = user.as_bytes();
                if id.len() >= identity.len() || key.len() > psk.len() {
                    return Err(openssl::error::ErrorStack::get());
                }
                identity[..id.len()].copy_from_slice(id);
                identity[id.len()] = 0;
                psk[..key.len()].copy_from_slice(&key);
                Ok(key.len())
            });
            Ok(PskClient { context: b.build() })
        }

        /// The handshake over `socket`, within its deadline.
        pub fn connect(&self, socket: Timed) -> io::Result<SslStream<Timed>> {
            let ssl = Ssl::new(&self.context).map_err(io::Error::other)?;
            ssl.connect(socket).map_err(|e| match e {
                HandshakeError::Failure(mid) | HandshakeError::WouldBlock(mid) => {
                    let e = mid.into_error();
                    match e.io_error() {
                        Some(io) => io::Error::new(io.kind(), io.to_string()),
                        None => io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!("the server refused the key ({e})"),
                        ),
                    }
                }
                HandshakeError::SetupFailure(e) => io::Error::other(e),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psktool_lines_parse_and_a_key_is_picked_by_user() {
        let keys = parse_psk_file("# keys\nalice:00ff\n\nbob:0102\n").unwrap();
        assert_eq!(keys["alice"], vec![0, 255]);
        assert_eq!(pick_key(&keys, Some("bob")).unwrap().1, vec![1, 2]);
        assert!(pick_key(&keys, None).unwrap_err().contains("holds 2 keys"));
        assert!(pick_key(&keys, Some("eve"))
            .unwrap_err()
            .contains("\"eve\""));
        let one = parse_psk_file("alice:00ff").unwrap();
        assert_eq!(pick_key(&one, None).unwrap().0, "alice");
        for (text, says) in [
            ("alice", "line 1: not USERNAME:HEXKEY"),
            ("x:zz", "line 1: the key is not hex"),
            ("x:abc", "line 1: the key is not hex"),
            (":00", "line 1: an empty username"),
            ("", "no keys"),
        ] {
            assert_eq!(parse_psk_file(text).unwrap_err(), says, "{text:?}");
        }
    }
}
