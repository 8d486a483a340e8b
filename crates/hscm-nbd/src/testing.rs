//! The fuzz target's driver (feature `testing`): one client session, given as the
//! bytes the client sends, against a fresh in-memory export.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use hscm_block::MemTarget;

use crate::{ExportOptions, Server, Stream};

/// Serves `bytes` as everything one client sends, reading and dropping the replies,
/// until the server ends the connection. Panics only if the server does.
pub fn run_session(bytes: &[u8], read_only: bool) {
    let target = Arc::new(MemTarget::new(256 << 10));
    let server = Server::new(
        target,
        ExportOptions {
            read_only,
            workers_per_connection: 2,
            ..ExportOptions::default()
        },
    );
    let (client, server_end) = UnixStream::pair().expect("a socket pair");
    let mut reader = client.try_clone().expect("a second handle");
    let drain = std::thread::spawn(move || {
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let serving = s.spawn(|| server.serve(Stream::Unix(server_end), &stop));
        let mut client = &client;
        let _ = client.write_all(bytes);
        let _ = client.shutdown(std::net::Shutdown::Write);
        // An error is the server refusing the client: fine. A panic is a bug.
        let _ = serving.join().expect("the server panicked");
    });
    let _ = client.shutdown(std::net::Shutdown::Both);
    drain.join().expect("the reply reader");
}
