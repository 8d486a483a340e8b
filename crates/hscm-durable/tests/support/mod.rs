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
