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
