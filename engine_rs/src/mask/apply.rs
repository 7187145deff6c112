//! Applying a token bitmask to one row of logits on the host.
//!
//! Invariant (the same as `structout.bitmask`'s): a logit stays unchanged exactly when its
//! token's bit is set (bit `i % 32` of word `i / 32`); every other logit, including columns beyond
//! the bitmask, becomes `-inf`. Words that are all ones are skipped, so the cost is one pass over
//! the words plus one store per disallowed token.

/// A float type logits come in.
pub trait Logit: Copy {
    /// Negative infinity of this type.
    const NEG_INF: Self;
}

impl Logit for f32 {
    const NEG_INF: f32 = f32::NEG_INFINITY;
}

impl Logit for f64 {
    const NEG_INF: f64 = f64::NEG_INFINITY;
}

/// Sets every logit whose bit in `words` is clear (or that lies beyond `words`) to `-inf`.
pub fn apply_bitmask<T: Logit>(logits: &mut [T], words: &[u32]) {
    let covered = logits.len().min(words.len() * 32);
    let (masked, beyond) = logits.split_at_mut(covered);
    for (chunk, &word) in masked.chunks_mut(32).zip(words) {
        if word == u32::MAX {
            continue;
        }
        if word == 0 {
            chunk.fill(T::NEG_INF);
            continue;
        }
        let mut clear = !word;
        while clear != 0 {
            let bit = clear.trailing_zeros() as usize;
            clear &= clear - 1;
            // The last chunk may be shorter than 32: its missing columns have no logit.
            if let Some(x) = chunk.get_mut(bit) {
                *x = T::NEG_INF;
            }
        }
    }
    beyond.fill(T::NEG_INF);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(logits: &[f32], words: &[u32]) -> Vec<f32> {
        logits
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let allowed = words.get(i / 32).is_some_and(|w| w >> (i % 32) & 1 == 1);
                if allowed {
                    x
                } else {
                    f32::NEG_INFINITY
                }
            })
            .collect()
    }

    #[test]
    fn matches_the_bitwise_definition() {
        let mut seed = 0x1234_5678_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for vocab in [1usize, 31, 32, 33, 95, 128, 1000] {
            for words_len in [0, vocab / 32, vocab.div_ceil(32), vocab.div_ceil(32) + 1] {
                let words: Vec<u32> = (0..words_len)
                    .map(|k| match k % 4 {
                        0 => u32::MAX,
                        1 => 0,
                        _ => next(),
                    })
                    .collect();
                let logits: Vec<f32> = (0..vocab).map(|i| i as f32).collect();
                let mut got = logits.clone();
                apply_bitmask(&mut got, &words);
                assert_eq!(
                    got,
                    reference(&logits, &words),
                    "vocab {vocab} words {words_len}"
                );
            }
        }
    }
}
