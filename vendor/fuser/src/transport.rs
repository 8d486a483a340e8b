//! hscm patch: requests that reach a session by another way than its /dev/fuse
//! readers (FUSE over io_uring), dispatched to the same file system, their replies
//! sent back the way they came.
//!
//! The session's readers keep running beside such a transport: the kernel sends
//! forgets, interrupts and everything before the transport is ready through
//! /dev/fuse, and notifications go out through it.

use std::fmt;
use std::io;
use std::io::IoSlice;
use std::sync::Arc;

use crate::Filesystem;
use crate::ReplyEmpty;
use crate::ll::Operation;
use crate::request::RequestWithSender;
use crate::session::SessionEventLoop;

/// Where the replies of requests given to [`RequestDispatcher::dispatch`] go: `send`
/// gets the reply as a /dev/fuse write would carry it (the `fuse_out_header` first)
/// with the token the request was dispatched with. It may be called from any thread,
/// once per request.
pub trait ReplyTransport: Send + Sync + fmt::Debug + 'static {
    /// Sends the reply of the request dispatched with `token`.
    fn send(&self, token: u64, reply: &[IoSlice<'_>]) -> io::Result<()>;
}

/// Runs requests of a transport of the embedder's through the session's file system,
/// under the session's access rule.
pub struct RequestDispatcher<FS: Filesystem> {
    event_loop: SessionEventLoop<FS>,
}

impl<FS: Filesystem> fmt::Debug for RequestDispatcher<FS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestDispatcher").finish_non_exhaustive()
    }
}

impl<FS: Filesystem> Clone for RequestDispatcher<FS> {
    fn clone(&self) -> Self {
        RequestDispatcher {
            event_loop: SessionEventLoop {
                thread_name: self.event_loop.thread_name.clone(),
                ch: self.event_loop.ch.clone(),
                filesystem: self.event_loop.filesystem.clone(),
                allowed: self.event_loop.allowed,
                session_owner: self.event_loop.session_owner,
            },
        }
    }
}

impl<FS: Filesystem> RequestDispatcher<FS> {
    pub(crate) fn new(event_loop: SessionEventLoop<FS>) -> Self {
        RequestDispatcher { event_loop }
    }

    /// Parses `request`, laid out as a read of /dev/fuse gives it, and runs it; its
    /// reply goes to `transport` with `token`. Returns false, having sent nothing,
    /// where the bytes are not a request.
    pub fn dispatch(&self, request: &[u8], transport: &Arc<dyn ReplyTransport>, token: u64) -> bool {
        let Some(req) = RequestWithSender::new(self.event_loop.ch.sender(), request) else {
            return false;
        };
        let req = req.with_transport(transport.clone(), token);
        if let Ok(Operation::Destroy(_)) = req.request.operation() {
            req.reply::<ReplyEmpty>().ok();
        } else {
            req.dispatch(&self.event_loop);
        }
        true
    }
}

/// A transport that runs beside the session's readers: [`crate::Session::run_with`]
/// starts it once the readers run and stops it after they end (the connection is
/// gone), before the file system's `destroy`. `stop` must drop every
/// [`RequestDispatcher`] it was given, clones included.
pub trait SideTransport<FS: Filesystem> {
    /// Starts serving requests through `dispatcher`. An error leaves the session on
    /// its readers alone.
    fn start(&mut self, dispatcher: RequestDispatcher<FS>) -> io::Result<()>;
    /// Stops serving and drops every dispatcher.
    fn stop(&mut self);
}
