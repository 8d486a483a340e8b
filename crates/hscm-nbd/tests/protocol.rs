//! The server against a raw client that speaks the protocol byte by byte, including
//! every way of getting it wrong: each case gets the spec's error or a clean
//! disconnect of that client, and the server goes on serving the next one.

mod client;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use client::*;

#[test]
fn written_bytes_read_back_and_every_capability_is_advertised() {
    let r = start(false);
    let mut s = connect(&r.path);
    let flags = go(&mut s, "disk");
    for f in [
        TX_HAS_FLAGS,
        TX_SEND_FLUSH,
        TX_SEND_FUA,
        TX_SEND_TRIM,
        TX_SEND_WRITE_ZEROES,
        TX_SEND_CACHE,
    ] {
        assert!(flags & f != 0, "flag {f:#x} missing from {flags:#x}");
    }
    assert_eq!(flags & TX_READ_ONLY, 0);
    assert_eq!(write(&mut s, 1, 4096, &[0xab; 8192]), 0);
    assert_eq!(read(&mut s, 2, 4096, 8192).unwrap(), vec![0xab; 8192]);
    assert_eq!(read(&mut s, 3, 0, 16).unwrap(), vec![0; 16]);
    request(&mut s, CMD_FLUSH, 0, 4, 0, 0);
    assert_eq!(simple_reply(&mut s), (0, 4));
    request(&mut s, CMD_WRITE_ZEROES, CMD_FLAG_NO_HOLE, 5, 4096, 4096);
    assert_eq!(simple_reply(&mut s), (0, 5));
    request(&mut s, CMD_TRIM, 0, 6, 8192, 4096);
    assert_eq!(simple_reply(&mut s), (0, 6));
    assert_eq!(read(&mut s, 7, 4096, 8192).unwrap(), vec![0; 8192]);
    request(&mut s, CMD_CACHE, 0, 8, 0, 65536);
    assert_eq!(simple_reply(&mut s), (0, 8));
    // The memory target zeroes fast, so it says so and takes FAST_ZERO.
    assert!(flags & TX_SEND_FAST_ZERO != 0);
    request(&mut s, CMD_WRITE_ZEROES, CMD_FLAG_FAST_ZERO, 10, 0, 4096);
    assert_eq!(simple_reply(&mut s), (0, 10));
    request(&mut s, CMD_DISC, 0, 9, 0, 0);
    assert!(is_closed(&mut s));
}

#[test]
fn the_old_export_name_option_still_enters_transmission() {
    let r = start(false);
    let mut s = connect(&r.path);
    send_option(&mut s, OPT_EXPORT_NAME, b"disk");
    let mut v = [0u8; 10];
    s.read_exact(&mut v).unwrap();
    assert_eq!(u64::from_be_bytes(v[0..8].try_into().unwrap()), SIZE);
    assert_eq!(write(&mut s, 1, 0, b"hello"), 0);
    assert_eq!(read(&mut s, 2, 0, 5).unwrap(), b"hello");
}

#[test]
fn an_unknown_option_is_refused_and_the_handshake_goes_on() {
    let r = start(false);
    let mut s = connect(&r.path);
    send_option(&mut s, 0x4242, b"whatever");
    let (opt, kind, _) = option_reply(&mut s);
    assert_eq!((opt, kind), (0x4242, REP_ERR_UNSUP));
    send_option(&mut s, OPT_LIST, &[]);
    let (_, kind, data) = option_reply(&mut s);
    assert_eq!(kind, REP_SERVER);
    assert_eq!(&data[4..8], b"disk");
    assert_eq!(option_reply(&mut s).1, REP_ACK);
    send_option(&mut s, OPT_GO, &info_request("no-such-export", &[]));
    assert_eq!(option_reply(&mut s).1, REP_ERR_UNKNOWN);
    // INFO answers what GO would, without ending the handshake.
    send_option(
        &mut s,
        OPT_INFO,
        &info_request("disk", &[INFO_NAME, INFO_BLOCK_SIZE]),
    );
    let mut kinds = Vec::new();
    loop {
        let (_, kind, data) = option_reply(&mut s);
        if kind == REP_ACK {
            break;
        }
        assert_eq!(kind, REP_INFO);
        kinds.push(u16::from_be_bytes([data[0], data[1]]));
        if kinds.last() == Some(&INFO_BLOCK_SIZE) {
            let max = u32::from_be_bytes(data[10..14].try_into().unwrap());
            assert_eq!(max, 32 << 20);
        }
    }
    assert_eq!(kinds, [INFO_EXPORT, INFO_NAME, INFO_BLOCK_SIZE]);
    // Meta contexts need structured replies first.
    send_option(&mut s, OPT_SET_META_CONTEXT, &[0; 8]);
    assert_eq!(option_reply(&mut s).1, REP_ERR_INVALID);
    go(&mut s, "");
    assert_eq!(read(&mut s, 1, 0, 4).unwrap(), vec![0; 4]);
}

#[test]
fn a_bad_magic_in_the_handshake_or_a_request_drops_only_that_client() {
    let r = start(false);
    let mut s = connect(&r.path);
    s.write_all(&[0x55; 16]).unwrap();
    assert!(is_closed(&mut s));

    let mut s = connect(&r.path);
    go(&mut s, "disk");
    s.write_all(&[0x11; REQUEST_LEN]).unwrap();
    assert!(is_closed(&mut s));

    // Unknown client flags.
    let mut s = UnixStream::connect(&r.path).unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&0x8000_0000u32.to_be_bytes()).unwrap();
    assert!(is_closed(&mut s));

    let mut s = connect(&r.path);
    go(&mut s, "disk");
    assert_eq!(read(&mut s, 1, 0, 4).unwrap(), vec![0; 4], "still serving");
}

#[test]
fn requests_out_of_range_oversize_or_unknown_get_the_specs_errors() {
    let r = start(false);
    let mut s = connect(&r.path);
    go(&mut s, "disk");
    assert_eq!(read(&mut s, 1, SIZE - 2, 4), Err(EINVAL));
    assert_eq!(read(&mut s, 2, u64::MAX, 4), Err(EINVAL));
    assert_eq!(write(&mut s, 3, SIZE - 2, &[1; 4]), ENOSPC);
    assert_eq!(
        read(&mut s, 4, 0, 33 << 20),
        Err(EINVAL),
        "over the maximum"
    );
    request(&mut s, 99, 0, 5, 0, 0);
    assert_eq!(simple_reply(&mut s), (EINVAL, 5));
    request(&mut s, CMD_READ, 1 << 9, 6, 0, 4);
    assert_eq!(simple_reply(&mut s), (EINVAL, 6), "unknown command flag");
    // BLOCK_STATUS without a negotiated context.
    request(&mut s, CMD_BLOCK_STATUS, 0, 7, 0, 4096);
    assert_eq!(simple_reply(&mut s), (EINVAL, 7));
    assert_eq!(
        read(&mut s, 8, 0, 4).unwrap(),
        vec![0; 4],
        "the connection goes on"
    );
}

#[test]
fn a_read_only_export_refuses_writes_trims_and_zeroes() {
    let r = start(true);
    let mut s = connect(&r.path);
    let flags = go(&mut s, "disk");
    assert!(flags & TX_READ_ONLY != 0);
    assert_eq!(write(&mut s, 1, 0, &[1; 512]), EPERM);
    request(&mut s, CMD_TRIM, 0, 2, 0, 4096);
    assert_eq!(simple_reply(&mut s), (EPERM, 2));
    request(&mut s, CMD_WRITE_ZEROES, 0, 3, 0, 4096);
    assert_eq!(simple_reply(&mut s), (EPERM, 3));
    assert_eq!(read(&mut s, 4, 0, 512).unwrap(), vec![0; 512]);
}

#[test]
fn a_client_that_vanishes_mid_request_or_mid_handshake_leaves_the_server_up() {
    let r = start(false);
    {
        let mut s = connect(&r.path);
        go(&mut s, "disk");
        request(&mut s, CMD_WRITE, 0, 1, 0, 4096);
        s.write_all(&[7; 100]).unwrap();
    }
    {
        let mut s = connect(&r.path);
        s.write_all(&IHAVEOPT.to_be_bytes()[..5]).unwrap();
    }
    {
        let mut s = connect(&r.path);
        go(&mut s, "disk");
        s.write_all(&REQUEST_MAGIC.to_be_bytes()).unwrap();
    }
    let mut s = connect(&r.path);
    go(&mut s, "disk");
    assert_eq!(
        read(&mut s, 1, 0, 4096).unwrap(),
        vec![0; 4096],
        "the unfinished write changed nothing"
    );
}

#[test]
fn pipelined_requests_each_get_their_own_reply() {
    let r = start(false);
    let mut s = connect(&r.path);
    go(&mut s, "disk");
    for i in 0..64u64 {
        let block = [i as u8; 4096];
        request(&mut s, CMD_WRITE, 0, i, i * 4096, 4096);
        s.write_all(&block).unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..64 {
        let (err, cookie) = simple_reply(&mut s);
        assert_eq!(err, 0);
        assert!(seen.insert(cookie), "cookie {cookie} answered twice");
    }
    for i in 0..64u64 {
        request(&mut s, CMD_READ, 0, 1000 + i, i * 4096, 4096);
    }
    for _ in 0..64 {
        let (err, cookie) = simple_reply(&mut s);
        assert_eq!(err, 0);
        let mut data = vec![0u8; 4096];
        s.read_exact(&mut data).unwrap();
        let i = cookie - 1000;
        assert!(
            data.iter().all(|&b| b == i as u8),
            "reply {cookie} carries its own block"
        );
    }
}

#[test]
fn a_hundred_clients_at_once_are_all_served() {
    let r = start(false);
    let path = r.path.clone();
    let clients: Vec<_> = (0..100u64)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut s = connect(&path);
                go(&mut s, "disk");
                let data = [i as u8 + 1; 512];
                assert_eq!(write(&mut s, i, i * 512, &data), 0);
                assert_eq!(read(&mut s, i, i * 512, 512).unwrap(), data);
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}

#[test]
fn block_status_reports_zeroed_ranges_as_zero() {
    let r = start(false);
    let mut s = connect(&r.path);
    send_option(&mut s, OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(option_reply(&mut s).1, REP_ACK);
    let mut q = 0u32.to_be_bytes().to_vec();
    q.extend_from_slice(&1u32.to_be_bytes());
    q.extend_from_slice(&(BASE_ALLOCATION.len() as u32).to_be_bytes());
    q.extend_from_slice(BASE_ALLOCATION.as_bytes());
    send_option(&mut s, OPT_SET_META_CONTEXT, &q);
    let (_, kind, data) = option_reply(&mut s);
    assert_eq!(kind, REP_META_CONTEXT);
    assert_eq!(&data[4..], BASE_ALLOCATION.as_bytes());
    assert_eq!(option_reply(&mut s).1, REP_ACK);
    go(&mut s, "disk");

    request(&mut s, CMD_WRITE, 0, 1, 8192, 4096);
    s.write_all(&[9; 4096]).unwrap();
    assert_eq!(simple_reply(&mut s), (0, 1));
    request(&mut s, CMD_BLOCK_STATUS, 0, 2, 0, 16384);
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(
        u32::from_be_bytes(h[0..4].try_into().unwrap()),
        STRUCTURED_REPLY_MAGIC
    );
    assert_eq!(u16::from_be_bytes([h[6], h[7]]), REPLY_TYPE_BLOCK_STATUS);
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body).unwrap();
    let runs: Vec<(u32, u32)> = body[4..]
        .chunks(8)
        .map(|c| {
            (
                u32::from_be_bytes(c[0..4].try_into().unwrap()),
                u32::from_be_bytes(c[4..8].try_into().unwrap()),
            )
        })
        .collect();
    assert_eq!(runs, [(8192, STATE_ZERO), (4096, 0), (4096, STATE_ZERO)]);
}

/// A session's bytes: a valid greeting reply and GO, then requests, some of them
/// mangled; or plain garbage from the start.
fn session_bytes(rng: &mut rand::rngs::SmallRng) -> Vec<u8> {
    use rand::Rng;
    let mut v = Vec::new();
    if rng.gen_bool(0.2) {
        let n = rng.gen_range(0..200);
        v.extend((0..n).map(|_| rng.gen::<u8>()));
        return v;
    }
    v.extend_from_slice(&(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES).to_be_bytes());
    if rng.gen_bool(0.3) {
        v.extend_from_slice(&IHAVEOPT.to_be_bytes());
        v.extend_from_slice(&rng.gen_range(0u32..12).to_be_bytes());
        let len = rng.gen_range(0u32..40);
        v.extend_from_slice(&len.to_be_bytes());
        v.extend((0..len).map(|_| rng.gen::<u8>()));
    }
    v.extend_from_slice(&IHAVEOPT.to_be_bytes());
    v.extend_from_slice(&OPT_GO.to_be_bytes());
    let go = info_request("", &[INFO_BLOCK_SIZE]);
    v.extend_from_slice(&(go.len() as u32).to_be_bytes());
    v.extend_from_slice(&go);
    for cookie in 0..rng.gen_range(1..20u64) {
        let kind = rng.gen_range(0u16..10);
        let len = match rng.gen_range(0..4) {
            0 => rng.gen::<u32>(),
            _ => rng.gen_range(0u32..9000),
        };
        let offset = match rng.gen_range(0..4) {
            0 => rng.gen::<u64>(),
            _ => rng.gen_range(0..SIZE + 10_000),
        };
        let mut h = REQUEST_MAGIC.to_be_bytes().to_vec();
        if rng.gen_bool(0.05) {
            h[0] ^= 1;
        }
        h.extend_from_slice(&(rng.gen::<u16>() & 0x3f).to_be_bytes());
        h.extend_from_slice(&kind.to_be_bytes());
        h.extend_from_slice(&cookie.to_be_bytes());
        h.extend_from_slice(&offset.to_be_bytes());
        h.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(&h);
        if kind == CMD_WRITE {
            let sent = if rng.gen_bool(0.9) {
                len.min(9000)
            } else {
                len.min(100) / 2
            };
            v.extend((0..sent).map(|_| rng.gen::<u8>()));
        }
    }
    v
}

#[test]
fn random_sessions_never_take_the_server_down() {
    use rand::SeedableRng;
    let r = start(false);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x6e6264);
    for round in 0..300 {
        let bytes = session_bytes(&mut rng);
        let mut s = UnixStream::connect(&r.path).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        // Replies are read (and dropped) alongside, so the server never blocks on a
        // full socket while the session is still being written.
        let mut reader = s.try_clone().unwrap();
        let drain = std::thread::spawn(move || {
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let _ = s.write_all(&bytes);
        let _ = s.shutdown(std::net::Shutdown::Write);
        drain.join().unwrap();
        if round % 50 == 0 {
            let mut s = connect(&r.path);
            go(&mut s, "disk");
            assert!(
                read(&mut s, 1, 0, 16).is_ok(),
                "round {round}: still serving"
            );
        }
    }
    let mut s = connect(&r.path);
    go(&mut s, "disk");
    assert!(read(&mut s, 1, 0, 4096).is_ok());
}

#[test]
fn the_fuzz_driver_runs_a_valid_and_a_broken_session() {
    let mut valid = (CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES)
        .to_be_bytes()
        .to_vec();
    valid.extend_from_slice(&IHAVEOPT.to_be_bytes());
    valid.extend_from_slice(&OPT_EXPORT_NAME.to_be_bytes());
    valid.extend_from_slice(&0u32.to_be_bytes());
    let mut write = REQUEST_MAGIC.to_be_bytes().to_vec();
    write.extend_from_slice(&0u16.to_be_bytes());
    write.extend_from_slice(&CMD_WRITE.to_be_bytes());
    write.extend_from_slice(&1u64.to_be_bytes());
    write.extend_from_slice(&0u64.to_be_bytes());
    write.extend_from_slice(&4u32.to_be_bytes());
    write.extend_from_slice(b"data");
    valid.extend_from_slice(&write);
    hscm_nbd::testing::run_session(&valid, false);
    hscm_nbd::testing::run_session(&valid, true);
    hscm_nbd::testing::run_session(&valid[..7], false);
    hscm_nbd::testing::run_session(b"garbage", false);
}
