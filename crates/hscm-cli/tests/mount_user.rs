//! `hscm mount` by an ordinary user (nobody), in a private mount namespace whose
//! /dev/fuse is a node this test makes: root's alone (0600), the mount is refused
//! with an error that names /dev/fuse and the fix; open to users (0666, the usual
//! mode), the user mounts through fusermount3, writes, and unmounts.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::util;

#[test]
fn an_ordinary_user_mounts_where_dev_fuse_allows_and_hears_why_where_not() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root (a mount namespace and a device node)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The binary where nobody can run it (the build directory may be root's alone).
    let bin = d.join("hscm");
    std::fs::copy(env!("CARGO_BIN_EXE_hscm"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = d.join("home");
    let at = d.join("mnt");
    for p in [&home, &at] {
        std::fs::create_dir(p).unwrap();
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    }
    let volume = home.join("v.hscm");
    let script = format!(
        r#"set -eu
as_user() {{ setpriv --reuid=65534 --regid=65534 --clear-groups env -u XDG_RUNTIME_DIR TMPDIR={home} "$@"; }}
mknod {d}/fuse-root c 10 229; chmod 600 {d}/fuse-root
mknod {d}/fuse-all c 10 229; chmod 666 {d}/fuse-all
as_user {bin} volume create {volume} --size 16M --fs >/dev/null
mount --bind {d}/fuse-root /dev/fuse
if as_user {bin} mount {volume} {at} 2>{d}/refused; then echo "mounted with /dev/fuse 0600" >&2; exit 1; fi
umount /dev/fuse
mount --bind {d}/fuse-all /dev/fuse
as_user {bin} mount {volume} {at}
grep " {at} fuse.hscm " /proc/mounts | grep -q user_id=65534
as_user sh -c 'echo written-by-nobody > {at}/f'
as_user {bin} umount {at}
if grep -q " {at} " /proc/mounts; then echo "still mounted" >&2; exit 1; fi
"#,
        home = home.display(),
        d = d.display(),
        bin = bin.display(),
        volume = volume.display(),
        at = at.display(),
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", util::text(&o));
    let refused = std::fs::read_to_string(d.join("refused")).unwrap();
    assert!(
        refused.contains("/dev/fuse (mode 600) cannot be opened by user 65534")
            && refused.contains("chmod 666 /dev/fuse"),
        "{refused}"
    );
    // What the user wrote is in the volume: root reads it back through a mount of its own.
    let back = d.join("back");
    std::fs::create_dir(&back).unwrap();
    let o = util::run(&["mount", volume.to_str().unwrap(), back.to_str().unwrap()]);
    assert!(o.status.success(), "{}", util::text(&o));
    let got = std::fs::read_to_string(back.join("f"));
    let o = util::run(&["umount", back.to_str().unwrap()]);
    assert!(o.status.success(), "{}", util::text(&o));
    assert_eq!(got.unwrap(), "written-by-nobody\n");
}
