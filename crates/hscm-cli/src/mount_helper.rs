//! mount(8)'s way in: `mount -t fuse.hscm VOLUME DIR -o durability=on-flush,ram=4G`
//! and fstab lines of type `fuse.hscm`. mount(8) runs a helper with its own calling
//! convention, `HELPER SOURCE DIR [-sfnv] [-o OPTIONS]`: either `mount.fuse.hscm` (the
//! package links it to hscm) or fuse3's `mount.fuse`, which runs `hscm SOURCE DIR -o
//! OPTIONS` from the PATH. Both are turned here into the `hscm mount` they mean, so
//! the options are `hscm mount`'s flags, named as mount options (docs/fs.md).

use std::ffi::{OsStr, OsString};
use std::path::Path;

use anyhow::{bail, Result};

/// Options mount(8), fstab and systemd use that are not the file system's business:
/// accepted and left out.
const LEFT_TO_MOUNT: &[&str] = &[
    "defaults",
    "auto",
    "noauto",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "nofail",
    "_netdev",
    "rw",
    "nosuid",
    "nodev",
    "exec",
    "atime",
    "noatime",
    "relatime",
    "strictatime",
    "diratime",
    "nodiratime",
    "async",
];

/// Options that take a value, and the `hscm mount` flag each becomes.
const WITH_VALUE: &[(&str, &str)] = &[
    ("durability", "--durability"),
    ("ram", "--ram"),
    ("ram-policy", "--ram-policy"),
    ("dirty-max", "--dirty-max"),
    ("io-uring", "--io-uring"),
];

/// Options without a value, and their flags (`_` may stand for `-`).
const SWITCHES: &[(&str, &str)] = &[
    ("ro", "--read-only"),
    ("allow-other", "--allow-other"),
    ("private", "--private"),
    ("suid", "--suid"),
    ("dev", "--dev"),
    ("nonempty", "--nonempty"),
    ("no-writeback-cache", "--no-writeback-cache"),
    ("no-passthrough", "--no-passthrough"),
];

/// The `hscm mount` argv a helper call was turned into, for the background process
/// `hscm mount` starts (which must not read the helper's convention again).
static TRANSLATED: std::sync::OnceLock<Vec<OsString>> = std::sync::OnceLock::new();

/// This process's arguments as `hscm` reads them: the translated ones after a helper
/// call, else the command line's.
pub fn args_in_effect() -> Vec<OsString> {
    TRANSLATED
        .get()
        .cloned()
        .unwrap_or_else(|| std::env::args_os().collect())
}

/// Records the argv a helper call became (see [`args_in_effect`]).
pub fn remember(argv: &[OsString]) {
    let _ = TRANSLATED.set(argv.to_vec());
}

/// Whether `argv` is a mount helper's call: run as `mount.fuse.hscm` (or
/// `mount.hscm`), or as `hscm SOURCE DIR …` where SOURCE is no subcommand and DIR is
/// a directory.
pub fn is_helper_call(argv: &[OsString], is_subcommand: impl Fn(&OsStr) -> bool) -> bool {
    let called = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(OsStr::to_str)
        .unwrap_or("");
    if called.starts_with("mount.fuse.hscm") || called.starts_with("mount.hscm") {
        return true;
    }
    match (argv.get(1), argv.get(2)) {
        (Some(source), Some(dir)) => {
            !source.to_string_lossy().starts_with('-')
                && !is_subcommand(source)
                && Path::new(dir).is_dir()
        }
        _ => false,
    }
}

/// The `hscm mount` argv a helper call means; None for `-f` (mount(8)'s fake run).
pub fn to_mount_argv(argv: &[OsString]) -> Result<Option<Vec<OsString>>> {
    let mut positional = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let mut sloppy = false;
    let mut fake = false;
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        let text = a.to_string_lossy();
        if text == "-o" {
            let Some(list) = args.next() else {
                bail!("mount helper: -o without options");
            };
            options.extend(list.to_string_lossy().split(',').map(str::to_string));
        } else if let Some(list) = text.strip_prefix("-o") {
            options.extend(list.split(',').map(str::to_string));
        } else if text.starts_with('-') && text.len() > 1 {
            // mount(8) passes -s (sloppy), -f (fake), -n (no mtab), -v (verbose).
            for c in text[1..].chars() {
                match c {
                    's' => sloppy = true,
                    'f' => fake = true,
                    'n' | 'v' => {}
                    other => bail!(
                        "mount helper: -{other} is not a flag mount(8) passes (-s, -f, -n, -v, -o OPTIONS)"
                    ),
                }
            }
        } else {
            positional.push(a.clone());
        }
    }
    let [source, dir] = positional.as_slice() else {
        bail!(
            "mount helper: expected VOLUME and DIRECTORY (as in `mount -t fuse.hscm VOLUME DIR -o durability=on-flush`), got {} arguments",
            positional.len()
        );
    };
    let mut out: Vec<OsString> = vec!["hscm".into(), "mount".into(), source.clone(), dir.clone()];
    for option in options.iter().filter(|o| !o.is_empty()) {
        let (name, value) = match option.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (option.as_str(), None),
        };
        if LEFT_TO_MOUNT.contains(&option.as_str()) || name.starts_with("x-") || name == "comment" {
            continue;
        }
        // `allow_other` as FUSE spells it, `ram_policy` as well as `ram-policy`.
        let name = name.replace('_', "-");
        if let Some((_, flag)) = WITH_VALUE.iter().find(|(n, _)| *n == name) {
            let Some(value) = value.filter(|v| !v.is_empty()) else {
                bail!("mount option {name} needs a value ({name}=…)");
            };
            out.push((*flag).into());
            out.push(value.into());
        } else if let Some((_, flag)) = SWITCHES.iter().find(|(n, _)| *n == name) {
            if value.is_some() {
                bail!("mount option {name} takes no value");
            }
            out.push((*flag).into());
        } else if !sloppy {
            let known: Vec<&str> = WITH_VALUE
                .iter()
                .map(|(n, _)| *n)
                .chain(SWITCHES.iter().map(|(n, _)| *n))
                .collect();
            bail!(
                "mount option {option:?} is not one hscm takes (hscm's: {}; mount(8)'s own, such as noauto, nofail, _netdev and x-systemd.*, are left to it)",
                known.join(", ")
            );
        }
    }
    Ok((!fake).then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn options_become_flags_and_mounts_own_are_left_out() {
        let got = to_mount_argv(&argv(&[
            "/sbin/mount.fuse.hscm",
            "/srv/logs.hscm",
            "/var/log",
            "-o",
            "rw,noauto,nofail,_netdev,x-systemd.automount,durability=on-flush,ram=4G,ram_policy=s3fifo,io-uring=off,ro,allow_other,nosuid,nodev",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            got,
            argv(&[
                "hscm",
                "mount",
                "/srv/logs.hscm",
                "/var/log",
                "--durability",
                "on-flush",
                "--ram",
                "4G",
                "--ram-policy",
                "s3fifo",
                "--io-uring",
                "off",
                "--read-only",
                "--allow-other",
            ])
        );
    }

    #[test]
    fn bad_options_are_named_unless_sloppy_and_fake_mounts_nothing() {
        let e = to_mount_argv(&argv(&[
            "hscm",
            "v",
            "/d",
            "-o",
            "durability=on-flush,bogus",
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("\"bogus\"") && e.contains("durability"), "{e}");
        let e = to_mount_argv(&argv(&["hscm", "v", "/d", "-o", "ram"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("ram needs a value"), "{e}");
        let e = to_mount_argv(&argv(&["hscm", "v", "-o", "ro"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("VOLUME and DIRECTORY"), "{e}");
        let got = to_mount_argv(&argv(&["hscm", "v", "/d", "-s", "-o", "bogus,ro"]))
            .unwrap()
            .unwrap();
        assert_eq!(got, argv(&["hscm", "mount", "v", "/d", "--read-only"]));
        assert!(to_mount_argv(&argv(&["mount.fuse.hscm", "v", "/d", "-fn"]))
            .unwrap()
            .is_none());
    }

    #[test]
    fn helper_calls_are_told_from_commands() {
        let dir = std::env::temp_dir();
        let dir = dir.to_str().unwrap();
        let sub = |s: &OsStr| s == "mount" || s == "volume";
        assert!(is_helper_call(
            &argv(&["/sbin/mount.fuse.hscm", "v", "d"]),
            sub
        ));
        assert!(is_helper_call(
            &argv(&["hscm", "v.hscm", dir, "-o", "ro"]),
            sub
        ));
        assert!(!is_helper_call(&argv(&["hscm", "mount", "v", dir]), sub));
        assert!(!is_helper_call(&argv(&["hscm", "volume", "create"]), sub));
        assert!(!is_helper_call(
            &argv(&["hscm", "v.hscm", "/no/such/dir"]),
            sub
        ));
        assert!(!is_helper_call(&argv(&["hscm", "--help"]), sub));
    }
}
