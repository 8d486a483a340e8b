//! The control socket: a client's hello, the server's answer with the region's memfd
//! attached (SCM_RIGHTS), and liveness checks. Nothing else crosses the socket; its
//! closing is how each side learns the other is gone.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use crate::error::{Error, Result};

const HELLO_MAGIC: u64 = u64::from_le_bytes(*b"HSRHELLO");
pub const WIRE_VERSION: u32 = 1;
const HELLO_LEN: usize = 32;
const REPLY_LEN: usize = 16;
const MAX_MESSAGE: u32 = 4096;

/// What a client asks for; zero fields take the server's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hello {
    pub queues: u32,
    pub depth: u32,
    pub db_len: u64,
}

pub fn send_hello(stream: &mut UnixStream, h: &Hello) -> Result<()> {
    let mut b = [0u8; HELLO_LEN];
    b[0..8].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
    b[8..12].copy_from_slice(&WIRE_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&h.queues.to_le_bytes());
    b[16..20].copy_from_slice(&h.depth.to_le_bytes());
    b[24..32].copy_from_slice(&h.db_len.to_le_bytes());
    // NOSIGNAL: a server that refused and closed early must not kill a C client with
    // SIGPIPE. A short send of 32 bytes on a fresh stream socket does not happen.
    let sent = rustix::net::send(&*stream, &b, SendFlags::NOSIGNAL)
        .map_err(|e| Error::io("sending hello")(e.into()))?;
    if sent != HELLO_LEN {
        return Err(Error::Protocol(format!("hello sent short: {sent} bytes")));
    }
    Ok(())
}

pub fn recv_hello(stream: &mut UnixStream) -> Result<Hello> {
    let mut b = [0u8; HELLO_LEN];
    stream
        .read_exact(&mut b)
        .map_err(Error::io("reading hello"))?;
    let magic = u64::from_le_bytes(b[0..8].try_into().unwrap());
    if magic != HELLO_MAGIC {
        return Err(Error::Protocol(format!(
            "hello magic {magic:#x} is not HSRHELLO"
        )));
    }
    let version = u32::from_le_bytes(b[8..12].try_into().unwrap());
    if version != WIRE_VERSION {
        return Err(Error::Protocol(format!(
            "client speaks version {version}, server {WIRE_VERSION}"
        )));
    }
    Ok(Hello {
        queues: u32::from_le_bytes(b[12..16].try_into().unwrap()),
        depth: u32::from_le_bytes(b[16..20].try_into().unwrap()),
        db_len: u64::from_le_bytes(b[24..32].try_into().unwrap()),
    })
}

/// Accepts: the reply carries the region's fd.
pub fn send_accept(stream: &UnixStream, region: &OwnedFd, region_len: u64) -> Result<()> {
    let mut b = [0u8; REPLY_LEN];
    b[8..16].copy_from_slice(&region_len.to_le_bytes());
    let fds = [region.as_fd()];
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    let sent = sendmsg(
        stream,
        &[IoSlice::new(&b)],
        &mut control,
        SendFlags::NOSIGNAL,
    )
    .map_err(|e| Error::io("sending the region")(e.into()))?;
    if sent != REPLY_LEN {
        return Err(Error::Protocol("short reply".into()));
    }
    Ok(())
}

/// Refuses, with a reason the client shows its user.
pub fn send_refusal(stream: &mut UnixStream, reason: &str) -> Result<()> {
    let msg = &reason.as_bytes()[..reason.len().min(MAX_MESSAGE as usize)];
    let mut b = vec![0u8; REPLY_LEN + msg.len()];
    b[0..4].copy_from_slice(&1u32.to_le_bytes());
    b[4..8].copy_from_slice(&(msg.len() as u32).to_le_bytes());
    b[REPLY_LEN..].copy_from_slice(msg);
    stream.write_all(&b).map_err(Error::io("sending refusal"))
}

/// The server's answer: the region fd, or the refusal as an error.
pub fn recv_reply(stream: &mut UnixStream) -> Result<(OwnedFd, u64)> {
    let mut b = [0u8; REPLY_LEN];
    let mut space = [0u8; rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        &*stream,
        &mut [IoSliceMut::new(&mut b)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::WAITALL,
    )
    .map_err(|e| Error::io("reading the server's reply")(e.into()))?;
    let mut fd = None;
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = msg {
            for f in fds {
                fd.get_or_insert(f);
            }
        }
    }
    if got.bytes == 0 {
        return Err(Error::Disconnected);
    }
    if got.bytes != REPLY_LEN {
        return Err(Error::Protocol(format!("reply of {} bytes", got.bytes)));
    }
    let status = u32::from_le_bytes(b[0..4].try_into().unwrap());
    if status != 0 {
        let len = u32::from_le_bytes(b[4..8].try_into().unwrap()).min(MAX_MESSAGE);
        let mut msg = vec![0u8; len as usize];
        stream
            .read_exact(&mut msg)
            .map_err(Error::io("reading the refusal"))?;
        return Err(Error::Refused(String::from_utf8_lossy(&msg).into_owned()));
    }
    let region_len = u64::from_le_bytes(b[8..16].try_into().unwrap());
    let fd = fd.ok_or_else(|| Error::Protocol("reply carried no region".into()))?;
    Ok((fd, region_len))
}

/// False once the peer has closed its end (or the socket failed).
pub fn peer_alive(stream: &UnixStream) -> bool {
    let mut b = [0u8; 1];
    match rustix::net::recv(stream, &mut b, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok(0) => false,
        Ok(_) => true,
        Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => true,
        Err(_) => false,
    }
}

/// How long a waiting side sleeps before it checks that its peer is still there.
pub const LIVENESS_PERIOD: Duration = Duration::from_millis(50);
