//! Test support shared by the integration tests: NBD servers started as processes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process, killed when dropped.
pub struct Server {
    pub child: Child,
    pub socket: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start(socket: &Path, program: &str, args: &[&str]) -> Server {
        let _ = std::fs::remove_file(socket);
        let child = Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e} (scripts/setup.sh installs it)"));
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut child = child;
        while !socket.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{program} {args:?} ended ({status}) before making its socket");
            }
            assert!(
                Instant::now() < deadline,
                "{program} did not make {}",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Server {
            child,
            socket: socket.to_path_buf(),
        }
    }

    pub fn nbdkit(socket: &Path, args: &[&str]) -> Server {
        let mut all = vec![
            "-f",
            "--exit-with-parent",
            "--unix",
            socket.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        Server::start(socket, "nbdkit", &all)
    }

    pub fn uri(&self, query: &str) -> String {
        format!("nbd+unix:///?socket={}{query}", self.socket.display())
    }

    /// Sends `sig` ("-STOP", "-CONT") to the server.
    pub fn signal(&self, sig: &str) {
        assert!(Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success())
    }

    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM: nbdkit answers what is in flight with ESHUTDOWN; it waits for idle
    /// connections to close, so it is killed if still there after a moment.
    pub fn terminate(mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + Duration::from_millis(300);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A TCP relay in front of a server whose connections the test can cut at any moment
/// (a dropped link), while new connections still get through.
pub struct CuttableRelay {
    pub port: u16,
    live: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl CuttableRelay {
    pub fn start(upstream: &Path) -> CuttableRelay {
        use std::os::unix::net::UnixStream;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let live = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = live.clone();
        let upstream = upstream.to_path_buf();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = UnixStream::connect(&upstream) else {
                    continue;
                };
                keep.lock().unwrap().push(client.try_clone().unwrap());
                let (mut c1, mut c2) = (client.try_clone().unwrap(), client);
                let (mut s1, mut s2) = (server.try_clone().unwrap(), server);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c1, &mut s1);
                    let _ = s1.shutdown(std::net::Shutdown::Both);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s2, &mut c2);
                    let _ = c2.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        CuttableRelay { port, live }
    }

    /// Drops every connection through the relay, as a failed link does.
    pub fn cut(&self) -> usize {
        let mut live = self.live.lock().unwrap();
        for c in live.iter() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        std::mem::take(&mut *live).len()
    }
}
