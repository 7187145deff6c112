//! The character-boundary automata of [`Dfa::count_chars`]: a step reads one byte and says how
//! many characters it completes (0 or 1).

use std::sync::OnceLock;

use super::CharCount;

/// The initial state (for JSON: outside any escape, no high surrogate just before).
pub const START: u8 = 0;

// JSON body states. `HIGH` means: the previous character was a high-surrogate escape.
const NORMAL: u8 = 0;
const HIGH: u8 = 1;
/// After `\`; `+1` when a high surrogate preceded.
const BACKSLASH: u8 = 2;
/// After `\u` and `k` hex digits: `U_BASE + 2 * (k + 4 * kind) + high`, where `kind` is what
/// the digits so far say about the code unit.
const U_BASE: u8 = 4;
const KIND_UNKNOWN: u8 = 0; // no digit yet
const KIND_D: u8 = 1; // first digit `d`/`D`
const KIND_HIGH: u8 = 2; // `D8`-`DB`
const KIND_LOW: u8 = 3; // `DC`-`DF`
const KIND_OTHER: u8 = 4; // any other code unit
pub const STATES: usize = U_BASE as usize + 2 * 4 * 5;

fn is_cont(b: u8) -> bool {
    (0x80..=0xBF).contains(&b)
}

/// One step of the JSON body automaton: (next state, characters completed).
fn json_step(state: u8, b: u8) -> (u8, u8) {
    match state {
        NORMAL | HIGH => match b {
            b'\\' => (BACKSLASH + state, 0),
            _ if is_cont(b) => (NORMAL, 0),
            _ => (NORMAL, 1),
        },
        s if s == BACKSLASH || s == BACKSLASH + 1 => {
            let high = s - BACKSLASH;
            if b == b'u' {
                (U_BASE + 2 * (4 * KIND_UNKNOWN) + high, 0)
            } else {
                // `\"` `\\` `\/` `\b` ... (and, not valid JSON, any other byte) end here.
                (NORMAL, 1)
            }
        }
        s => {
            let i = s - U_BASE;
            let high = i & 1;
            let k = (i >> 1) % 4;
            let kind = (i >> 1) / 4;
            if !b.is_ascii_hexdigit() {
                // Not valid JSON: the broken escape counts as one character.
                return (NORMAL, 1);
            }
            let d = b.to_ascii_lowercase();
            let kind = match (k, kind) {
                (0, _) if d == b'd' => KIND_D,
                (0, _) => KIND_OTHER,
                (1, KIND_D) if matches!(d, b'8' | b'9' | b'a' | b'b') => KIND_HIGH,
                (1, KIND_D) if matches!(d, b'c'..=b'f') => KIND_LOW,
                (1, KIND_D) => KIND_OTHER,
                (_, kind) => kind,
            };
            if k < 3 {
                (U_BASE + 2 * (k + 1 + 4 * kind) + high, 0)
            } else {
                match kind {
                    KIND_LOW if high == 1 => (NORMAL, 0),
                    KIND_HIGH => (HIGH, 1),
                    _ => (NORMAL, 1),
                }
            }
        }
    }
}

/// The automaton as a flat table `next[state * 256 + byte]`, with byte classes.
pub struct Table {
    next: Vec<(u8, u8)>,
    class: [u32; 256],
}

impl Table {
    /// The table of `count`, built once per process (a constant of the engine).
    pub fn of(count: CharCount) -> &'static Table {
        static UTF8: OnceLock<Table> = OnceLock::new();
        static JSON_BODY: OnceLock<Table> = OnceLock::new();
        match count {
            CharCount::Utf8 => UTF8.get_or_init(|| Table::new(count)),
            CharCount::JsonBody => JSON_BODY.get_or_init(|| Table::new(count)),
        }
    }

    fn new(count: CharCount) -> Table {
        let states = match count {
            CharCount::Utf8 => 1,
            CharCount::JsonBody => STATES,
        };
        let mut next = Vec::with_capacity(states * 256);
        for s in 0..states as u8 {
            for b in 0..=255u8 {
                next.push(match count {
                    CharCount::Utf8 => (START, u8::from(!is_cont(b))),
                    CharCount::JsonBody => json_step(s, b),
                });
            }
        }
        // Bytes with equal columns (over all states) share a class.
        let mut class = [0u32; 256];
        let mut seen: Vec<u8> = Vec::new();
        for b in 0..=255u8 {
            let same = |a: u8| {
                (0..states).all(|s| next[s * 256 + a as usize] == next[s * 256 + b as usize])
            };
            class[b as usize] = match seen.iter().position(|&a| same(a)) {
                Some(i) => i as u32,
                None => {
                    seen.push(b);
                    (seen.len() - 1) as u32
                }
            };
        }
        Table { next, class }
    }

    #[inline]
    pub fn class(&self, b: u8) -> u32 {
        self.class[b as usize]
    }

    #[inline]
    pub fn step(&self, state: u8, b: u8) -> (u8, u8) {
        self.next[state as usize * 256 + b as usize]
    }
}
