//! What `unique!` items compare: canonical forms of JSON values, and the interned sets of them
//! that the items of a `unique!` production carry in their state.
//!
//! Canonical form (self-delimiting bytes; two texts are equal JSON values iff their forms are
//! equal): `n`, `t`, `f`; zero (any sign or spelling) `z`; another number `d`, `-` when negative,
//! `e`, the exponent (`-` when negative, then digits), `m`, the digits, `;` — the value is
//! `0.digits × 10^exponent` with no leading or trailing zero digit, computed exactly in decimal
//! (no floats, exponents of any length); a string `s`, the byte length of its unescaped UTF-8
//! (a lone surrogate escape as its 3-byte WTF-8), `:`, those bytes; an array `[`, its elements,
//! `]`; an object `{`, its members (key then value) sorted by the keys' forms, a repeated key
//! with its last value only, as JSON parsers read it, `}`. Whitespace
//! between tokens is ignored. Text that is not one JSON value (a hand-written `unique!` over
//! other text), or nested deeper than [`MAX_DEPTH`], is compared as written: `r` then its bytes.
//!
//! Interner invariants: ids only grow while sets are built, and a recognizer returning to an
//! earlier Earley set truncates the interner to the [`Mark`] that set recorded, so every id an
//! item refers to is valid and means what it meant when the item was made (rollback and fork
//! stay exact). Set 0 is the empty set; set `s ∪ {v}` is interned once per `(s, v)`.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

/// Deepest nesting canonicalized structurally (deeper values compare as written).
pub const MAX_DEPTH: usize = 256;

/// Writes the canonical form of the JSON text `text` to `out` (cleared first).
pub fn canonical(text: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut p = Canon { text, pos: 0 };
    p.ws();
    if p.value(out, 0).is_some() {
        p.ws();
        if p.pos == text.len() {
            return;
        }
    }
    out.clear();
    out.push(b'r');
    out.extend_from_slice(text);
}

struct Canon<'a> {
    text: &'a [u8],
    pos: usize,
}

impl<'a> Canon<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, word: &[u8]) -> Option<()> {
        let end = self.pos.checked_add(word.len())?;
        (self.text.get(self.pos..end)? == word).then(|| self.pos = end)
    }

    fn value(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'n' => self.eat(b"null").map(|_| out.push(b'n')),
            b't' => self.eat(b"true").map(|_| out.push(b't')),
            b'f' => self.eat(b"false").map(|_| out.push(b'f')),
            b'"' => self.string(out),
            b'[' => {
                self.pos += 1;
                out.push(b'[');
                self.ws();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    out.push(b']');
                    return Some(());
                }
                loop {
                    self.value(out, depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => {
                            self.pos += 1;
                            self.ws();
                        }
                        b']' => {
                            self.pos += 1;
                            out.push(b']');
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'{' => {
                self.pos += 1;
                self.ws();
                // (a repeated key keeps its last value, as JSON parsers do)
                let mut members: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                } else {
                    loop {
                        let (mut k, mut v) = (Vec::new(), Vec::new());
                        if self.peek()? != b'"' {
                            return None;
                        }
                        self.string(&mut k)?;
                        self.ws();
                        self.eat(b":")?;
                        self.ws();
                        self.value(&mut v, depth + 1)?;
                        members.insert(k, v);
                        self.ws();
                        match self.peek()? {
                            b',' => {
                                self.pos += 1;
                                self.ws();
                            }
                            b'}' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                out.push(b'{');
                for (k, v) in &members {
                    out.extend_from_slice(k);
                    out.extend_from_slice(v);
                }
                out.push(b'}');
                Some(())
            }
            b'-' | b'0'..=b'9' => self.number(out),
            _ => None,
        }
    }

    /// A JSON string, unescaped (see the module documentation).
    fn string(&mut self, out: &mut Vec<u8>) -> Option<()> {
        self.eat(b"\"")?;
        let mut s: Vec<u8> = Vec::new();
        loop {
            let c = self.peek()?;
            self.pos += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.peek()?;
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => s.push(e),
                        b'b' => s.push(8),
                        b'f' => s.push(12),
                        b'n' => s.push(b'\n'),
                        b'r' => s.push(b'\r'),
                        b't' => s.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp) {
                                // A high surrogate: joined with a following low one.
                                let save = self.pos;
                                let low = self.eat(b"\\u").and_then(|_| self.hex4());
                                match low {
                                    Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                    }
                                    _ => self.pos = save,
                                }
                            }
                            push_wtf8(cp, &mut s);
                        }
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None,
                c => s.push(c),
            }
        }
        out.push(b's');
        out.extend_from_slice(s.len().to_string().as_bytes());
        out.push(b':');
        out.extend_from_slice(&s);
        Some(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.text.get(self.pos..self.pos.checked_add(4)?)?;
        let h = std::str::from_utf8(h).ok()?;
        let v = u32::from_str_radix(h, 16).ok()?;
        // (from_str_radix takes a sign; JSON does not)
        h.bytes().all(|b| b.is_ascii_hexdigit()).then(|| {
            self.pos += 4;
            v
        })
    }

    /// A JSON number, normalized exactly (see the module documentation).
    fn number(&mut self, out: &mut Vec<u8>) -> Option<()> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let int = self.digits();
        if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
            return None;
        }
        let mut frac: &[u8] = &[];
        if self.peek() == Some(b'.') {
            self.pos += 1;
            frac = self.digits();
            if frac.is_empty() {
                return None;
            }
        }
        let mut exp_negative = false;
        let mut exp: &[u8] = b"0";
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            match self.peek() {
                Some(b'-') => {
                    exp_negative = true;
                    self.pos += 1;
                }
                Some(b'+') => self.pos += 1,
                _ => {}
            }
            exp = self.digits();
            if exp.is_empty() {
                return None;
            }
        }
        // value = 0.D × 10^(exp + int.len() - leading zeros of int ++ frac), D the digits
        // without leading and trailing zeros.
        let all: Vec<u8> = int.iter().chain(frac).copied().collect();
        let Some(first) = all.iter().position(|&d| d != b'0') else {
            out.push(b'z');
            return Some(());
        };
        let last = all
            .iter()
            .rposition(|&d| d != b'0')
            .expect("a non-zero digit");
        let shift = int.len() as i64 - first as i64;
        let exp = add_small(exp_negative, exp, shift);
        out.push(b'd');
        if negative {
            out.push(b'-');
        }
        out.push(b'e');
        out.extend_from_slice(&exp);
        out.push(b'm');
        out.extend_from_slice(&all[first..=last]);
        out.push(b';');
        Some(())
    }

    fn digits(&mut self) -> &'a [u8] {
        let text = self.text;
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        &text[start..self.pos]
    }
}

fn push_wtf8(cp: u32, out: &mut Vec<u8>) {
    match char::from_u32(cp) {
        Some(c) => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        // A lone surrogate: its 3-byte generalized UTF-8.
        None => out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
    }
}

/// The decimal text (`-` then digits when negative, no leading zero) of the exponent
/// `±digits + delta`, exact for exponents of any length (`|delta|` is far below 10^18).
fn add_small(negative: bool, digits: &[u8], delta: i64) -> Vec<u8> {
    let first = digits.iter().position(|&d| d != b'0');
    let digits = first.map_or(&[][..], |f| &digits[f..]);
    if digits.len() <= 18 {
        let v: i128 = std::str::from_utf8(digits)
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let v = if negative { -v } else { v } + delta as i128;
        return v.to_string().into_bytes();
    }
    // |±digits| >= 10^18 > |delta|: the sign stays, the magnitude moves by |delta|.
    let mut mag: Vec<u8> = digits.to_vec();
    if (delta < 0) == negative {
        add_magnitude(&mut mag, delta.unsigned_abs());
    } else {
        sub_magnitude(&mut mag, delta.unsigned_abs());
    }
    let mut out = Vec::with_capacity(mag.len() + 1);
    if negative {
        out.push(b'-');
    }
    let first = mag.iter().position(|&d| d != b'0').unwrap_or(mag.len() - 1);
    out.extend_from_slice(&mag[first..]);
    out
}

/// `mag += n` on ASCII decimal digits.
fn add_magnitude(mag: &mut Vec<u8>, mut n: u64) {
    for d in mag.iter_mut().rev() {
        if n == 0 {
            return;
        }
        let v = (*d - b'0') as u64 + n % 10;
        n /= 10;
        *d = b'0' + (v % 10) as u8;
        n += v / 10;
    }
    let mut head = Vec::new();
    while n > 0 {
        head.push(b'0' + (n % 10) as u8);
        n /= 10;
    }
    head.reverse();
    mag.splice(0..0, head);
}

/// `mag -= n` on ASCII decimal digits (`mag >= n`).
fn sub_magnitude(mag: &mut [u8], mut n: u64) {
    let mut borrow = 0u64;
    for d in mag.iter_mut().rev() {
        if n == 0 && borrow == 0 {
            return;
        }
        let s = n % 10 + borrow;
        n /= 10;
        let v = (*d - b'0') as u64;
        if v >= s {
            *d = b'0' + (v - s) as u8;
            borrow = 0;
        } else {
            *d = b'0' + (v + 10 - s) as u8;
            borrow = 1;
        }
    }
}

/// Identifies an interned set of canonical values (0: the empty set).
pub type SetId = u32;

/// The interner's size at some moment, to truncate back to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    values: u32,
    sets: u32,
    members: u32,
}

/// A set of `any_order!` members read ([`crate::lnf::MemberSets`]): `parent` plus `member`
/// (`u32::MAX`: none, only the count grew), `count` members read in all (capped), `len`
/// members in the set, `required` of them required.
#[derive(Clone, Copy, Debug)]
struct MemberNode {
    parent: u32,
    member: u32,
    count: u32,
    len: u32,
    required: u32,
}

#[derive(Clone, Copy, Debug)]
struct SetNode {
    /// The set this one extends by `value` (`u32::MAX` for the empty set).
    parent: SetId,
    value: u32,
    len: u32,
}

/// Interned canonical values and sets of them (see the module documentation).
#[derive(Clone, Debug)]
pub struct Interner {
    bytes: Vec<u8>,
    /// Value `v` is `bytes[value_ends[v - 1]..value_ends[v]]` (`0` before value 0).
    value_ends: Vec<u32>,
    value_ids: FxHashMap<Box<[u8]>, u32>,
    sets: Vec<SetNode>,
    set_ids: FxHashMap<(SetId, u32), SetId>,
    /// `any_order!` member sets (0: none read), interned per `(parent, member)` like `sets`.
    members: Vec<MemberNode>,
    member_ids: FxHashMap<(u32, u32), u32>,
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            bytes: Vec::new(),
            value_ends: Vec::new(),
            value_ids: FxHashMap::default(),
            sets: vec![SetNode {
                parent: u32::MAX,
                value: u32::MAX,
                len: 0,
            }],
            set_ids: FxHashMap::default(),
            members: vec![MemberNode {
                parent: u32::MAX,
                member: u32::MAX,
                count: 0,
                len: 0,
                required: 0,
            }],
            member_ids: FxHashMap::default(),
        }
    }
}

impl Interner {
    pub fn mark(&self) -> Mark {
        Mark {
            values: self.value_ends.len() as u32,
            sets: self.sets.len() as u32,
            members: self.members.len() as u32,
        }
    }

    /// Forgets every value and set interned after `mark`.
    pub fn truncate(&mut self, mark: Mark) {
        for s in (mark.members as usize..self.members.len()).rev() {
            let n = self.members[s];
            self.member_ids.remove(&(n.parent, n.member));
        }
        self.members.truncate(mark.members.max(1) as usize);
        for s in (mark.sets as usize..self.sets.len()).rev() {
            let n = self.sets[s];
            self.set_ids.remove(&(n.parent, n.value));
        }
        self.sets.truncate(mark.sets.max(1) as usize);
        for v in (mark.values as usize..self.value_ends.len()).rev() {
            let from = v.checked_sub(1).map_or(0, |p| self.value_ends[p] as usize);
            let to = self.value_ends[v] as usize;
            self.value_ids.remove(&self.bytes[from..to]);
        }
        self.value_ends.truncate(mark.values as usize);
        self.bytes
            .truncate(self.value_ends.last().map_or(0, |&e| e as usize));
    }

    /// Back to only the empty set.
    pub fn clear(&mut self) {
        self.truncate(Mark::default());
    }

    /// Interned sets plus canonical bytes held (what the `max_total_items` limit bounds).
    pub fn size(&self) -> usize {
        self.sets.len() + self.bytes.len() + self.members.len()
    }

    /// Members read in all in member set `set` (capped as it was built).
    #[inline]
    pub fn member_count(&self, set: u32) -> u32 {
        self.members[set as usize].count
    }

    /// `(count, len, required)` of member set `set`: members read in all (capped), members in
    /// the set, required ones among them.
    #[inline]
    pub fn member_sizes(&self, set: u32) -> (u32, u32, u32) {
        let n = self.members[set as usize];
        (n.count, n.len, n.required)
    }

    /// Whether member `m` is in member set `set` (a walk up its chain).
    pub fn has_member(&self, mut set: u32, m: u32) -> bool {
        while set != 0 {
            let n = self.members[set as usize];
            if n.member == m {
                return true;
            }
            set = n.parent;
        }
        false
    }

    /// Member set `set` after one more member read: `m` joins it when `record` (`m` counted and
    /// not in it yet; `required`: a required member), and the count grows up to `cap`. The same
    /// set when neither changes.
    pub fn add_member(&mut self, set: u32, m: u32, record: bool, required: bool, cap: u32) -> u32 {
        let n = self.members[set as usize];
        let count = (n.count + 1).min(cap);
        if !record && count == n.count {
            return set;
        }
        let member = if record { m } else { u32::MAX };
        if let Some(&s) = self.member_ids.get(&(set, member)) {
            return s;
        }
        let s = self.members.len() as u32;
        self.members.push(MemberNode {
            parent: set,
            member,
            count,
            len: n.len + record as u32,
            required: n.required + (record && required) as u32,
        });
        self.member_ids.insert((set, member), s);
        s
    }

    /// The members of member set `set` as bits of `out` (cleared to `words` words first).
    pub fn member_bits(&self, mut set: u32, words: usize, out: &mut Vec<u64>) {
        out.clear();
        out.resize(words, 0);
        while set != 0 {
            let n = self.members[set as usize];
            if n.member != u32::MAX {
                out[n.member as usize / 64] |= 1 << (n.member % 64);
            }
            set = n.parent;
        }
    }

    /// The members of member set `set`, most recent first.
    pub fn members(&self, mut set: u32) -> impl Iterator<Item = u32> + '_ {
        std::iter::from_fn(move || loop {
            if set == 0 {
                return None;
            }
            let n = self.members[set as usize];
            set = n.parent;
            if n.member != u32::MAX {
                return Some(n.member);
            }
        })
    }

    /// The canonical form of value `v`.
    pub fn value(&self, v: u32) -> &[u8] {
        let from = match v {
            0 => 0,
            v => self.value_ends[v as usize - 1] as usize,
        };
        &self.bytes[from..self.value_ends[v as usize] as usize]
    }

    /// The id of canonical form `form`.
    pub fn intern_value(&mut self, form: &[u8]) -> u32 {
        if let Some(&v) = self.value_ids.get(form) {
            return v;
        }
        let v = self.value_ends.len() as u32;
        self.bytes.extend_from_slice(form);
        self.value_ends.push(self.bytes.len() as u32);
        self.value_ids.insert(form.into(), v);
        v
    }

    /// Number of values in `set`.
    #[inline]
    pub fn len(&self, set: SetId) -> u32 {
        self.sets[set as usize].len
    }

    /// Whether value `v` is in `set` (a walk up the set's chain: O(its size)).
    pub fn contains(&self, mut set: SetId, v: u32) -> bool {
        while set != 0 {
            let n = self.sets[set as usize];
            if n.value == v {
                return true;
            }
            set = n.parent;
        }
        false
    }

    /// `set ∪ {v}` for `v` not in `set`.
    pub fn insert(&mut self, set: SetId, v: u32) -> SetId {
        if let Some(&s) = self.set_ids.get(&(set, v)) {
            return s;
        }
        let s = self.sets.len() as SetId;
        let len = self.sets[set as usize].len + 1;
        self.sets.push(SetNode {
            parent: set,
            value: v,
            len,
        });
        self.set_ids.insert((set, v), s);
        s
    }

    /// The values of `set`, most recent first.
    pub fn values(&self, mut set: SetId) -> impl Iterator<Item = u32> + '_ {
        std::iter::from_fn(move || {
            if set == 0 {
                return None;
            }
            let n = self.sets[set as usize];
            set = n.parent;
            Some(n.value)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        canonical(text.as_bytes(), &mut out);
        out
    }

    #[test]
    fn equal_values_have_equal_forms() {
        let groups: &[&[&str]] = &[
            &["1", "1.0", "1e0", "10e-1", "0.1E1", "1.000e+0", "100e-2"],
            &["0", "-0", "0.0", "-0e5", "0e-99999999999999999999999"],
            &["1e400", "10e399", "0.1e401"],
            &[
                "1e123456789012345678901234567890",
                "10e123456789012345678901234567889",
                "0.001e123456789012345678901234567893",
            ],
            &[
                "-1e-123456789012345678901234567890",
                "-0.1e-123456789012345678901234567889",
            ],
            &[
                "123456789012345678901234567890",
                "1.23456789012345678901234567890e29",
            ],
            &[r#""a""#, r#""\u0061""#, r#""\u0061""#],
            &[r#""\ud83d\ude00""#, "\"\u{1F600}\""],
            &[r#""\/""#, r#""/""#],
            &[r#"{"a": 1, "b": [1, 2]}"#, r#"{ "b":[1.0,2e0], "a":1 }"#],
            &["[1, [2, {}]]", "[ 1.0 ,[ 2,{ } ] ]"],
            &["true", " true "],
            &[r#"{"a": 1, "a": 2}"#, r#"{"a": 2}"#],
        ];
        for g in groups {
            for t in g.iter() {
                assert_eq!(form(t), form(g[0]), "{t} and {}", g[0]);
            }
        }
    }

    #[test]
    fn different_values_have_different_forms() {
        let all = [
            "1",
            "2",
            "-1",
            "0",
            "10",
            "0.1",
            "1e400",
            "1e401",
            "1.0000000000000000000001",
            "true",
            "false",
            "null",
            r#""1""#,
            r#""a""#,
            r#""A""#,
            r#""a ""#,
            "[1]",
            "[1, 1]",
            "[[1]]",
            "[]",
            "{}",
            r#"{"a": 1}"#,
            r#"{"a": 2}"#,
            r#"{"b": 1}"#,
            r#"{"a": 1, "b": 1}"#,
            r#"[{"a": 1}]"#,
            r#""\ud800""#,
            r#""\ud800\u0061""#,
            "1e123456789012345678901234567890",
            "1e123456789012345678901234567891",
            "-1e123456789012345678901234567890",
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(form(a), form(b), "{a} and {b}");
            }
        }
    }

    #[test]
    fn text_that_is_not_json_compares_as_written() {
        assert_eq!(form("01"), b"r01");
        assert_eq!(form("[1,]"), b"r[1,]");
        assert_ne!(form("abc"), form("abd"));
        let deep = "[".repeat(MAX_DEPTH + 2) + &"]".repeat(MAX_DEPTH + 2);
        assert_eq!(form(&deep)[0], b'r');
    }

    #[test]
    fn exponent_arithmetic_is_exact() {
        assert_eq!(
            add_small(false, b"999999999999999999999", 1),
            b"1000000000000000000000"
        );
        assert_eq!(
            add_small(false, b"1000000000000000000000", -1),
            b"999999999999999999999"
        );
        assert_eq!(
            add_small(true, b"1000000000000000000000", -1),
            b"-1000000000000000000001"
        );
        assert_eq!(
            add_small(true, b"1000000000000000000000", 1),
            b"-999999999999999999999"
        );
        assert_eq!(add_small(false, b"00012", -20), b"-8");
    }

    #[test]
    fn sets_intern_and_truncate() {
        let mut i = Interner::default();
        let a = i.intern_value(b"s1:a");
        let s1 = i.insert(0, a);
        let m = i.mark();
        let b = i.intern_value(b"s1:b");
        let s2 = i.insert(s1, b);
        assert_eq!(i.insert(s1, b), s2);
        assert!(i.contains(s2, a) && i.contains(s2, b) && !i.contains(s1, b));
        assert_eq!(i.len(s2), 2);
        i.truncate(m);
        assert_eq!(i.mark(), m);
        assert_eq!(i.intern_value(b"s1:c"), b);
        assert_eq!(i.value(b), b"s1:c");
        assert_eq!(i.intern_value(b"s1:a"), a);
    }
}
