//! Block and object request traces for cache simulation: libCacheSim's oracleGeneral
//! binary and CSV, ARC-style `.lis`, SPC/UMass, MSR Cambridge, and valgrind lackey
//! (each memory reference becomes a request for its block). Offset/size requests are
//! split into fixed-size blocks on the fly.

use std::io::BufRead;
use std::path::Path;

use crate::{Access, TraceError, TraceReader};

/// One request for an object (or a block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub key: u64,
    pub size: u32,
    pub write: bool,
    pub time: u64,
    /// Index of this key's next request (oracleGeneral carries it); None if unknown,
    /// Some(u64::MAX) if never.
    pub next: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFormat {
    OracleGeneral,
    Csv,
    Lis,
    Spc,
    Msr,
    Lackey,
}

impl RequestFormat {
    pub const NAMES: &'static [&'static str] =
        &["oracle-general", "csv", "lis", "spc", "msr", "lackey"];
    /// [`Self::NAMES`] as one phrase, for messages.
    pub const NAMES_TEXT: &'static str = "oracle-general, csv, lis, spc, msr, lackey";

    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "oracle-general" => Self::OracleGeneral,
            "csv" => Self::Csv,
            "lis" => Self::Lis,
            "spc" => Self::Spc,
            "msr" => Self::Msr,
            "lackey" => Self::Lackey,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// Guesses a request format from a file name and its first (decompressed) bytes.
pub fn detect_requests(name: &str, head: &[u8]) -> Option<RequestFormat> {
    if name.contains("oracleGeneral") || name.contains("oracle-general") {
        return Some(RequestFormat::OracleGeneral);
    }
    if crate::detect(head) == Some(crate::Format::Lackey) {
        return Some(RequestFormat::Lackey);
    }
    let text = std::str::from_utf8(&head[..head.len().min(4096)])
        .ok()
        .or_else(|| {
            let cut = std::str::from_utf8(&head[..head.len().min(4096)])
                .err()?
                .valid_up_to();
            std::str::from_utf8(&head[..cut]).ok()
        })?;
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))?;
    let fields: Vec<&str> = line.split(',').map(str::trim).collect();
    match fields.len() {
        7 => Some(RequestFormat::Msr),
        5 if matches!(fields[3], "r" | "R" | "w" | "W") => Some(RequestFormat::Spc),
        1 if line.split_whitespace().count() >= 2 => Some(RequestFormat::Lis),
        n if n >= 2 => Some(RequestFormat::Csv),
        _ => None,
    }
}

/// Requests from a file.
pub struct RequestReader {
    inner: Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>,
    format: RequestFormat,
}

impl RequestReader {
    /// `block`: the block size that offset/size formats (lis, spc, msr, lackey) are
    /// split into, in bytes.
    pub fn open(
        path: &Path,
        format: Option<RequestFormat>,
        block: u32,
    ) -> Result<Self, TraceError> {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| TraceError::io(&name, e))?;
        let (stream, head) = crate::open_stream(Box::new(file), &name)?;
        let format = match format {
            Some(f) => f,
            None => detect_requests(&name, &head)
                .ok_or_else(|| crate::unknown_format(&name, &head, RequestFormat::NAMES_TEXT))?,
        };
        let block = block.max(1);
        let inner: Box<dyn Iterator<Item = Result<Request, TraceError>> + Send> = match format {
            RequestFormat::OracleGeneral => Box::new(OracleReader::new(stream, name)),
            RequestFormat::Lackey => {
                let refs =
                    TraceReader::from_reader(Box::new(stream), &name, Some(crate::Format::Lackey))?;
                let mut time = 0u64;
                Box::new(refs.map(move |r| {
                    let r = r?;
                    time += r.delta;
                    Ok(Request {
                        key: r.addr / u64::from(block),
                        size: block,
                        write: r.kind == Access::Write,
                        time,
                        next: None,
                    })
                }))
            }
            _ => Box::new(TextRequests {
                input: stream,
                name,
                format,
                block,
                line_no: 0,
                line: String::new(),
                pending: Vec::new(),
            }),
        };
        Ok(Self { inner, format })
    }

    pub fn format(&self) -> RequestFormat {
        self.format
    }
}

impl Iterator for RequestReader {
    type Item = Result<Request, TraceError>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

/// libCacheSim oracleGeneral: 24-byte little-endian records (u32 time, u64 id, u32 size,
/// i64 next access index, -1 for never). Decoded from a large buffer, not record by
/// record through the reader.
struct OracleReader<R> {
    win: crate::binary::Window<R>,
    name: String,
    done: bool,
}

impl<R: BufRead> OracleReader<R> {
    fn new(input: R, name: String) -> Self {
        Self {
            win: crate::binary::Window::new(input, 24 << 12, 0),
            name,
            done: false,
        }
    }
}

impl<R: BufRead> Iterator for OracleReader<R> {
    type Item = Result<Request, TraceError>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Err(e) = self.win.fill(24) {
            self.done = true;
            return Some(Err(TraceError::io(&self.name, e)));
        }
        let avail = self.win.len - self.win.pos;
        if avail == 0 {
            self.done = true;
            return None;
        }
        if avail < 24 {
            self.done = true;
            return Some(Err(TraceError::Binary {
                name: self.name.clone(),
                offset: self.win.offset(),
                message: format!("truncated oracleGeneral record ({avail} of 24 bytes)"),
            }));
        }
        let rec = &self.win.buf[self.win.pos..self.win.pos + 24];
        self.win.pos += 24;
        let time = u64::from(u32::from_le_bytes(rec[0..4].try_into().expect("4 bytes")));
        let key = u64::from_le_bytes(rec[4..12].try_into().expect("8 bytes"));
        let size = u32::from_le_bytes(rec[12..16].try_into().expect("4 bytes"));
        let next = i64::from_le_bytes(rec[16..24].try_into().expect("8 bytes"));
        Some(Ok(Request {
            key,
            size: size.max(1),
            write: false,
            time,
            next: Some(if next < 0 { u64::MAX } else { next as u64 }),
        }))
    }
}

/// Writes oracleGeneral records.
pub fn write_oracle_general(
    out: &mut impl std::io::Write,
    time: u32,
    key: u64,
    size: u32,
    next: Option<u64>,
) -> std::io::Result<()> {
    let mut rec = [0u8; 24];
    rec[0..4].copy_from_slice(&time.to_le_bytes());
    rec[4..12].copy_from_slice(&key.to_le_bytes());
    rec[12..16].copy_from_slice(&size.to_le_bytes());
    let n: i64 = match next {
        Some(n) if n != u64::MAX => n as i64,
        _ => -1,
    };
    rec[16..24].copy_from_slice(&n.to_le_bytes());
    out.write_all(&rec)
}

struct TextRequests<R> {
    input: R,
    name: String,
    format: RequestFormat,
    block: u32,
    line_no: u64,
    line: String,
    /// Blocks of a multi-block request still to hand out (reversed).
    pending: Vec<Request>,
}

impl<R: BufRead> TextRequests<R> {
    fn error(&self, m: impl Into<String>) -> TraceError {
        TraceError::Parse {
            name: self.name.clone(),
            line: self.line_no,
            message: m.into(),
        }
    }

    fn num(&self, s: &str, what: &str) -> Result<u64, TraceError> {
        let t = s.trim();
        t.parse::<u64>()
            .or_else(|_| t.parse::<f64>().map(|f| f as u64).map_err(|_| ()))
            .map_err(|_| self.error(format!("bad {what} {t:?}")))
    }

    /// Splits [offset, offset + len) into blocks, in order.
    fn split(&mut self, space: u64, offset: u64, len: u64, write: bool, time: u64) {
        let b = u64::from(self.block);
        let first = offset / b;
        let last = (offset + len.max(1) - 1) / b;
        for blk in (first..=last).rev() {
            self.pending.push(Request {
                key: (space << 48) ^ blk,
                size: self.block,
                write,
                time,
                next: None,
            });
        }
    }

    fn parse(&mut self) -> Result<(), TraceError> {
        let line = std::mem::take(&mut self.line);
        let t = line.trim();
        let result = (|| {
            if t.is_empty() || t.starts_with('#') {
                return Ok(());
            }
            match self.format {
                RequestFormat::Csv => {
                    let f: Vec<&str> = t.split(',').collect();
                    if f.len() < 2 {
                        return Err(self.error("expected time,id[,size]"));
                    }
                    // A header line.
                    if f[0].trim().parse::<f64>().is_err() && self.line_no == 1 {
                        return Ok(());
                    }
                    let time = self.num(f[0], "time")?;
                    let key = self.num(f[1], "object id")?;
                    let size = if f.len() > 2 {
                        self.num(f[2], "size")?
                    } else {
                        1
                    };
                    let size =
                        u32::try_from(size.max(1)).map_err(|_| self.error("size above 4 GiB"))?;
                    self.pending.push(Request {
                        key,
                        size,
                        write: false,
                        time,
                        next: None,
                    });
                }
                RequestFormat::Lis => {
                    let f: Vec<&str> = t.split_whitespace().collect();
                    if f.len() < 2 {
                        return Err(self.error("expected `start count ...`"));
                    }
                    let start = self.num(f[0], "start block")?;
                    let count = self.num(f[1], "block count")?;
                    if count > 1 << 20 {
                        return Err(self.error(format!("block count {count} is implausible")));
                    }
                    for blk in (start..start + count.max(1)).rev() {
                        self.pending.push(Request {
                            key: blk,
                            size: self.block,
                            write: false,
                            time: self.line_no,
                            next: None,
                        });
                    }
                }
                RequestFormat::Spc => {
                    let f: Vec<&str> = t.split(',').map(str::trim).collect();
                    if f.len() < 5 {
                        return Err(self.error("expected ASU,LBA,size,opcode,timestamp"));
                    }
                    let asu = self.num(f[0], "ASU")?;
                    let lba = self.num(f[1], "LBA")?;
                    let size = self.num(f[2], "size")?;
                    let write = match f[3] {
                        "w" | "W" => true,
                        "r" | "R" => false,
                        o => return Err(self.error(format!("opcode {o:?} is not r or w"))),
                    };
                    let time = (f[4]
                        .parse::<f64>()
                        .map_err(|_| self.error("bad timestamp"))?
                        * 1e6) as u64;
                    self.check_len(size)?;
                    self.split(asu, lba * 512, size, write, time);
                }
                RequestFormat::Msr => {
                    let f: Vec<&str> = t.split(',').map(str::trim).collect();
                    if f.len() < 6 {
                        return Err(self
                            .error("expected Timestamp,Hostname,DiskNumber,Type,Offset,Size,..."));
                    }
                    let time = self.num(f[0], "timestamp")?;
                    let disk = self.num(f[2], "disk number")?;
                    let write = match f[3] {
                        "Write" | "write" => true,
                        "Read" | "read" => false,
                        o => return Err(self.error(format!("type {o:?} is not Read or Write"))),
                    };
                    let offset = self.num(f[4], "offset")?;
                    let size = self.num(f[5], "size")?;
                    self.check_len(size)?;
                    let host = f[1]
                        .bytes()
                        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
                    self.split((host << 8 ^ disk) & 0xffff, offset, size, write, time);
                }
                RequestFormat::OracleGeneral | RequestFormat::Lackey => unreachable!("own readers"),
            }
            Ok(())
        })();
        self.line = line;
        result
    }

    fn check_len(&self, size: u64) -> Result<(), TraceError> {
        if size > 1 << 32 {
            return Err(self.error(format!("request size {size} is implausible")));
        }
        Ok(())
    }
}

impl<R: BufRead> Iterator for TextRequests<R> {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.pending.pop() {
                return Some(Ok(r));
            }
            self.line.clear();
            match self.input.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    self.line_no += 1;
                    return Some(Err(self.error(crate::read_failure(&e, self.format.name()))));
                }
            }
            self.line_no += 1;
            if let Err(e) = self.parse() {
                return Some(Err(e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(name: &str, bytes: &[u8], block: u32) -> Result<Vec<Request>, TraceError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        RequestReader::open(&p, None, block)?.collect()
    }

    #[test]
    fn every_format_is_detected_and_split_into_blocks() {
        let csv = read("t.csv", b"time,id,size\n1,10,100\n2,11,200\n", 4096).unwrap();
        assert_eq!(
            csv.iter().map(|r| (r.key, r.size)).collect::<Vec<_>>(),
            vec![(10, 100), (11, 200)]
        );
        let spc = read("t.spc", b"0,8,8192,r,0.5\n1,0,512,W,1.0\n", 4096).unwrap();
        assert_eq!(spc.len(), 3);
        assert_eq!((spc[0].key & 0xffff, spc[1].key & 0xffff), (1, 2));
        assert!(spc[2].write && spc[2].key >> 48 == 1);
        let msr = read(
            "t.msr",
            b"128166372003061629,hm,0,Read,4096,8192,100\n",
            4096,
        )
        .unwrap();
        assert_eq!(msr.len(), 2);
        let lis = read("t.lis", b"100 3 0 1\n", 4096).unwrap();
        assert_eq!(
            lis.iter().map(|r| r.key).collect::<Vec<_>>(),
            vec![100, 101, 102]
        );
        let lk = read("t.lackey", b"I  00001000,4\n S 2000,8\n", 4096).unwrap();
        assert_eq!(
            lk.iter().map(|r| (r.key, r.write)).collect::<Vec<_>>(),
            vec![(1, false), (2, true)]
        );
        let mut og = Vec::new();
        write_oracle_general(&mut og, 1, 77, 4096, Some(5)).unwrap();
        write_oracle_general(&mut og, 2, 78, 10, None).unwrap();
        let o = read("x.oracleGeneral", &og, 4096).unwrap();
        assert_eq!(
            (o[0].key, o[0].next, o[1].next),
            (77, Some(5), Some(u64::MAX))
        );
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        for (name, body, want) in [
            (
                "a.spc",
                &b"0,8,8192,r,0.5\n0,8,8192,x,0.5\n"[..],
                "a.spc:2: opcode",
            ),
            (
                "b.msr",
                b"1,hm,0,Read,4096,8192,1\n1,hm,0,Read,abc,8192,1\n",
                "b.msr:2: bad offset",
            ),
            ("c.csv", b"1,2,3\n1,x,3\n", "c.csv:2: bad object id"),
            ("d.lis", b"1 2\n1 99999999999\n", "d.lis:2: block count"),
        ] {
            let e = read(name, body, 4096).unwrap_err().to_string();
            assert!(e.contains(want), "{name}: {e}");
        }
        let mut og = Vec::new();
        write_oracle_general(&mut og, 1, 77, 4096, None).unwrap();
        og.truncate(30);
        og.extend([0u8; 10]);
        let e = read("t.oracleGeneral", &og[..30], 4096)
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated oracleGeneral record"), "{e}");
    }
}
