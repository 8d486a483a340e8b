//! Line-oriented trace formats.

use std::io::BufRead;

use crate::{Access, Format, MemRef, TraceError};

pub(crate) struct TextReader<R> {
    input: R,
    name: String,
    format: Format,
    line_no: u64,
    line: String,
    last_cycle: Option<u64>,
}

impl<R: BufRead> TextReader<R> {
    pub(crate) fn new(input: R, name: &str, format: Format) -> Self {
        Self {
            input,
            name: name.to_string(),
            format,
            line_no: 0,
            line: String::with_capacity(256),
            last_cycle: None,
        }
    }

    fn error(&self, message: impl Into<String>) -> TraceError {
        TraceError::Parse {
            name: self.name.clone(),
            line: self.line_no,
            message: message.into(),
        }
    }

    fn parse_line(&mut self) -> Result<Option<MemRef>, TraceError> {
        let t = self.line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(None);
        }
        match self.format {
            Format::Lackey => self.parse_lackey(),
            Format::Ramulator => self.parse_ramulator().map(Some),
            Format::Dramsim3 => self.parse_dramsim3().map(Some),
            Format::Nvmain => self.parse_nvmain(),
            Format::Dramsys => self.parse_dramsys().map(Some),
            Format::Hscm => unreachable!("binary traces have their own reader"),
        }
    }

    fn parse_lackey(&self) -> Result<Option<MemRef>, TraceError> {
        let t = self.line.trim_end();
        if t.starts_with("==") || t.starts_with("--") {
            return Ok(None);
        }
        let body = t.trim_start();
        let (op, rest) = body
            .split_once(char::is_whitespace)
            .ok_or_else(|| self.error(format!("expected `I|L|S|M addr,size`, found {t:?}")))?;
        let (kind, delta) = match op {
            "I" => (Access::Fetch, 1),
            "L" => (Access::Read, 0),
            // A modify is a load and a store to the same bytes; for a cache model the
            // store decides everything (the load always hits the line it allocates).
            "S" | "M" => (Access::Write, 0),
            _ => return Err(self.error(format!("unknown lackey operation {op:?}"))),
        };
        let (addr, size) = rest
            .trim()
            .split_once(',')
            .ok_or_else(|| self.error(format!("expected `addr,size`, found {rest:?}")))?;
        Ok(Some(MemRef {
            addr: self.hex(addr)?,
            kind,
            size: size
                .trim()
                .parse()
                .map_err(|_| self.error(format!("bad size {size:?}")))?,
            delta,
        }))
    }

    fn parse_ramulator(&self) -> Result<MemRef, TraceError> {
        let mut it = self.line.split_whitespace();
        let kind = match it.next() {
            Some("LD") => Access::Read,
            Some("ST") => Access::Write,
            other => return Err(self.error(format!("expected LD or ST, found {other:?}"))),
        };
        let addr = it.next().ok_or_else(|| self.error("missing address"))?;
        Ok(MemRef {
            addr: self.hex(addr)?,
            kind,
            size: 64,
            delta: 0,
        })
    }

    fn parse_dramsim3(&mut self) -> Result<MemRef, TraceError> {
        let mut it = self.line.split_whitespace();
        let addr = it.next().ok_or_else(|| self.error("missing address"))?;
        let addr = self.hex(addr)?;
        let kind = match it.next() {
            Some("READ" | "read") => Access::Read,
            Some("WRITE" | "write") => Access::Write,
            other => return Err(self.error(format!("expected READ or WRITE, found {other:?}"))),
        };
        let cycle = it.next().ok_or_else(|| self.error("missing cycle"))?;
        let cycle = self.dec(cycle)?;
        Ok(MemRef {
            addr,
            kind,
            size: 64,
            delta: self.advance(cycle),
        })
    }

    fn parse_nvmain(&mut self) -> Result<Option<MemRef>, TraceError> {
        if self.line.trim_start().starts_with("NVMV") {
            return Ok(None);
        }
        let mut it = self.line.split_whitespace();
        let cycle = it.next().ok_or_else(|| self.error("missing cycle"))?;
        let cycle = self.dec(cycle)?;
        let kind = match it.next() {
            Some("R") => Access::Read,
            Some("W") => Access::Write,
            other => return Err(self.error(format!("expected R or W, found {other:?}"))),
        };
        let addr = it.next().ok_or_else(|| self.error("missing address"))?;
        Ok(Some(MemRef {
            addr: self.hex(addr)?,
            kind,
            size: 64,
            delta: self.advance(cycle),
        }))
    }

    fn parse_dramsys(&mut self) -> Result<MemRef, TraceError> {
        let mut it = self.line.split_whitespace();
        let stamp = it.next().ok_or_else(|| self.error("missing time stamp"))?;
        let stamp = stamp
            .strip_suffix(':')
            .ok_or_else(|| self.error(format!("expected `cycle:`, found {stamp:?}")))?;
        // `(+N)` stamps are relative to the previous request.
        let cycle = match stamp.strip_prefix("(+").and_then(|s| s.strip_suffix(')')) {
            Some(rel) => self.last_cycle.unwrap_or(0) + self.dec(rel)?,
            None => self.dec(stamp)?,
        };
        let kind = match it.next() {
            Some("read" | "READ") => Access::Read,
            Some("write" | "WRITE") => Access::Write,
            other => return Err(self.error(format!("expected read or write, found {other:?}"))),
        };
        let mut field = it.next().ok_or_else(|| self.error("missing address"))?;
        let mut size = 64;
        // DRAMSys 5 may put a data length before the address.
        if !field.starts_with("0x") {
            if let Some(next) = it.next() {
                size = self.dec(field)? as u32;
                field = next;
            }
        }
        Ok(MemRef {
            addr: self.hex(field)?,
            kind,
            size,
            delta: self.advance(cycle),
        })
    }

    fn advance(&mut self, cycle: u64) -> u64 {
        let delta = cycle.saturating_sub(self.last_cycle.unwrap_or(cycle));
        self.last_cycle = Some(cycle.max(self.last_cycle.unwrap_or(0)));
        delta
    }

    fn hex(&self, s: &str) -> Result<u64, TraceError> {
        let digits = s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .unwrap_or(s);
        u64::from_str_radix(digits, 16).map_err(|_| self.error(format!("bad hex address {s:?}")))
    }

    fn dec(&self, s: &str) -> Result<u64, TraceError> {
        s.parse()
            .map_err(|_| self.error(format!("bad number {s:?}")))
    }

    pub(crate) fn next(&mut self) -> Option<Result<MemRef, TraceError>> {
        loop {
            self.line.clear();
            match self.input.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    return Some(Err(TraceError::Parse {
                        name: self.name.clone(),
                        line: self.line_no + 1,
                        message: crate::read_failure(&e, self.format.name()),
                    }))
                }
            }
            self.line_no += 1;
            match self.parse_line() {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Access, Format, MemRef, TraceError, TraceReader};

    fn read(text: &str, format: Option<Format>) -> Result<Vec<MemRef>, TraceError> {
        TraceReader::from_reader(
            Box::new(std::io::Cursor::new(text.to_string())),
            "t",
            format,
        )?
        .collect()
    }

    #[test]
    fn lackey_counts_instructions_and_maps_modify_to_a_store() {
        let refs = read(
            "==1== Lackey\nI  0040116e,3\n L 1ffefffe58,8\nI  00401171,4\n M 0060,4\n S 70,2\n",
            None,
        )
        .unwrap();
        let kinds: Vec<_> = refs.iter().map(|r| (r.kind, r.delta, r.addr)).collect();
        assert_eq!(
            kinds,
            vec![
                (Access::Fetch, 1, 0x40116e),
                (Access::Read, 0, 0x1ffefffe58),
                (Access::Fetch, 1, 0x401171),
                (Access::Write, 0, 0x60),
                (Access::Write, 0, 0x70),
            ]
        );
        assert_eq!(refs[1].size, 8);
    }

    #[test]
    fn timed_formats_turn_stamps_into_deltas() {
        let d = read("0x40 READ 10\n0x80 WRITE 25\n", None).unwrap();
        assert_eq!((d[0].delta, d[1].delta, d[1].kind), (0, 15, Access::Write));
        let n = read("NVMV1\n5 R 0x40 00 0\n9 W 0x80 00 00 0\n", None).unwrap();
        assert_eq!((n[1].delta, n[1].addr), (4, 0x80));
        let s = read("10:\tread\t0x40\n(+6):\twrite\t64\t0x80\t0xff\n", None).unwrap();
        assert_eq!((s[1].delta, s[1].addr, s[1].kind), (6, 0x80, Access::Write));
        let r = read("LD 0x40\nST 80\n", None).unwrap();
        assert_eq!((r[1].addr, r[1].kind), (0x80, Access::Write));
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let cases = [
            ("I  0040116e,3\n X 12,4\n", "2: unknown lackey operation"),
            ("I  zz,3\n", "1: bad hex address"),
            ("I  0040116e,3\nI  0040116e\n", "2: expected `addr,size`"),
            ("LD 0x40\nPF 0x80\n", "2: expected LD or ST"),
            ("0x40 READ 10\n0x80 WRITE\n", "2: missing cycle"),
            ("0x40 READ ten\n", "1: bad number"),
            ("10: read 0x40\n12 write 0x80\n", "2: expected `cycle:`"),
        ];
        for (text, want) in cases {
            let err = read(text, None).unwrap_err().to_string();
            assert!(
                err.starts_with("t:") && err.contains(want),
                "{text:?}: {err}"
            );
        }
        let err = read("hello\n", None).err().unwrap().to_string();
        assert!(err.contains("cannot tell the trace format"), "{err}");
    }
}

#[cfg(test)]
mod garbage {
    use crate::{Format, TraceReader};
    use proptest::prelude::*;

    proptest! {
        /// Arbitrary lines in every text format: records or an error, never a panic.
        #[test]
        fn arbitrary_text_never_panics(lines in proptest::collection::vec("[ -~\t]{0,40}", 0..40), f in 0usize..5) {
            let format = [Format::Lackey, Format::Ramulator, Format::Dramsim3, Format::Nvmain, Format::Dramsys][f];
            let text = lines.join("\n");
            let r = TraceReader::from_reader(Box::new(std::io::Cursor::new(text.into_bytes())), "g", Some(format)).unwrap();
            for item in r {
                if item.is_err() {
                    break;
                }
            }
        }
    }
}
