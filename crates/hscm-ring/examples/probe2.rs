use hscm_ring::*;
use hscm_store::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v");
    hscm_store::Volume::create(&p, 256 << 20, &CreateOptions::default()).unwrap();
    let v = Arc::new(Volume::open(&p, &OpenOptions::default()).unwrap());
    v.wait_loaded(None).unwrap();
    let s = Server::bind(
        &dir.path().join("s"),
        v.clone(),
        ServerOptions {
            idle_spin: Duration::from_micros(1000),
            ..Default::default()
        },
    )
    .unwrap()
    .spawn()
    .unwrap();
    let c = Client::connect(
        s.path(),
        &ClientOptions {
            db_len: 2 << 20,
            chunk: 65536,
            wait: WaitMode::Poll,
            ..Default::default()
        },
    )
    .unwrap();
    let mut q = c.queue().unwrap();
    let chunk: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(65536);
    let mut buf = vec![0u8; chunk as usize];
    let mut t = [0u64; 4];
    let n: u64 = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(5000);
    for i in 0..n {
        let t0 = Instant::now();
        let lease = q.client_lease(chunk).unwrap();
        let t1 = Instant::now();
        q.submit(
            if chunk < 512 {
                Op::ReadBytes {
                    offset: i * 4096,
                    len: chunk as u32,
                }
            } else {
                Op::Read {
                    sector: ((i * 7919) % 1000) * (chunk / 512),
                    count: (chunk / 512) as u32,
                }
            },
            Some(lease),
        )
        .unwrap();
        let c = q.complete().unwrap();
        let t2 = Instant::now();
        c.lease.as_ref().unwrap().read(0, &mut buf);
        let t3 = Instant::now();
        drop(c);
        let t4 = Instant::now();
        for (k, (a, b)) in [(t0, t1), (t1, t2), (t2, t3), (t3, t4)].iter().enumerate() {
            t[k] += (*b - *a).as_nanos() as u64;
        }
    }
    println!(
        "lease {} submit+complete {} copy {} free {} ns",
        t[0] / n,
        t[1] / n,
        t[2] / n,
        t[3] / n
    );
    let mut b2 = vec![0u8; chunk as usize];
    let t0 = Instant::now();
    for i in 0..n {
        v.read_at(((i * 7919) % 1000) * chunk, &mut b2).unwrap();
    }
    println!("volume read {} ns", t0.elapsed().as_nanos() as u64 / n);
}
