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
