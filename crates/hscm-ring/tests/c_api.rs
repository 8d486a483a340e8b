//! The C interface: a C program compiled against include/hscm_ring.h and the shared
//! library, run against a server in this process.

mod common;

use std::process::Command;

#[test]
fn the_c_example_passes_its_checks() {
    let f = common::serve(4 << 20, hscm_ring::ServerOptions::default());
    // target/<profile>/deps/c_api-… -> target/<profile>
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let lib = profile_dir.join("libhscm_ring.so");
    assert!(
        lib.exists(),
        "{} not built: run `cargo build -p hscm-ring` first (scripts/test.sh does)",
        lib.display()
    );
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = f.dir.path().join("ring-example");
    let out = Command::new("cc")
        .arg("-O1")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(manifest.join("include"))
        .arg(manifest.join("c/example.c"))
        .arg("-L")
        .arg(profile_dir)
        .arg("-lhscm_ring")
        .arg("-o")
        .arg(&bin)
        .output()
        .expect("cc (the C compiler Rust links with) is missing");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&bin)
        .arg(&f.socket)
        .env("LD_LIBRARY_PATH", profile_dir)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "example failed: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "ok");
}

#[test]
fn null_pointers_are_errors_not_crashes() {
    use hscm_ring::ffi::*;
    // SAFETY: every pointer passed is NULL, which each function must reject.
    unsafe {
        assert!(hscm_ring_connect(std::ptr::null(), 0, 0).is_null());
        assert!(hscm_ring_queue_open(std::ptr::null_mut()).is_null());
        assert_eq!(
            hscm_ring_read(std::ptr::null_mut(), 0, std::ptr::null_mut(), 0),
            -1
        );
        assert_eq!(hscm_ring_flush(std::ptr::null_mut()), -1);
        assert_eq!(
            hscm_ring_read_in_place(std::ptr::null_mut(), 0, 1, None, std::ptr::null_mut()),
            -1
        );
        hscm_ring_disconnect(std::ptr::null_mut());
        hscm_ring_queue_close(std::ptr::null_mut());
        let msg = std::ffi::CStr::from_ptr(hscm_ring_last_error());
        assert!(msg.to_string_lossy().contains("NULL"));
        let bad = std::ffi::CString::new("/nonexistent/sock").unwrap();
        assert!(hscm_ring_connect(bad.as_ptr(), 0, 0).is_null());
        let msg = std::ffi::CStr::from_ptr(hscm_ring_last_error());
        assert!(msg.to_string_lossy().contains("connecting"), "{msg:?}");
    }
}

/// A read completion whose bytes do not fit the caller's buffer is kept: the call
/// says how much room it needs, and the next call hands the same completion out.
#[test]
fn a_read_completion_too_big_for_the_buffer_is_kept_not_lost() {
    use hscm_ring::ffi::*;
    let f = common::serve(4 << 20, hscm_ring::ServerOptions::default());
    let path = std::ffi::CString::new(f.socket.to_str().unwrap()).unwrap();
    // SAFETY: valid pointers throughout; the queue and client are closed at the end
    // and used by this thread only.
    unsafe {
        let client = hscm_ring_connect(path.as_ptr(), 1, 1 << 20);
        assert!(!client.is_null());
        let q = hscm_ring_queue_open(client);
        assert!(!q.is_null());
        let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        let mut id = 0u32;
        let r = hscm_ring_submit_write(q, 4096, data.as_ptr().cast(), 8192, 1, &mut id);
        assert_eq!(r, 0);
        let mut out = HscmRingCompletion {
            id: 0,
            status: 0,
            len: 0,
        };
        assert_eq!(hscm_ring_complete(q, &mut out, std::ptr::null_mut(), 0), 0);
        let mut read_id = 0u32;
        assert_eq!(hscm_ring_submit_read(q, 4096, 8192, &mut read_id), 0);
        let mut small = vec![0u8; 100];
        let r = hscm_ring_complete(q, &mut out, small.as_mut_ptr().cast(), small.len());
        assert_eq!(r, -1);
        assert_eq!(
            (out.id, out.len),
            (read_id, 8192),
            "it says the room needed"
        );
        let msg = std::ffi::CStr::from_ptr(hscm_ring_last_error()).to_string_lossy();
        assert!(msg.contains("kept"), "{msg}");
        let mut big = vec![0u8; 8192];
        let r = hscm_ring_complete(q, &mut out, big.as_mut_ptr().cast(), big.len());
        assert_eq!(r, 0);
        assert_eq!(out.id, read_id);
        assert!(big == data, "the same completion, its bytes intact");
        hscm_ring_queue_close(q);
        hscm_ring_disconnect(client);
    }
}
