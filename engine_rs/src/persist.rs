//! A small binary codec for compiled grammars kept on disk (see `mask::disk`).
//!
//! Invariants: values are little-endian and sequences are length-prefixed; every read is
//! bounds-checked and a length is checked against the bytes that remain *before* anything is
//! allocated, so decoding any input — truncated, corrupt or hostile — returns an error or a value,
//! never panics and never allocates more than twice the input's stated size (two-byte integers
//! widen to four; a source shorter than its stated size is an error when the missing bytes are
//! read). Decoders of the types built on this (DFAs, LNF, compiled grammars) also check the
//! structural invariants their readers index by, so a decoded value is as safe to use as a
//! freshly compiled one.

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

/// Bytes a [`Reader`] pulls from its source at a time: small enough that a chunk is still in
/// the core's cache when it is checksummed and decoded, large enough that reads are few.
const CHUNK: usize = 256 * 1024;

/// Reads values back, in the order they were written, from a source of known length (a file or
/// a byte slice) pulled through a small chunk buffer: large arrays go from the chunk straight into
/// their final vectors (no copy of the whole input is ever held), and every byte pulled is added
/// to a running [`Checksum`] while it is in cache.
pub(crate) struct Reader<'a> {
    src: Box<dyn std::io::Read + 'a>,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// Input bytes not yet pulled from `src`.
    unread: u64,
    sum: Checksum,
}

impl<'a> Reader<'a> {
    /// A reader of all of `buf`.
    #[cfg(test)]
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader::stream(buf, buf.len() as u64)
    }

    /// A reader of the next `len` bytes of `src` (fewer there is an error when they are read).
    pub(crate) fn stream(src: impl std::io::Read + 'a, len: u64) -> Reader<'a> {
        let cap = usize::try_from(len).unwrap_or(CHUNK).clamp(256, CHUNK);
        Reader {
            src: Box::new(src),
            buf: vec![0; cap],
            pos: 0,
            end: 0,
            unread: len,
            sum: Checksum::default(),
        }
    }

    fn avail(&self) -> usize {
        self.end - self.pos
    }

    /// Bytes of the input not yet consumed.
    fn left(&self) -> u64 {
        self.avail() as u64 + self.unread
    }

    /// Makes at least `want` (at most 256, or the buffer's size) bytes available.
    fn fill(&mut self, want: usize) -> Result<(), DecodeError> {
        if self.avail() >= want {
            return Ok(());
        }
        ensure(want as u64 <= self.left(), "truncated")?;
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        while self.end < want {
            let room =
                (self.buf.len() - self.end).min(usize::try_from(self.unread).unwrap_or(usize::MAX));
            let n = match self.src.read(&mut self.buf[self.end..self.end + room]) {
                Ok(0) => return Err(DecodeError("truncated")),
                Ok(n) => n.min(room),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(DecodeError("a read error")),
            };
            self.sum.update(&self.buf[self.end..self.end + n]);
            self.end += n;
            self.unread -= n as u64;
        }
        Ok(())
    }

    /// The next `N` (at most 256) bytes.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        // The buffer holds at least min(len, 256) bytes (`stream`), so this fill fits.
        const { assert!(N <= 256) };
        self.fill(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&self.buf[self.pos..self.pos + N]);
        self.pos += N;
        Ok(a)
    }

    /// Passes the next `n` elements of `width` (1..=32) bytes to `f`, a whole number of
    /// elements per call, straight from the chunk buffer. `n` must come from [`Reader::len`].
    pub(crate) fn elements(
        &mut self,
        n: usize,
        width: usize,
        mut f: impl FnMut(&[u8]) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        let mut left = n * width;
        while left > 0 {
            self.fill(width)?;
            let k = self.avail().min(left) / width * width;
            f(&self.buf[self.pos..self.pos + k])?;
            self.pos += k;
            left -= k;
        }
        Ok(())
    }

    /// A length prefix for `width`-byte elements, checked against the remaining input.
    fn len(&mut self, width: usize) -> Result<usize, DecodeError> {
        let n = self.usize()?;
        ensure(
            n.checked_mul(width)
                .is_some_and(|b| b as u64 <= self.left()),
            "length beyond the end of the data",
        )?;
        Ok(n)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("a flag that is neither 0 nor 1")),
        }
    }
    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn usize(&mut self) -> Result<usize, DecodeError> {
        usize::try_from(self.u64()?).map_err(|_| DecodeError("a size beyond this platform's"))
    }
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.len(1)?;
        let mut v = Vec::with_capacity(n);
        self.elements(n, 1, |c| {
            v.extend_from_slice(c);
            Ok(())
        })?;
        Ok(v)
    }
    /// Whether the next byte string is `expected` (read in full only when the lengths agree).
    pub(crate) fn bytes_eq(&mut self, expected: &[u8]) -> Result<bool, DecodeError> {
        let n = self.len(1)?;
        if n != expected.len() {
            return Ok(false);
        }
        let mut at = 0;
        let mut same = true;
        self.elements(n, 1, |c| {
            same &= c == &expected[at..at + c.len()];
            at += c.len();
            Ok(())
        })?;
        Ok(same)
    }
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        String::from_utf8(self.bytes()?).map_err(|_| DecodeError("a name that is not UTF-8"))
    }
    pub(crate) fn bools(&mut self) -> Result<Vec<bool>, DecodeError> {
        let n = self.len(1)?;
        let mut v = Vec::with_capacity(n);
        self.elements(n, 1, |c| {
            // Every byte is 0 or 1 exactly when their union is.
            ensure(
                c.iter().fold(0, |a, &b| a | b) <= 1,
                "a flag that is neither 0 nor 1",
            )?;
            v.extend(c.iter().map(|&b| b != 0));
            Ok(())
        })?;
        Ok(v)
    }
    pub(crate) fn u32s(&mut self) -> Result<Vec<u32>, DecodeError> {
        self.u32s_below(1 << 32)
    }
    /// [`Reader::u32s`], refusing any value `>= bound`.
    fn u32s_below(&mut self, bound: u64) -> Result<Vec<u32>, DecodeError> {
        let n = self.len(4)?;
        let mut v = Vec::with_capacity(n);
        self.elements(n, 4, |c| {
            let from = v.len();
            v.extend(
                c.chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            let max = v[from..].iter().fold(0, |a, &b| a.max(b));
            ensure(u64::from(max) < bound, "a value out of range")
        })?;
        Ok(v)
    }
    /// What [`Writer::compact_u32s`] wrote.
    #[cfg(test)]
    pub(crate) fn compact_u32s(&mut self) -> Result<Vec<u32>, DecodeError> {
        self.compact_u32s_below(1 << 32)
    }
    /// [`Reader::compact_u32s`], refusing any value `>= bound`: the check runs on each chunk as
    /// it is widened, while it is in cache, instead of as a second pass over the table.
    pub(crate) fn compact_u32s_below(&mut self, bound: u64) -> Result<Vec<u32>, DecodeError> {
        match self.u8()? {
            2 => {
                let n = self.len(2)?;
                let mut v = Vec::with_capacity(n);
                self.elements(n, 2, |c| {
                    let max = c
                        .chunks_exact(2)
                        .map(|c| u16::from_le_bytes([c[0], c[1]]))
                        .fold(0, u16::max);
                    ensure(u64::from(max) < bound, "a value out of range")?;
                    v.extend(
                        c.chunks_exact(2)
                            .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]]))),
                    );
                    Ok(())
                })?;
                Ok(v)
            }
            4 => self.u32s_below(bound),
            _ => Err(DecodeError("an integer width that is neither 2 nor 4")),
        }
    }
    pub(crate) fn u64s(&mut self) -> Result<Vec<u64>, DecodeError> {
        let n = self.len(8)?;
        let mut v = Vec::with_capacity(n);
        self.elements(n, 8, |c| {
            v.extend(c.chunks_exact(8).map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_le_bytes(a)
            }));
            Ok(())
        })?;
        Ok(v)
    }
    /// A length prefix for a sequence of composite values (each at least `min_bytes` long).
    pub(crate) fn count(&mut self, min_bytes: usize) -> Result<usize, DecodeError> {
        self.len(min_bytes.max(1))
    }
    /// Succeeds only when every byte was read.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        ensure(self.left() == 0, "trailing bytes")
    }
    /// The [`Checksum`] of every byte read, once all were (see [`Reader::finish`]).
    pub(crate) fn checksum(&self) -> Result<u64, DecodeError> {
        self.finish()?;
        Ok(self.sum.finish())
    }
}

/// A checksum of a byte stream, fed in pieces of any size: eight independent [`StableHasher`]
/// lanes over interleaved words, folded into one with the length and the tail, so no lane waits
/// for another and a large input is checked at memory speed (eight lanes keep the multiplier
/// busy; four left it waiting on each lane's latency). Any changed word changes the result: a
/// hasher step is a bijection of its state for a fixed word and of the word for a fixed state,
/// and `finish` is a bijection. With a seed ([`Checksum::seeded`]) it is also a fast key hash.
#[derive(Clone)]
pub(crate) struct Checksum {
    seed: u64,
    lanes: [StableHasher; LANES],
    carry: [u8; BLOCK],
    carried: usize,
    len: u64,
}

const LANES: usize = 8;
const BLOCK: usize = 8 * LANES;

impl Default for Checksum {
    fn default() -> Self {
        Checksum::seeded(0x5EED)
    }
}

impl Checksum {
    /// A checksum whose lanes start from `seed` (different seeds: independent hashes).
    pub(crate) fn seeded(seed: u64) -> Checksum {
        Checksum {
            seed,
            lanes: std::array::from_fn(|i| StableHasher::new(seed.wrapping_add(1 + i as u64))),
            carry: [0; BLOCK],
            carried: 0,
            len: 0,
        }
    }

    /// The checksum of `data` in one piece.
    pub(crate) fn of(data: &[u8]) -> u64 {
        let mut c = Checksum::default();
        c.update(data);
        c.finish()
    }

    fn block(&mut self, block: &[u8]) {
        for (lane, word) in self.lanes.iter_mut().zip(block.chunks_exact(8)) {
            let mut a = [0u8; 8];
            a.copy_from_slice(word);
            lane.word(u64::from_le_bytes(a));
        }
    }

    pub(crate) fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if self.carried > 0 {
            let k = (BLOCK - self.carried).min(data.len());
            self.carry[self.carried..self.carried + k].copy_from_slice(&data[..k]);
            self.carried += k;
            data = &data[k..];
            if self.carried < BLOCK {
                return;
            }
            let carry = self.carry;
            self.block(&carry);
            self.carried = 0;
        }
        let mut blocks = data.chunks_exact(BLOCK);
        for b in &mut blocks {
            self.block(b);
        }
        let rest = blocks.remainder();
        self.carry[..rest.len()].copy_from_slice(rest);
        self.carried = rest.len();
    }

    pub(crate) fn finish(&self) -> u64 {
        let mut h = StableHasher::new(self.seed);
        h.word(self.len);
        h.bytes(&self.carry[..self.carried]);
        for lane in &self.lanes {
            h.word(lane.finish());
        }
        h.finish()
    }
}

/// A stable 64-bit hash (a fixed word-at-a-time multiply–rotate mix with a murmur3 finalizer):
/// the same value on every platform, run and toolchain, for cache keys and checksums. Not
/// cryptographic: keys are compared in full after a hash match.
#[derive(Clone)]
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

    /// A source that hands out at most `step` bytes per read.
    struct Trickle<'a>(&'a [u8], usize);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(out.len()).min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Values larger than the chunk buffer, read through sources that return any number of
    /// bytes per read, decode the same, and the running checksum is the one-piece checksum.
    #[test]
    fn streamed_values_cross_chunk_boundaries() {
        let big: Vec<u32> = (0..100_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) >> 16)
            .collect();
        let wide: Vec<u32> = (0..70_000u32).map(|i| i * 97).collect();
        let flags: Vec<bool> = (0..300_001).map(|i| i % 3 == 0).collect();
        let mut w = Writer::default();
        w.u8(1);
        w.compact_u32s(&big);
        w.u32s(&wide);
        w.bools(&flags);
        w.str("tail");
        w.u64(42);
        let bytes = w.into_bytes();
        for step in [1usize, 3, 31, 4096, 200_000, usize::MAX] {
            let mut r = Reader::stream(Trickle(&bytes, step), bytes.len() as u64);
            assert_eq!(r.u8(), Ok(1));
            assert_eq!(r.compact_u32s_below(65_536).as_ref(), Ok(&big));
            assert_eq!(r.u32s().as_ref(), Ok(&wide));
            assert_eq!(r.bools().as_ref(), Ok(&flags));
            assert_eq!(r.bytes_eq(b"tail"), Ok(true));
            assert_eq!(r.u64(), Ok(42));
            assert_eq!(r.checksum(), Ok(Checksum::of(&bytes)), "step {step}");
        }
        // The bound is enforced in every chunk, also on the last element.
        let mut r = Reader::new(&bytes);
        r.u8().unwrap();
        let max = *big.iter().max().unwrap();
        assert!(Reader::new(&bytes[1..])
            .compact_u32s_below(u64::from(max))
            .is_err());
        assert!(r.compact_u32s_below(u64::from(max) + 1).is_ok());
        let mut w = Writer::default();
        let mut v = vec![0u32; 200_000];
        *v.last_mut().unwrap() = 9;
        w.compact_u32s(&v);
        w.u32s(&v);
        let bytes = w.into_bytes();
        let mut r = Reader::stream(Trickle(&bytes, 1000), bytes.len() as u64);
        assert!(r.compact_u32s_below(9).is_err());
        let mut r = Reader::new(&bytes);
        assert!(r.compact_u32s_below(10).is_ok());
        assert!(r.u32s_below(9).is_err());
        // A source shorter than its stated length is truncated, not a hang or a panic.
        let mut r = Reader::stream(&bytes[..1000], bytes.len() as u64);
        assert!(r.compact_u32s().is_err());
    }

    #[test]
    fn the_checksum_does_not_depend_on_how_the_input_is_split() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let whole = Checksum::of(&data);
        for split in [1usize, 5, 31, 32, 33, 63, 64, 65, 1000] {
            let mut c = Checksum::default();
            for piece in data.chunks(split) {
                c.update(piece);
            }
            assert_eq!(c.finish(), whole, "pieces of {split}");
        }
        let mut other = data.clone();
        other[9_999] ^= 1;
        assert_ne!(Checksum::of(&other), whole);
        assert_ne!(Checksum::of(&data[..9_999]), whole);
        // Any single changed word, in any lane or in the tail, changes the checksum.
        for at in (0..data.len()).step_by(8).chain([9_992, 9_999]) {
            let mut other = data.clone();
            other[at] = other[at].wrapping_add(1);
            assert_ne!(Checksum::of(&other), whole, "a change at {at}");
        }
        let mut a = Checksum::seeded(1);
        let mut b = Checksum::seeded(2);
        a.update(&data);
        b.update(&data);
        assert_ne!(a.finish(), b.finish());
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
