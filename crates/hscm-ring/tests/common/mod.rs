#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use hscm_ring::{Server, ServerHandle, ServerOptions};
use hscm_volume::{CreateOptions, OpenOptions, Volume};

/// Fields drop in order: the server stops before its directory goes.
pub struct Fixture {
    pub server: Option<ServerHandle>,
    pub volume: Arc<Volume>,
    pub socket: PathBuf,
    pub volume_path: PathBuf,
    pub dir: tempfile::TempDir,
}

pub fn volume_at(path: &std::path::Path, size: u64) -> Arc<Volume> {
    if !path.exists() {
        Volume::create(
            path,
            size,
            &CreateOptions {
                chunk_size: 64 * 1024,
                ..Default::default()
            },
        )
        .unwrap();
    }
    Arc::new(Volume::open(path, &OpenOptions::default()).unwrap())
}

pub fn serve(size: u64, opts: ServerOptions) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let volume_path = dir.path().join("vol.hscm");
    let volume = volume_at(&volume_path, size);
    let socket = dir.path().join("ring.sock");
    let server = Server::bind(&socket, volume.clone(), opts)
        .unwrap()
        .spawn()
        .unwrap();
    Fixture {
        dir,
        volume,
        server: Some(server),
        socket,
        volume_path,
    }
}

pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
