//! Little-endian encoding of what the engines keep on their media (headers, checkpoint
//! records, superblocks, log records): a writer that appends, a reader that fails,
//! naming what it was reading, rather than panic on short input, and the one
//! double-slot rule (a record sealed with a CRC-32C, two slots, the newest valid
//! generation wins) the journal, the file system's superblocks and both tier headers
//! follow.

/// Decoding ran past the end of the input, or found what cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CodecError(pub String);

/// Appends little-endian fields to a byte vector.
#[derive(Debug, Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Bytes as they are (a magic, a UUID): the reader knows their length.
    pub fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }
    /// Bytes with a 32-bit length in front.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
        self
    }
    /// Writes `v` over the four bytes at `at`, already written: a field such as a
    /// checksum that can only be known once what follows it is there.
    ///
    /// Panics if those bytes were not written yet: a layout bug, never input.
    pub fn put_u32_at(&mut self, at: usize, v: u32) -> &mut Self {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends the CRC-32C of everything written so far (see [`sealed`]).
    pub fn seal(&mut self) -> &mut Self {
        let crc = crc32c::crc32c(&self.0);
        self.u32(crc)
    }
}

/// Reads little-endian fields in order, bounds-checked.
#[derive(Debug)]
pub struct Dec<'a> {
    bytes: &'a [u8],
    at: usize,
    /// What is being decoded, for errors.
    what: &'static str,
}

impl<'a> Dec<'a> {
    pub fn new(bytes: &'a [u8], what: &'static str) -> Dec<'a> {
        Dec { bytes, at: 0, what }
    }

    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// The next `n` bytes as they are.
    pub fn raw(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(CodecError(format!(
                "{} ends early: {} bytes wanted at byte {} of {}",
                self.what,
                n,
                self.at,
                self.bytes.len()
            )));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.raw(N)?);
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.raw(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64, CodecError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
    pub fn bytes(&mut self) -> Result<Vec<u8>, CodecError> {
        let n = self.u32()? as usize;
        Ok(self.raw(n)?.to_vec())
    }

    /// A corrupt-input error at the current position.
    pub fn bad(&self, why: impl std::fmt::Display) -> CodecError {
        CodecError(format!("{} at byte {}: {why}", self.what, self.at))
    }
}

/// Whether `record` holds a body of `body_len` bytes followed by its CRC-32C (as
/// [`Enc::seal`] writes it): a torn or damaged slot fails this.
pub fn sealed(record: &[u8], body_len: usize) -> bool {
    match record.get(body_len..body_len + 4) {
        Some(crc) => crc32c::crc32c(&record[..body_len]).to_le_bytes() == crc,
        None => false,
    }
}

/// Writes the CRC-32C of `record[..body_len]` just after it (a fixed-size record whose
/// fields sit at fixed places, such as a header page): what [`sealed`] checks.
///
/// Panics if `record` has no room for the seal after `body_len` bytes: a layout bug,
/// never input.
pub fn seal_at(record: &mut [u8], body_len: usize) {
    let crc = crc32c::crc32c(&record[..body_len]);
    record[body_len..body_len + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Of the valid records read from the two slots, the one with the highest
/// generation: the slot written last that survived (the other holds the one before,
/// which a write torn by a power cut leaves intact).
pub fn newest<T>(slots: [Option<T>; 2], generation: impl Fn(&T) -> u64) -> Option<T> {
    let [a, b] = slots;
    match (a, b) {
        (Some(a), Some(b)) => Some(if generation(&b) > generation(&a) {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_short_input_is_an_error_naming_what() {
        let mut e = Enc::default();
        e.raw(b"MAGIC")
            .u8(1)
            .u16(2)
            .u32(3)
            .u64(4)
            .i64(-5)
            .bytes(b"xyz")
            .seal();
        let mut d = Dec::new(&e.0, "the test record");
        assert_eq!(d.raw(5).unwrap(), b"MAGIC");
        assert_eq!(
            (d.u8().unwrap(), d.u16().unwrap(), d.u32().unwrap()),
            (1, 2, 3)
        );
        assert_eq!((d.u64().unwrap(), d.i64().unwrap()), (4, -5));
        assert_eq!(d.bytes().unwrap(), b"xyz");
        assert!(sealed(&e.0, e.0.len() - 4));
        d.u32().unwrap();
        assert!(d.is_empty());
        let err = d.u64().unwrap_err();
        assert!(
            err.to_string().contains("the test record ends early"),
            "{err}"
        );
        // A length that runs past the end is refused, not allocated.
        let mut huge = Enc::default();
        huge.u32(u32::MAX);
        assert!(Dec::new(&huge.0, "x").bytes().is_err());
    }

    #[test]
    fn a_seal_catches_any_flipped_bit_and_a_short_record() {
        let mut e = Enc::default();
        e.u64(7).u64(9).seal();
        for bit in 0..e.0.len() * 8 {
            let mut torn = e.0.clone();
            torn[bit / 8] ^= 1 << (bit % 8);
            assert!(!sealed(&torn, 16), "bit {bit}");
        }
        assert!(!sealed(&e.0[..18], 16));
        let mut page = vec![7u8; 64];
        seal_at(&mut page, 60);
        assert!(sealed(&page, 60));
        page[3] ^= 1;
        assert!(!sealed(&page, 60));
    }

    #[test]
    fn the_newest_valid_slot_wins() {
        let g = |x: &(u64, char)| x.0;
        assert_eq!(newest([Some((3, 'a')), Some((4, 'b'))], g), Some((4, 'b')));
        assert_eq!(newest([Some((5, 'a')), Some((4, 'b'))], g), Some((5, 'a')));
        assert_eq!(newest([None, Some((4, 'b'))], g), Some((4, 'b')));
        assert_eq!(newest([Some((1, 'a')), None], g), Some((1, 'a')));
        assert_eq!(newest::<(u64, char)>([None, None], g), None);
    }
}
