//! Length-bounded automata: the strings of an automaton with a number of characters in a range
//! (`len!` / `json_len!`), tabulated or counted.

use super::{chars, explore, length_counter, product_classes, Dfa, DfaError, DEAD};

impl Dfa {
    /// The strings of `e` with between `min` and `max` characters, counted as `count` says.
    ///
    /// Tabulated as the product of `e`, a small character-boundary automaton ([`chars`]) and a
    /// counter `0..=max` when that fits in [`table_bytes`]`(size_limit)`; otherwise a
    /// length-counted automaton ([`length_counter`]) whose size does not grow with `max`.
    pub fn count_chars(
        e: &Dfa,
        count: CharCount,
        min: u32,
        max: u32,
        size_limit: usize,
    ) -> Result<Dfa, DfaError> {
        #[cfg(test)]
        let form = test_form::get();
        #[cfg(not(test))]
        let form = CountForm::Auto;
        Self::count_chars_as(e, count, min, max, size_limit, form)
    }

    /// [`Dfa::count_chars`] with the representation chosen by `form` (tests compare the two).
    pub fn count_chars_as(
        e: &Dfa,
        count: CharCount,
        min: u32,
        max: u32,
        size_limit: usize,
        form: CountForm,
    ) -> Result<Dfa, DfaError> {
        if e.start == DEAD || min > max {
            return Ok(Dfa::empty());
        }
        match form {
            CountForm::Table => Self::count_chars_table(e, count, min, max, size_limit),
            CountForm::Counted => length_counter::build(e, count, min, max, size_limit),
            CountForm::Auto => {
                match Self::count_chars_table(e, count, min, max, table_bytes(size_limit)) {
                    Err(DfaError::TooBig { .. }) => {
                        length_counter::build(e, count, min, max, size_limit)
                    }
                    other => other,
                }
            }
        }
    }

    /// The product of `e`, the character-boundary automaton and a counter `0..=max` (a count over
    /// `max` is dead). Counts only grow along a string, so pruning at `max` is exact.
    fn count_chars_table(
        e: &Dfa,
        count: CharCount,
        min: u32,
        max: u32,
        size_limit: usize,
    ) -> Result<Dfa, DfaError> {
        let table = chars::Table::of(count);
        // Product classes: bytes equivalent for `e` and in every character-automaton state.
        let (classes, reps) = product_classes(|b| (e.classes[b as usize], table.class(b)));
        let explored = explore(
            (e.start, chars::START, 0u32),
            &reps,
            |&(s, c, n), b| {
                let t = e.next(s, b);
                if t == DEAD {
                    return Ok(None);
                }
                let (c2, inc) = table.step(c, b);
                let n2 = n.checked_add(u32::from(inc)).filter(|&n2| n2 <= max);
                Ok(n2.map(|n2| (t, c2, n2)))
            },
            |&(s, _, n)| e.is_accept(s) && n >= min,
            size_limit,
        )?;
        let (explored, classes) = explored.merge_equal_classes(classes);
        Ok(explored.finish(classes))
    }
}

/// Most bytes of a tabulated length-bounded automaton: `dfa_size_limit / 8`, and never more than
/// [`MAX_TABLE_BYTES`].
///
/// Why so small: a table is `|e| × (max + 1)` rows, and normalization copies it into every
/// terminal it merges with (`"key": ` + value, the alternatives of an object's members), so a
/// schema with a few dozen `maxLength: 200` strings became hundreds of megabytes of tables and
/// seconds of compiling. The counted form costs `|e|` rows whatever `max` is; tables stay only
/// where they are small, where they are a little faster and merging them is cheap.
pub fn table_bytes(size_limit: usize) -> usize {
    (size_limit / 8).min(MAX_TABLE_BYTES)
}

/// See [`table_bytes`].
pub const MAX_TABLE_BYTES: usize = 16 << 10;

/// The representation [`Dfa::count_chars_as`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountForm {
    /// A table when small enough (see [`table_bytes`]), else counted.
    Auto,
    /// Always a table of (state, count) pairs.
    Table,
    /// Always a length-counted automaton.
    Counted,
}

/// Unit tests run the whole pipeline with each representation of `len!` / `json_len!`.
#[cfg(test)]
pub(crate) mod test_form {
    use super::CountForm;
    use std::cell::Cell;

    thread_local! {
        static FORM: Cell<CountForm> = const { Cell::new(CountForm::Auto) };
    }

    pub fn get() -> CountForm {
        FORM.with(|f| f.get())
    }

    /// Runs `f` with [`super::Dfa::count_chars`] building `form` on this thread.
    pub fn with<R>(form: CountForm, f: impl FnOnce() -> R) -> R {
        let old = FORM.with(|c| c.replace(form));
        let r = f();
        FORM.with(|c| c.set(old));
        r
    }
}

/// How [`Dfa::count_chars`] counts characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CharCount {
    /// UTF-8 code points, each counted at its lead byte (every byte outside `0x80..=0xBF`).
    Utf8,
    /// Code points of the decoded body of a JSON string literal: an escape counts one at its last
    /// byte, and a `\uDC00`-`\uDFFF` escape right after a `\uD800`-`\uDBFF` escape counts zero
    /// (the pair is one code point).
    JsonBody,
}
