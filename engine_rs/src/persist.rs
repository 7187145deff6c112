//! A small binary codec for compiled grammars kept on disk (see `mask::disk`).
//!
//! Invariants: values are little-endian and sequences are length-prefixed; every read is
//! bounds-checked and a length is checked against the bytes that remain *before* anything is
//! allocated, so decoding any input — truncated, corrupt or hostile — returns an error or a value,
//! never panics and never allocates more than twice the input's size (two-byte integers widen
//! to four). Decoders of the types built on
//! this (DFAs, LNF, compiled grammars) also check the structural invariants their readers index
//! by, so a decoded value is as safe to use as a freshly compiled one.

/// Why bytes could not be decoded: what was being read or which invariant failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed compiled grammar: {}", self.0)
    }
}

/// `Ok(())` when `cond` holds, else the error naming the broken invariant.
#[inline]
pub(crate) fn ensure(cond: bool, what: &'static str) -> Result<(), DecodeError> {
    if cond {
        Ok(())
    } else {
        Err(DecodeError(what))
    }
}

/// Appends encoded values to a byte buffer.
#[derive(Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn usize(&mut self, v: usize) {
        self.u64(v as u64);
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.usize(v.len());
        self.buf.extend_from_slice(v);
    }
    pub(crate) fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }
    pub(crate) fn bools(&mut self, v: &[bool]) {
        self.usize(v.len());
        self.buf.extend(v.iter().map(|&b| u8::from(b)));
    }
    pub(crate) fn u32s(&mut self, v: &[u32]) {
        self.usize(v.len());
        self.buf.reserve(v.len() * 4);
        for x in v {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }
    /// `v` in two bytes per value when every value fits (the state ids of almost every
    /// automaton), else four: transition tables are most of a compiled grammar on disk.
    pub(crate) fn compact_u32s(&mut self, v: &[u32]) {
        if v.iter().all(|&x| x <= u32::from(u16::MAX)) {
            self.u8(2);
            self.usize(v.len());
            self.buf.reserve(v.len() * 2);
            for &x in v {
                self.buf.extend_from_slice(&(x as u16).to_le_bytes());
            }
        } else {
            self.u8(4);
            self.u32s(v);
        }
    }
    pub(crate) fn u64s(&mut self, v: &[u64]) {
        self.usize(v.len());
        self.buf.reserve(v.len() * 8);
        for x in v {
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
    }
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads values back from a byte slice, in the order they were written.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        ensure(n <= self.buf.len(), "truncated")?;
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// A length prefix for `width`-byte elements, checked against the remaining input.
    fn len(&mut self, width: usize) -> Result<usize, DecodeError> {
        let n = self.usize()?;
        ensure(
            n.checked_mul(width).is_some_and(|b| b <= self.buf.len()),
            "length beyond the end of the data",
        )?;
        Ok(n)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("a flag that is neither 0 nor 1")),
        }
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    pub(crate) fn usize(&mut self) -> Result<usize, DecodeError> {
        usize::try_from(self.u64()?).map_err(|_| DecodeError("a size beyond this platform's"))
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.len(1)?;
        self.take(n)
    }
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError("a name that is not UTF-8"))
    }
    pub(crate) fn bools(&mut self) -> Result<Vec<bool>, DecodeError> {
        let n = self.len(1)?;
        self.take(n)?
            .iter()
            .map(|&b| match b {
                0 => Ok(false),
                1 => Ok(true),
                _ => Err(DecodeError("a flag that is neither 0 nor 1")),
            })
            .collect()
    }
    pub(crate) fn u32s(&mut self) -> Result<Vec<u32>, DecodeError> {
        let n = self.len(4)?;
        Ok(self
            .take(n * 4)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
    /// What [`Writer::compact_u32s`] wrote.
    pub(crate) fn compact_u32s(&mut self) -> Result<Vec<u32>, DecodeError> {
        match self.u8()? {
            2 => {
                let n = self.len(2)?;
                let bytes = self.take(n * 2)?;
                let mut out = vec![0u32; n];
                for (x, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *x = u32::from(u16::from_le_bytes([c[0], c[1]]));
                }
                Ok(out)
            }
            4 => self.u32s(),
            _ => Err(DecodeError("an integer width that is neither 2 nor 4")),
        }
    }
    pub(crate) fn u64s(&mut self) -> Result<Vec<u64>, DecodeError> {
        let n = self.len(8)?;
        Ok(self
            .take(n * 8)?
            .chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_le_bytes(a)
            })
            .collect())
    }
    /// A length prefix for a sequence of composite values (each at least `min_bytes` long).
    pub(crate) fn count(&mut self, min_bytes: usize) -> Result<usize, DecodeError> {
        self.len(min_bytes.max(1))
    }
    /// Succeeds only when every byte was read.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        ensure(self.buf.is_empty(), "trailing bytes")
    }
}

/// A stable 64-bit hash (a fixed word-at-a-time multiply–rotate mix with a murmur3 finalizer):
/// the same value on every platform, run and toolchain, for cache keys and checksums. Not
/// cryptographic: keys are compared in full after a hash match.
pub(crate) struct StableHasher {
    h: u64,
}

impl StableHasher {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;

    pub(crate) fn new(seed: u64) -> Self {
        StableHasher {
            h: seed ^ 0x243F_6A88_85A3_08D3,
        }
    }

    #[inline]
    pub(crate) fn word(&mut self, w: u64) {
        self.h = (self.h ^ w).wrapping_mul(Self::K).rotate_left(29);
    }

    pub(crate) fn bytes(&mut self, data: &[u8]) {
        self.word(data.len() as u64);
        let mut chunks = data.chunks_exact(8);
        for c in &mut chunks {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            self.word(u64::from_le_bytes(a));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(buf));
        }
    }

    pub(crate) fn finish(&self) -> u64 {
        let mut h = self.h;
        h ^= h >> 33;
        h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^= h >> 33;
        h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        let mut w = Writer::default();
        w.u8(7);
        w.bool(true);
        w.u32(0xDEAD_BEEF);
        w.u64(u64::MAX);
        w.str("héllo");
        w.bools(&[true, false]);
        w.u32s(&[1, 2, 3]);
        w.u64s(&[u64::MAX, 0]);
        w.compact_u32s(&[0, 7, 65_535]);
        w.compact_u32s(&[1, 65_536]);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.bool(), Ok(true));
        assert_eq!(r.u32(), Ok(0xDEAD_BEEF));
        assert_eq!(r.u64(), Ok(u64::MAX));
        assert_eq!(r.string().as_deref(), Ok("héllo"));
        assert_eq!(r.bools(), Ok(vec![true, false]));
        assert_eq!(r.u32s(), Ok(vec![1, 2, 3]));
        assert_eq!(r.u64s(), Ok(vec![u64::MAX, 0]));
        assert_eq!(r.compact_u32s(), Ok(vec![0, 7, 65_535]));
        assert_eq!(r.compact_u32s(), Ok(vec![1, 65_536]));
        assert_eq!(r.finish(), Ok(()));
        // Two bytes per value when all fit, four otherwise; any other width tag is refused.
        let (mut narrow, mut wide) = (Writer::default(), Writer::default());
        narrow.compact_u32s(&[65_535; 4]);
        wide.compact_u32s(&[65_536; 4]);
        assert_eq!(narrow.into_bytes().len(), 1 + 8 + 2 * 4);
        assert_eq!(wide.into_bytes().len(), 1 + 8 + 4 * 4);
        let mut w = Writer::default();
        w.u8(3);
        w.u32s(&[1]);
        let bytes = w.into_bytes();
        assert!(Reader::new(&bytes).compact_u32s().is_err());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let mut w = Writer::default();
        w.str("abc");
        w.u32s(&[1, 2, 3]);
        let bytes = w.into_bytes();
        for cut in 0..bytes.len() {
            let mut r = Reader::new(&bytes[..cut]);
            let ok = r.string().is_ok() && r.u32s().is_ok();
            assert!(!ok, "a prefix of {cut} bytes decoded");
        }
    }

    #[test]
    fn a_huge_length_is_refused_before_allocating() {
        let mut w = Writer::default();
        w.u64(u64::MAX / 2);
        let bytes = w.into_bytes();
        assert!(Reader::new(&bytes).u32s().is_err());
        assert!(Reader::new(&bytes).bools().is_err());
        assert!(Reader::new(&bytes).count(16).is_err());
    }

    #[test]
    fn flags_other_than_0_and_1_are_refused() {
        assert!(Reader::new(&[2]).bool().is_err());
        let mut w = Writer::default();
        w.usize(1);
        w.u8(9);
        assert!(Reader::new(&w.into_bytes()).bools().is_err());
    }
}
