//! Encoding a [`Dfa`] for the disk cache, and decoding it with every table invariant checked:
//! `stride >= 1`, every class below `stride`, `trans` a full `states × stride` table whose entries
//! are states, per-state vectors of the right length, the start a state id. A decoded automaton
//! therefore never indexes out of bounds, exactly like a constructed one.

use super::counted::Counter;
use super::{ByteSet, Dfa};
use crate::persist::{ensure, DecodeError, Reader, Writer};

impl Dfa {
    pub(crate) fn encode(&self, w: &mut Writer) {
        w.bytes(&self.classes);
        w.u32(self.stride);
        w.compact_u32s(&self.trans);
        w.bools(&self.accept);
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
        let classes: [u8; 256] = r
            .bytes()?
            .try_into()
            .map_err(|_| DecodeError("a byte-class table that is not 256 bytes"))?;
        let stride = r.u32()?;
        ensure((1..=256).contains(&stride), "a DFA stride outside 1..=256")?;
        ensure(
            classes.iter().all(|&c| u32::from(c) < stride),
            "a byte class beyond the stride",
        )?;
        let trans = r.compact_u32s()?;
        let accept = r.bools()?;
        let states = accept.len();
        ensure(states >= 1, "a DFA without states")?;
        ensure(
            trans.len() == states * stride as usize,
            "a transition table of the wrong size",
        )?;
        ensure(
            trans.iter().all(|&t| (t as usize) < states),
            "a transition to a state that does not exist",
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
    for _ in 0..n {
        sets.push(ByteSet([r.u64()?, r.u64()?, r.u64()?, r.u64()?]));
    }
    Ok(sets)
}
