//! A tiny UTF-8 validator automaton (used for `except!`, whose strings must be valid UTF-8).

pub const BOUNDARY: u8 = 0;
const NEED1: u8 = 1;
const NEED2: u8 = 2;
const NEED3: u8 = 3;
const AFTER_E0: u8 = 4;
const AFTER_ED: u8 = 5;
const AFTER_F0: u8 = 6;
const AFTER_F4: u8 = 7;
pub const INVALID: u8 = 8;

/// Bytes with the same class behave the same in every validator state.
pub fn class(b: u8) -> u8 {
    match b {
        0x00..=0x7F => 0,
        0x80..=0x8F => 1,
        0x90..=0x9F => 2,
        0xA0..=0xBF => 3,
        0xC2..=0xDF => 4,
        0xE0 => 5,
        0xE1..=0xEC | 0xEE..=0xEF => 6,
        0xED => 7,
        0xF0 => 8,
        0xF1..=0xF3 => 9,
        0xF4 => 10,
        _ => 11,
    }
}

pub fn next(state: u8, b: u8) -> u8 {
    let cont = (0x80..=0xBF).contains(&b);
    match state {
        BOUNDARY => match b {
            0x00..=0x7F => BOUNDARY,
            0xC2..=0xDF => NEED1,
            0xE0 => AFTER_E0,
            0xE1..=0xEC | 0xEE..=0xEF => NEED2,
            0xED => AFTER_ED,
            0xF0 => AFTER_F0,
            0xF1..=0xF3 => NEED3,
            0xF4 => AFTER_F4,
            _ => INVALID,
        },
        NEED1 if cont => BOUNDARY,
        NEED2 if cont => NEED1,
        NEED3 if cont => NEED2,
        AFTER_E0 if (0xA0..=0xBF).contains(&b) => NEED1,
        AFTER_ED if (0x80..=0x9F).contains(&b) => NEED1,
        AFTER_F0 if (0x90..=0xBF).contains(&b) => NEED2,
        AFTER_F4 if (0x80..=0x8F).contains(&b) => NEED2,
        _ => INVALID,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The standard library's answer: `bytes` is valid UTF-8 or a prefix of it.
    pub(crate) fn is_utf8_prefix(bytes: &[u8]) -> bool {
        match std::str::from_utf8(bytes) {
            Ok(_) => true,
            Err(e) => e.error_len().is_none(),
        }
    }

    #[test]
    fn prefixes_equal_std() {
        // Every string of up to 3 bytes over bytes that cover each UTF-8 kind's edges.
        let bytes: Vec<u8> = vec![
            0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE1,
            0xED, 0xEE, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF,
        ];
        let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
        let mut last: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..3 {
            last = last
                .iter()
                .flat_map(|s| bytes.iter().map(move |&b| [s.as_slice(), &[b]].concat()))
                .collect();
            strings.extend(last.iter().cloned());
        }
        for s in &strings {
            let mut u = BOUNDARY;
            for &b in s {
                if u != INVALID {
                    u = next(u, b);
                }
            }
            assert_eq!(u != INVALID, is_utf8_prefix(s), "{s:x?}");
        }
    }
}
