//! A client connection over a Unix or a TCP socket.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;

#[derive(Debug)]
pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    pub fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    /// Bytes the client has sent that nobody has read yet (0 if that cannot be told).
    pub fn pending(&self) -> u64 {
        let count = match self {
            Stream::Unix(s) => rustix::io::ioctl_fionread(s),
            Stream::Tcp(s) => rustix::io::ioctl_fionread(s),
        };
        count.unwrap_or(0)
    }

    /// How long a read or a write may block before it fails (None: forever). Set on
    /// the socket, so every clone shares them.
    pub fn set_timeouts(
        &self,
        read: Option<std::time::Duration>,
        write: Option<std::time::Duration>,
    ) -> io::Result<()> {
        match self {
            Stream::Unix(s) => {
                s.set_read_timeout(read)?;
                s.set_write_timeout(write)
            }
            Stream::Tcp(s) => {
                s.set_read_timeout(read)?;
                s.set_write_timeout(write)
            }
        }
    }

    /// Ends both directions; a blocked read or write on any clone returns.
    pub fn shutdown(&self) {
        self.shutdown_how(Shutdown::Both)
    }

    /// Ends reading only: the reader sees the end of the stream, replies still go out.
    pub fn shutdown_read(&self) {
        self.shutdown_how(Shutdown::Read)
    }

    fn shutdown_how(&self, how: Shutdown) {
        // Already closed is as good as closed.
        let _ = match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}
