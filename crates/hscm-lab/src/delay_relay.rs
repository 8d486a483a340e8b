//! A TCP relay that adds round-trip time: every byte is held for half of it in each
//! direction, whatever is in flight, so a pipelined client pays it once per round
//! trip, as on a real link. `tc netem` is the kernel's way; this machine kind's kernel
//! has no sch_netem (nor sch_fq for earliest-departure-time pacing), so the relay
//! stands in for it.
//!
//! The relay's CPU is this machine's, which every measured target shares, so it is
//! kept small: one thread per connection, both directions and a timer (timerfd, to
//! the microsecond) in one `poll` loop, and everything due at a wake-up sent in one
//! write.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

/// Relays to 127.0.0.1:`upstream` from its own port until dropped.
pub struct DelayRelay {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Drop for DelayRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl DelayRelay {
    /// `one_way`: the delay each direction adds (the round trip adds twice that).
    pub fn start(upstream: u16, one_way: Duration) -> Result<DelayRelay> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let stop = s.clone();
                std::thread::spawn(move || {
                    let _ = relay(client, server, one_way, &stop);
                });
            }
        });
        Ok(DelayRelay { port, stop })
    }
}

/// One direction: bytes read, each due at its arrival plus the delay.
struct Lane {
    queue: VecDeque<(Instant, Vec<u8>)>,
    /// The reading side ended (EOF or error): once the queue is out, the writing
    /// side is shut too.
    read_done: bool,
    write_shut: bool,
}

impl Lane {
    fn new() -> Lane {
        Lane {
            queue: VecDeque::new(),
            read_done: false,
            write_shut: false,
        }
    }

    /// Reads what `from` has now (it is non-blocking).
    fn take_in(&mut self, from: &mut TcpStream, delay: Duration, buf: &mut [u8]) {
        loop {
            match from.read(buf) {
                Ok(0) => {
                    self.read_done = true;
                    return;
                }
                Ok(n) => self
                    .queue
                    .push_back((Instant::now() + delay, buf[..n].to_vec())),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.read_done = true;
                    return;
                }
            }
        }
    }

    /// Sends everything due by now to `to`, in one write where it can; what the
    /// socket does not take now stays at the head. False if `to` is gone.
    fn send_due(&mut self, to: &mut TcpStream) -> bool {
        let now = Instant::now();
        let mut out = Vec::new();
        while self.queue.front().is_some_and(|(due, _)| *due <= now) {
            let (_, bytes) = self.queue.pop_front().expect("looked at");
            out.extend_from_slice(&bytes);
        }
        let mut at = 0;
        while at < out.len() {
            match to.write(&out[at..]) {
                Ok(n) => at += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    // Back at the head, due already: sent when the socket takes it.
                    self.queue.push_front((now, out[at..].to_vec()));
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        if self.read_done && self.queue.is_empty() && !self.write_shut {
            let _ = to.shutdown(std::net::Shutdown::Write);
            self.write_shut = true;
        }
        true
    }

    fn next_due(&self) -> Option<Instant> {
        self.queue.front().map(|(due, _)| *due)
    }

    /// Data due now that the socket did not take: wait until it can.
    fn blocked(&self) -> bool {
        self.next_due().is_some_and(|d| d <= Instant::now())
    }
}

fn relay(
    mut client: TcpStream,
    mut server: TcpStream,
    one_way: Duration,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    for s in [&client, &server] {
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
    }
    // poll's own timeout counts whole milliseconds; the timer wakes it to the µs.
    let timer = timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
    )?;
    // [0]: client to server, [1]: server to client.
    let mut lanes = [Lane::new(), Lane::new()];
    let mut buf = vec![0u8; 1 << 20];
    loop {
        if stop.load(Ordering::Relaxed) || (lanes[0].write_shut && lanes[1].write_shut) {
            break;
        }
        let wait = lanes
            .iter()
            .filter_map(Lane::next_due)
            .min()
            .map(|d| d.saturating_duration_since(Instant::now()));
        // Data due already waits for room in its socket (POLLOUT); data due later
        // sets the timer. Every 200 ms the loop looks at `stop`.
        if let Some(w) = wait.filter(|w| !w.is_zero()) {
            let zero = Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            let at = Timespec {
                tv_sec: w.as_secs() as _,
                tv_nsec: w.subsec_nanos() as _,
            };
            timerfd_settime(
                &timer,
                TimerfdTimerFlags::empty(),
                &Itimerspec {
                    it_interval: zero,
                    it_value: at,
                },
            )?;
        }
        let flags = |reading: bool, writing: bool| {
            let mut f = PollFlags::empty();
            if reading {
                f |= PollFlags::IN;
            }
            if writing {
                f |= PollFlags::OUT;
            }
            f
        };
        {
            let mut fds = [
                PollFd::from_borrowed_fd(
                    client.as_fd(),
                    flags(!lanes[0].read_done, lanes[1].blocked()),
                ),
                PollFd::from_borrowed_fd(
                    server.as_fd(),
                    flags(!lanes[1].read_done, lanes[0].blocked()),
                ),
                PollFd::from_borrowed_fd(timer.as_fd(), PollFlags::IN),
            ];
            match poll(&mut fds, 200) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        // Clear the timer's count (nothing to read when it has not fired).
        let _ = rustix::io::read(&timer, &mut [0u8; 8]);
        if !lanes[0].read_done {
            lanes[0].take_in(&mut client, one_way, &mut buf);
        }
        if !lanes[1].read_done {
            lanes[1].take_in(&mut server, one_way, &mut buf);
        }
        if !lanes[0].send_due(&mut server) || !lanes[1].send_due(&mut client) {
            break;
        }
    }
    let _ = client.shutdown(std::net::Shutdown::Both);
    let _ = server.shutdown(std::net::Shutdown::Both);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes cross unchanged in both directions, each way no sooner than the delay,
    /// and the end of one side's stream reaches the other.
    #[test]
    fn relays_both_ways_after_the_delay() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        let echo = std::thread::spawn(move || {
            let (mut s, _) = upstream.accept().unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            s.write_all(&got).unwrap();
        });
        let relay = DelayRelay::start(port, Duration::from_millis(20)).unwrap();
        let mut c = TcpStream::connect(("127.0.0.1", relay.port)).unwrap();
        let sent: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let started = Instant::now();
        c.write_all(&sent).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        c.read_to_end(&mut back).unwrap();
        assert!(back == sent, "the bytes came back changed");
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "a round trip took less than the two delays"
        );
        echo.join().unwrap();
    }
}
