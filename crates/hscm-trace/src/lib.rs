//! Memory traces: one stream of references, many file formats.
//!
//! Readers for valgrind lackey (`--trace-mem=yes`), Ramulator 2.0 load/store traces,
//! DRAMsim3, NVMain and DRAMSys traces and hscm's compact binary format, each plain or
//! zstd-compressed, with the format detected from the content when not given. A
//! malformed line is an error naming the file and line; nothing here panics on input.

mod anchor;
mod binary;
mod error;
mod requests;
mod synth;
mod text;
mod ycsb;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

pub use anchor::{AnchorPattern, AnchorSpec, AnchorTrace, PyRandom};
pub use binary::{TraceWriter, MAGIC};
pub use error::TraceError;
pub use requests::{detect_requests, write_oracle_general, Request, RequestFormat, RequestReader};
pub use synth::{RequestSynth, RequestSynthSpec, SynthKind, SynthSpec, Synthesizer};
pub use ycsb::{
    parse_op_trace, read_op_trace, ycsb_key, KvOp, YcsbGen, YcsbSpec, Zipfian, YCSB_WORKLOADS,
};

/// What a reference does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
    /// An instruction fetch (pre-cache traces only).
    Fetch,
}

/// One memory reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemRef {
    pub addr: u64,
    pub kind: Access,
    /// Bytes touched (lackey gives it; post-cache formats are one line: 64).
    pub size: u32,
    /// Distance from the previous reference in the trace's own unit (see [`Timing`]):
    /// instructions retired, or clock cycles; 0 when the trace has no timing.
    pub delta: u64,
}

/// The unit of [`MemRef::delta`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// No timing: references are issued as fast as the consumer allows.
    None,
    /// Instructions retired since the previous reference (lackey, hscm).
    Instructions,
    /// Memory-clock cycles since the previous reference (DRAMsim3, NVMain, DRAMSys).
    Cycles,
}

/// Trace file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Lackey,
    Ramulator,
    Dramsim3,
    Nvmain,
    Dramsys,
    Hscm,
}

impl Format {
    pub const NAMES: &'static [&'static str] = &[
        "lackey",
        "ramulator",
        "dramsim3",
        "nvmain",
        "dramsys",
        "hscm",
    ];

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "lackey" => Self::Lackey,
            "ramulator" => Self::Ramulator,
            "dramsim3" => Self::Dramsim3,
            "nvmain" => Self::Nvmain,
            "dramsys" => Self::Dramsys,
            "hscm" => Self::Hscm,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn timing(self) -> Timing {
        match self {
            Self::Lackey | Self::Hscm => Timing::Instructions,
            Self::Ramulator => Timing::None,
            Self::Dramsim3 | Self::Nvmain | Self::Dramsys => Timing::Cycles,
        }
    }
}

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// A stream of references from a file, in any supported format.
pub struct TraceReader {
    format: Format,
    timing: Timing,
    post_cache: bool,
    inner: Inner,
}

enum Inner {
    Text(text::TextReader<Box<dyn BufRead + Send>>),
    Binary(binary::BinaryReader<Box<dyn BufRead + Send>>),
}

impl TraceReader {
    /// Opens `path`; `format` None detects it from the content.
    pub fn open(path: &Path, format: Option<Format>) -> Result<Self, TraceError> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| TraceError::io(&name, e))?;
        Self::from_reader(Box::new(file), &name, format)
    }

    /// Reads from any byte stream (`name` is used in error messages).
    pub fn from_reader(
        input: Box<dyn Read + Send>,
        name: &str,
        format: Option<Format>,
    ) -> Result<Self, TraceError> {
        let (stream, head) = open_stream(input, name)?;
        let format = match format {
            Some(f) => f,
            None => detect(&head).ok_or_else(|| unknown_format(name, &head, MEMORY_FORMATS))?,
        };
        let (inner, timing, post_cache) = if format == Format::Hscm {
            let r = binary::BinaryReader::new(stream, name)?;
            let (t, p) = (r.timing(), r.post_cache());
            (Inner::Binary(r), t, p)
        } else {
            (
                Inner::Text(text::TextReader::new(stream, name, format)),
                format.timing(),
                format != Format::Lackey,
            )
        };
        Ok(Self {
            format,
            timing,
            post_cache,
            inner,
        })
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// True when references already went through caches (memory requests): every
    /// format but lackey, and hscm traces written with the flag.
    pub fn post_cache(&self) -> bool {
        self.post_cache
    }
}

impl Iterator for TraceReader {
    type Item = Result<MemRef, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.inner {
            Inner::Text(t) => t.next(),
            Inner::Binary(b) => b.next(),
        }
    }
}

/// A buffered stream over `input`, decompressed when it starts with zstd's magic, and
/// its first bytes (for format detection).
pub(crate) fn open_stream(
    input: Box<dyn Read + Send>,
    name: &str,
) -> Result<(Box<dyn BufRead + Send>, Vec<u8>), TraceError> {
    let mut buffered = BufReader::with_capacity(1 << 16, input);
    let head = buffered.fill_buf().map_err(|e| TraceError::io(name, e))?;
    let mut stream: Box<dyn BufRead + Send> = if head.starts_with(&ZSTD_MAGIC) {
        let decoder = zstd::Decoder::with_buffer(buffered).map_err(|e| TraceError::io(name, e))?;
        Box::new(BufReader::with_capacity(1 << 16, decoder))
    } else {
        Box::new(buffered)
    };
    let head = stream
        .fill_buf()
        .map_err(|e| TraceError::io(name, e))?
        .to_vec();
    Ok((stream, head))
}

/// The memory-trace formats, as `--format` spells them.
pub const MEMORY_FORMATS: &str = "lackey, ramulator, dramsim3, nvmain, dramsys, hscm";

/// `known` lists the formats the caller reads, as its `--format` spells them.
pub(crate) fn unknown_format(name: &str, head: &[u8], known: &'static str) -> TraceError {
    TraceError::UnknownFormat {
        known,
        name: name.to_string(),
        sample: String::from_utf8_lossy(&head[..head.len().min(80)])
            .lines()
            .next()
            .unwrap_or("")
            .to_string(),
    }
}

/// Guesses the format from the first bytes of a (decompressed) trace.
pub fn detect(head: &[u8]) -> Option<Format> {
    if head.starts_with(MAGIC) {
        return Some(Format::Hscm);
    }
    let text = std::str::from_utf8(&head[..head.len().min(4096)])
        .unwrap_or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""));
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("==") || t.starts_with("--") {
            continue;
        }
        if t.starts_with("NVMV") {
            return Some(Format::Nvmain);
        }
        let tokens: Vec<&str> = t.split_whitespace().collect();
        let first = tokens[0];
        if matches!(first, "LD" | "ST") {
            return Some(Format::Ramulator);
        }
        if (first == "I" || ((first == "L" || first == "S" || first == "M") && tokens.len() == 2))
            && t.contains(',')
        {
            return Some(Format::Lackey);
        }
        if first.ends_with(':') {
            return Some(Format::Dramsys);
        }
        if tokens.len() >= 3 {
            if matches!(tokens[1], "READ" | "WRITE" | "read" | "write") {
                return Some(Format::Dramsim3);
            }
            if matches!(tokens[1], "R" | "W") {
                return Some(Format::Nvmain);
            }
        }
        return None;
    }
    None
}

/// Why a line of a text trace could not be read: bytes that are not text (a binary
/// trace read as a text format) are named as such, with the format that expected
/// text.
pub(crate) fn read_failure(e: &std::io::Error, format: &str) -> String {
    if e.kind() == std::io::ErrorKind::InvalidData {
        format!(
            "not text (invalid UTF-8), but the {format} format is text, one record per line: is this a binary trace? Read it with its binary format"
        )
    } else {
        format!("read failed: {e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_every_format_from_a_sample() {
        let cases: &[(&str, Format)] = &[
            (
                "==12== Lackey\nI  0040116e,3\n S 1ffefffe58,8\n",
                Format::Lackey,
            ),
            ("LD 0x1000\nST 0x2040\n", Format::Ramulator),
            ("0x1000 READ 10\n", Format::Dramsim3),
            ("NVMV1\n5 R 0x1000 00 0 0\n", Format::Nvmain),
            ("5 W 0x1000 00 0\n", Format::Nvmain),
            ("# comment\n31:\tread\t0x400140\n", Format::Dramsys),
        ];
        for (text, want) in cases {
            assert_eq!(detect(text.as_bytes()), Some(*want), "{text:?}");
        }
        assert_eq!(detect(b"hello world\n"), None);
        assert_eq!(detect(b""), None);
    }
}
