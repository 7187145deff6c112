//! Encoding a [`Dfa`] for the disk cache, and decoding it with every table invariant checked:
//! `stride >= 1`, every class below `stride`, `trans` a full `states × stride` table whose entries
//! are states, per-state vectors of the right length, the start a state id. A decoded automaton
//! therefore never indexes out of bounds, exactly like a constructed one.

use super::length_counter::Counter;
use super::{ByteSet, Dfa};
use crate::persist::{ensure, DecodeError, Reader, Writer};

impl Dfa {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.bytes(&self.classes);
        w.u32(self.stride);
        // The state count (`accept`) first: the transitions are checked against it as they load.
        w.bools(&self.accept);
        w.compact_u32s(&self.trans);
        encode_byte_sets(w, &self.live_bytes);
        w.u32s(&self.min_to_accept);
        w.u32(self.start);
        match &self.counter {
            None => w.bool(false),
            Some(c) => {
                w.bool(true);
                c.encode(w);
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Dfa, DecodeError> {
        ensure(
            r.usize()? == 256,
            "a byte-class table that is not 256 bytes",
        )?;
        let classes: [u8; 256] = r.array()?;
        let stride = r.u32()?;
        ensure((1..=256).contains(&stride), "a DFA stride outside 1..=256")?;
        ensure(
            classes.iter().all(|&c| u32::from(c) < stride),
            "a byte class beyond the stride",
        )?;
        let accept = r.bools()?;
        let states = accept.len();
        ensure(states >= 1, "a DFA without states")?;
        // Every entry a state: checked while each chunk is widened.
        let trans = r.compact_u32s_below(states as u64)?;
        ensure(
            trans.len() == states * stride as usize,
            "a transition table of the wrong size",
        )?;
        let live_bytes = decode_byte_sets(r)?;
        let min_to_accept = r.u32s()?;
        let start = r.u32()?;
        let counter = if r.bool()? {
            Some(Box::new(Counter::decode(r, states, stride as usize)?))
        } else {
            None
        };
        let mut dfa = Dfa {
            classes,
            stride,
            trans,
            accept,
            live_bytes,
            min_to_accept,
            start,
            counter: None,
        };
        match counter {
            None => {
                ensure(
                    dfa.live_bytes.len() == states && dfa.min_to_accept.len() == states,
                    "per-state tables of the wrong length",
                )?;
            }
            Some(c) => {
                // Answered by the counter (see `Dfa::counter`).
                ensure(
                    dfa.live_bytes.is_empty() && dfa.min_to_accept.is_empty(),
                    "per-state tables on a counted automaton",
                )?;
                dfa.counter = Some(c);
            }
        }
        ensure(
            (dfa.start as usize) < dfa.state_count(),
            "a start state that does not exist",
        )?;
        Ok(dfa)
    }
}

pub(super) fn encode_byte_sets(w: &mut Writer, sets: &[ByteSet]) {
    w.usize(sets.len());
    for set in sets {
        for &word in &set.0 {
            w.u64(word);
        }
    }
}

pub(super) fn decode_byte_sets(r: &mut Reader<'_>) -> Result<Vec<ByteSet>, DecodeError> {
    let n = r.count(32)?;
    let mut sets = Vec::with_capacity(n);
    r.elements(n, 32, |c| {
        sets.extend(c.chunks_exact(32).map(|set| {
            ByteSet(std::array::from_fn(|i| {
                let mut a = [0u8; 8];
                a.copy_from_slice(&set[8 * i..8 * i + 8]);
                u64::from_le_bytes(a)
            }))
        }));
        Ok(())
    })?;
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(d: &Dfa) -> Vec<u8> {
        let mut w = Writer::default();
        d.encode(&mut w);
        w.into_bytes()
    }

    #[test]
    fn an_automaton_round_trips() {
        let d = Dfa::from_regex(r#""(?:[^"\\]|\\.){0,40}"|[0-9]+"#, 1 << 22).unwrap();
        let bytes = encoded(&d);
        let back = Dfa::decode(&mut Reader::new(&bytes)).expect("decodes");
        assert_eq!(back.state_count(), d.state_count());
        for s in 0..d.state_count() as u32 {
            assert_eq!(back.live_bytes(s), d.live_bytes(s));
            assert_eq!(back.is_accept(s), d.is_accept(s));
            assert_eq!(back.min_to_accept(s), d.min_to_accept(s));
            for b in 0..=255u8 {
                assert_eq!(back.next(s, b), d.next(s, b));
            }
        }
        assert_eq!(encoded(&back), bytes);
    }

    /// A transition to a state past the last, anywhere in the table, is refused on load: the
    /// bound is checked as the table is widened, not trusted to the checksum.
    #[test]
    fn a_transition_past_the_last_state_is_refused() {
        let d = Dfa::from_regex("[a-z]{2,9}@[a-z]{1,5}", 1 << 22).unwrap();
        let states = d.state_count();
        assert!(states < 1 << 16);
        let bytes = encoded(&d);
        // classes, stride, accept flags, width tag, length: then the two-byte transitions.
        let at = (8 + 256) + 4 + (8 + states) + 1 + 8;
        assert_eq!(bytes[at - 9], 2, "two-byte transitions");
        let entries = d.trans.len();
        assert!(bytes.len() >= at + 2 * entries);
        for k in [0, entries / 2, entries - 1] {
            for bad in [states as u16, u16::MAX] {
                let mut b = bytes.clone();
                b[at + 2 * k..at + 2 * k + 2].copy_from_slice(&bad.to_le_bytes());
                assert!(
                    Dfa::decode(&mut Reader::new(&b)).is_err(),
                    "entry {k} = {bad} accepted"
                );
            }
            let mut b = bytes.clone();
            let last = (states - 1) as u16;
            b[at + 2 * k..at + 2 * k + 2].copy_from_slice(&last.to_le_bytes());
            assert!(Dfa::decode(&mut Reader::new(&b)).is_ok());
        }
    }
}
