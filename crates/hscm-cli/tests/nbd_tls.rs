//! `hscm nbd` with TLS (NBD_OPT_STARTTLS, X.509 and PSK) against libnbd's nbdinfo
//! and nbdcopy and qemu-img: the export works over TLS, a plaintext client is refused
//! when TLS is required, and the flags that cannot work say why. The certificates
//! are made here with the openssl command (scripts/setup.sh installs it).

use crate::util;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use util::{hscm, run, signal, spawn_until_line, text};

/// A CA; a server certificate for localhost and 127.0.0.1 signed by it; and a
/// client certificate signed by it: the server's directory (`server-cert.pem`,
/// `server-key.pem` readable by its owner alone, and the CA as `ca-cert.pem`) and
/// the clients' (`ca-cert.pem`, `client-cert.pem`, `client-key.pem`, the layout
/// libnbd and qemu read). Beside them, `anonymous/` (the CA only: a client with no
/// certificate) and `stranger/` (a client certificate no CA signed).
fn certificates(dir: &Path) -> (PathBuf, PathBuf) {
    let (server, client) = (dir.join("server"), dir.join("client"));
    for d in ["server", "client", "anonymous", "stranger"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let sh = |script: &str| {
        let o = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .output()
            .expect("sh");
        assert!(o.status.success(), "{script}: {}", text(&o));
    };
    sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out client/ca-cert.pem -days 2 \
        -subj '/CN=hscm test CA' -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign");
    sh(
        "cp client/ca-cert.pem server/ca-cert.pem && cp client/ca-cert.pem anonymous/ca-cert.pem \
        && cp client/ca-cert.pem stranger/ca-cert.pem",
    );
    sh("openssl req -newkey rsa:2048 -nodes -keyout server/server-key.pem -out server.csr -subj /CN=localhost \
        && chmod 600 server/server-key.pem");
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    sh("openssl x509 -req -in server.csr -CA client/ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
        -out server/server-cert.pem -days 2 -extfile ext.cnf");
    std::fs::write(
        dir.join("client-ext.cnf"),
        "subjectAltName=DNS:alice.clients.test\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    sh("openssl req -newkey rsa:2048 -nodes -keyout client/client-key.pem -out client.csr -subj '/CN=hscm test client' \
        && openssl x509 -req -in client.csr -CA client/ca-cert.pem -CAkey ca-key.pem -CAcreateserial \
        -out client/client-cert.pem -days 2 -extfile client-ext.cnf");
    sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout stranger/client-key.pem -out stranger/client-cert.pem \
        -days 2 -subj '/CN=stranger' -addext extendedKeyUsage=clientAuth");
    (server, client)
}

/// Readable and writable by its owner alone (mode 0600), as secrets must be.
fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A 16 MiB flat volume in `dir`.
fn volume(dir: &Path) -> PathBuf {
    let v = dir.join("v.hscm");
    let o = run(&["volume", "create", v.to_str().unwrap(), "--size", "16M"]);
    assert!(o.status.success(), "{}", text(&o));
    v
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `hscm nbd` on a loopback port with `args`, once it serves; its port.
fn serve(volume: &Path, args: &[&str]) -> (Child, u16) {
    let port = free_port();
    let mut cmd = hscm();
    cmd.arg("nbd")
        .arg(volume)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .args(args);
    // With TLS required, the URI printed names the TLS scheme (issue 55).
    let scheme = if args.windows(2).any(|w| w == ["--tls", "require"]) {
        "nbds://"
    } else {
        "nbd://"
    };
    (spawn_until_line(&mut cmd, scheme).0, port)
}

fn stop(mut child: Child) {
    signal(child.id(), 15);
    assert!(child.wait().unwrap().success());
}

fn tool(name: &str) -> Command {
    assert!(
        hscm_lab::installed(name),
        "{name} is not installed: run scripts/setup.sh"
    );
    Command::new(name)
}

/// `nbdinfo URI`: it gets in and sees the 16 MiB export over TLS.
fn nbdinfo_over_tls(uri: &str) {
    let o = tool("nbdinfo").arg(uri).output().unwrap();
    assert!(o.status.success(), "{uri}: {}", text(&o));
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(
        info.contains("with TLS") && info.contains("16777216"),
        "{info}"
    );
}

/// `len` bytes to the export at `uri` and back with nbdcopy, compared: more than one
/// TLS record or reply piece each way.
fn nbdcopy_round_trip(dir: &Path, uri: &str, len: u32) {
    let data: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
    let (src, back) = (dir.join("src.bin"), dir.join("back.bin"));
    std::fs::write(&src, &data).unwrap();
    for (from, to) in [(src.to_str().unwrap(), uri), (uri, back.to_str().unwrap())] {
        let o = tool("nbdcopy").arg(from).arg(to).output().unwrap();
        assert!(o.status.success(), "nbdcopy {from} {to}: {}", text(&o));
    }
    assert!(std::fs::read(&back).unwrap()[..data.len()] == data[..]);
}

/// `qemu-img info` through qemu's own TLS stack, with the credentials object `creds`
/// (id tls0): what it printed.
fn qemu_img_info(port: u16, creds: &str) -> std::process::Output {
    let o = tool("qemu-img")
        .args(["info", "--object", creds, "--image-opts"])
        .arg(format!(
            "driver=nbd,host=localhost,port={port},tls-creds=tls0"
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    o
}

#[test]
fn clients_reach_the_export_over_tls_and_plaintext_is_refused_when_required() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = certificates(dir.path());
    let v = volume(dir.path());
    let certs = server.to_str().unwrap();
    let (child, port) = serve(&v, &["--tls", "require", "--tls-certificates", certs]);
    let tls_uri = format!(
        "nbds://localhost:{port}/?tls-certificates={}",
        client.display()
    );
    nbdinfo_over_tls(&tls_uri);
    nbdcopy_round_trip(dir.path(), &tls_uri, 3_000_000);
    let creds = format!(
        "tls-creds-x509,id=tls0,endpoint=client,dir={}",
        client.display()
    );
    assert!(text(&qemu_img_info(port, &creds)).contains("16 MiB"));

    // Plaintext clients are refused.
    let o = tool("nbdinfo")
        .arg(format!("nbd://localhost:{port}/"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    // So are TLS clients without a certificate the CA signed: none, or their own.
    for who in ["anonymous", "stranger"] {
        let o = tool("nbdinfo")
            .arg(format!(
                "nbds://localhost:{port}/?tls-certificates={}",
                dir.path().join(who).display()
            ))
            .output()
            .unwrap();
        assert!(!o.status.success(), "{who} got in: {}", text(&o));
    }
    let o = tool("qemu-img")
        .arg("info")
        .arg(format!("nbd://localhost:{port}/"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(text(&o).contains("requires TLS"), "{}", text(&o));
    stop(child);
}

#[test]
fn tls_on_serves_both_kinds_of_client() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = certificates(dir.path());
    let v = volume(dir.path());
    let (child, port) = serve(
        &v,
        &[
            "--tls",
            "on",
            "--tls-certificates",
            server.to_str().unwrap(),
        ],
    );
    for uri in [
        format!(
            "nbds://localhost:{port}/?tls-certificates={}",
            client.display()
        ),
        format!("nbd://localhost:{port}/"),
    ] {
        let o = tool("nbdinfo").arg(&uri).output().unwrap();
        assert!(o.status.success(), "{uri}: {}", text(&o));
    }
    stop(child);
}

#[test]
fn tls_flags_that_cannot_work_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path());
    let port = free_port().to_string();
    let vs = v.to_str().unwrap();
    let o = run(&["nbd", vs, "--listen", &port, "--tls", "require"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("needs --tls-certificates"),
        "{}",
        text(&o)
    );
    let o = run(&["nbd", vs, "--listen", &port, "--grace=-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("not a number of seconds"), "{}", text(&o));
    let empty = dir.path().join("empty.psk");
    std::fs::write(&empty, "# no keys\n").unwrap();
    // A PSK file others may read is refused first, naming the fix.
    let o = run(&[
        "nbd",
        vs,
        "--listen",
        &port,
        "--tls",
        "require",
        "--tls-psk",
        empty.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("chmod 600"), "{}", text(&o));
    private(&empty);
    let psk_args = ["--tls", "require", "--tls-psk", empty.to_str().unwrap()];
    let o = run(&[&["nbd", vs, "--listen", &port][..], &psk_args[..]].concat());
    assert!(!o.status.success());
    assert!(text(&o).contains("no keys"), "{}", text(&o));
    let o = run(&[
        "nbd",
        vs,
        "--listen",
        &port,
        "--tls",
        "on",
        "--tls-certificates",
        "/nonexistent",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("server-cert.pem"), "{}", text(&o));
}

#[test]
fn plaintext_on_a_network_address_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path());
    let port = free_port();
    let mut child = hscm()
        .arg("nbd")
        .arg(&v)
        .arg("--listen")
        .arg(format!("0.0.0.0:{port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    signal(child.id(), 15);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("in plaintext, without authenticating clients"),
        "{err}"
    );
}

#[test]
fn clients_with_the_pre_shared_key_get_in_and_others_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let v = volume(dir.path());
    // psktool's format, in the directory layout qemu's tls-creds-psk reads.
    let keys = dir.path().join("keys.psk");
    std::fs::write(&keys, format!("alice:{}\n", "5a".repeat(32))).unwrap();
    private(&keys);
    let wrong = dir.path().join("wrong.psk");
    std::fs::write(&wrong, format!("alice:{}\n", "a5".repeat(32))).unwrap();
    let (child, port) = serve(
        &v,
        &["--tls", "require", "--tls-psk", keys.to_str().unwrap()],
    );
    let uri = |file: &Path| {
        format!(
            "nbds://alice@localhost:{port}/?tls-psk-file={}",
            file.display()
        )
    };
    nbdinfo_over_tls(&uri(&keys));
    nbdcopy_round_trip(dir.path(), &uri(&keys), 2_000_000);
    let qemu_dir = dir.path().join("qemu");
    std::fs::create_dir(&qemu_dir).unwrap();
    std::fs::copy(&keys, qemu_dir.join("keys.psk")).unwrap();
    qemu_img_info(
        port,
        &format!(
            "tls-creds-psk,id=tls0,endpoint=client,dir={},username=alice",
            qemu_dir.display()
        ),
    );

    // A wrong key, an unknown user and plaintext are all refused.
    let o = tool("nbdinfo").arg(uri(&wrong)).output().unwrap();
    assert!(!o.status.success(), "a wrong key: {}", text(&o));
    let bob = dir.path().join("bob.psk");
    std::fs::write(&bob, format!("bob:{}\n", "5a".repeat(32))).unwrap();
    let o = tool("nbdinfo")
        .arg(format!(
            "nbds://bob@localhost:{port}/?tls-psk-file={}",
            bob.display()
        ))
        .output()
        .unwrap();
    assert!(!o.status.success(), "an unknown user: {}", text(&o));
    let o = tool("nbdinfo")
        .arg(format!("nbd://localhost:{port}/"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    stop(child);
}

#[test]
fn without_peer_verification_any_tls_client_gets_in_and_a_readable_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = certificates(dir.path());
    let v = volume(dir.path());
    let certs = server.to_str().unwrap();
    let (child, port) = serve(
        &v,
        &[
            "--tls",
            "require",
            "--tls-certificates",
            certs,
            "--tls-verify-peer=no",
        ],
    );
    nbdinfo_over_tls(&format!(
        "nbds://localhost:{port}/?tls-certificates={}",
        dir.path().join("anonymous").display()
    ));
    stop(child);
    // A key others may read is refused, naming the fix.
    use std::os::unix::fs::PermissionsExt;
    let key = server.join("server-key.pem");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let port = free_port().to_string();
    let o = run(&[
        "nbd",
        v.to_str().unwrap(),
        "--listen",
        &port,
        "--tls",
        "require",
        "--tls-certificates",
        certs,
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("chmod 600"), "{}", text(&o));
    // Verification needs the CA.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(server.join("ca-cert.pem")).unwrap();
    let o = run(&[
        "nbd",
        v.to_str().unwrap(),
        "--listen",
        &port,
        "--tls",
        "require",
        "--tls-certificates",
        certs,
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("ca-cert.pem") && text(&o).contains("--tls-verify-peer=no"),
        "{}",
        text(&o)
    );
}

#[test]
fn tls_that_authenticates_no_client_is_warned_about_on_a_network_address() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = certificates(dir.path());
    let v = volume(dir.path());
    for (verify, warned) in [("no", true), ("yes", false)] {
        let port = free_port();
        let mut child = hscm()
            .arg("nbd")
            .arg(&v)
            .arg("--listen")
            .arg(format!("0.0.0.0:{port}"))
            .args(["--tls", "require", "--tls-certificates"])
            .arg(&server)
            .arg(format!("--tls-verify-peer={verify}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        signal(child.id(), 15);
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.contains("over TLS, without authenticating clients"),
            warned,
            "--tls-verify-peer={verify}: {err}"
        );
    }
}

/// One peer holding every connection slot with handshakes it never finishes
/// (the greeting read, an option now and then) does not keep a client with a
/// certificate out: it gets in within 2 s.
#[test]
fn strangers_in_the_handshake_do_not_keep_an_authenticated_client_out() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = certificates(dir.path());
    let v = volume(dir.path());
    let (child, port) = serve(
        &v,
        &[
            "--tls",
            "require",
            "--tls-certificates",
            server.to_str().unwrap(),
        ],
    );
    let list_option = {
        let mut o = 0x4948_4156_454f_5054u64.to_be_bytes().to_vec(); // IHAVEOPT
        o.extend_from_slice(&3u32.to_be_bytes()); // NBD_OPT_LIST
        o.extend_from_slice(&0u32.to_be_bytes());
        o
    };
    let mut strangers = Vec::new();
    for _ in 0..128 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut hello = [0u8; 18];
        s.read_exact(&mut hello).unwrap();
        s.write_all(&3u32.to_be_bytes()).unwrap(); // fixed newstyle, no zeroes
        s.write_all(&list_option).unwrap();
        strangers.push(s);
    }
    let start = std::time::Instant::now();
    let o = tool("nbdinfo")
        .arg(format!(
            "nbds://localhost:{port}/?tls-certificates={}",
            client.display()
        ))
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        took < std::time::Duration::from_secs(2),
        "the client got in after {took:?}"
    );
    drop(strangers);
    stop(child);
}

/// `--tls-client-name`: of the clients the CA signed, only those whose certificate
/// carries a listed name get in.
#[test]
fn only_clients_with_a_listed_name_get_in() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = certificates(dir.path());
    let v = volume(dir.path());
    let uri = |port: u16| {
        format!(
            "nbds://localhost:{port}/?tls-certificates={}",
            client.display()
        )
    };
    let certs = server.to_str().unwrap();
    for (names, gets_in) in [
        (&["alice.clients.test"][..], true),
        (&["bob.clients.test", "alice.clients.test"][..], true),
        (&["bob.clients.test"][..], false),
    ] {
        let mut args = vec!["--tls", "require", "--tls-certificates", certs];
        for n in names {
            args.extend(["--tls-client-name", n]);
        }
        let (child, port) = serve(&v, &args);
        let o = tool("nbdinfo").arg(uri(port)).output().unwrap();
        assert_eq!(o.status.success(), gets_in, "{names:?}: {}", text(&o));
        stop(child);
    }
    let port = free_port().to_string();
    let o = run(&[
        "nbd",
        v.to_str().unwrap(),
        "--listen",
        &port,
        "--tls",
        "require",
        "--tls-certificates",
        certs,
        "--tls-verify-peer=no",
        "--tls-client-name",
        "alice.clients.test",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--tls-client-name needs"), "{}", text(&o));
}
