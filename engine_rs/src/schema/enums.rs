//! String enums → one regex terminal, printed as the Python translator prints it: the words'
//! alternation with one-character words merged into a class in front, common prefixes factored
//! out (`_json_text.factor`), the JSON quotes around it.
//!
//! Only words of printable ASCII but `"` and `\` take this path. JSON spells those characters
//! one way but `/`, which may be `\/` too: as `_json_text.encode_json` does, a set of
//! characters holding `/` becomes the alternation of the set and `\/` once the strings are
//! factored. Other words decline.

/// A regex over ASCII characters, as the Python translator's `_regex` builds it.
#[derive(Clone, PartialEq, Eq, Debug)]
enum Re {
    /// One of these characters (sorted, distinct).
    Set(Vec<u8>),
    Cat(Vec<Re>),
    Alt(Vec<Re>),
    /// `x?`.
    Opt(Box<Re>),
    /// The empty string.
    Eps,
    /// `\/`, JSON's escape of a slash (`rx.cat` of the backslash and the slash).
    Escaped,
}

fn cat(items: Vec<Re>) -> Re {
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        match it {
            Re::Eps => {}
            Re::Cat(xs) => out.extend(xs),
            x => out.push(x),
        }
    }
    match out.len() {
        0 => Re::Eps,
        1 => out.pop().unwrap_or(Re::Eps),
        _ => Re::Cat(out),
    }
}

/// `rx.alt`: one-character sets merged into one set in front, the empty string as `?`.
fn alt(items: Vec<Re>) -> Re {
    let mut out = Vec::new();
    let mut chars: Vec<u8> = Vec::new();
    let mut eps = false;
    for it in items {
        let parts = match it {
            Re::Alt(xs) => xs,
            x => vec![x],
        };
        for p in parts {
            match p {
                Re::Eps => eps = true,
                Re::Opt(x) => {
                    eps = true;
                    match *x {
                        Re::Set(cs) => chars.extend(cs),
                        x => out.push(x),
                    }
                }
                Re::Set(cs) => chars.extend(cs),
                x => {
                    if !out.contains(&x) {
                        out.push(x);
                    }
                }
            }
        }
    }
    if !chars.is_empty() {
        chars.sort_unstable();
        chars.dedup();
        out.insert(0, Re::Set(chars));
    }
    let body = match out.len() {
        0 => return Re::Eps,
        1 => out.pop().unwrap_or(Re::Eps),
        _ => Re::Alt(out),
    };
    if eps {
        Re::Opt(Box::new(body))
    } else {
        body
    }
}

/// `_json_text.encode_json` of a factored regex of strings: a set holding `/` as the set or
/// `\/`, rebuilt with the constructors.
fn encode(node: Re) -> Re {
    match node {
        Re::Set(cs) if cs.contains(&b'/') => alt(vec![Re::Set(cs), Re::Escaped]),
        Re::Cat(xs) => cat(xs.into_iter().map(encode).collect()),
        Re::Alt(xs) => alt(xs.into_iter().map(encode).collect()),
        Re::Opt(x) => Re::Opt(Box::new(encode(*x))),
        x => x,
    }
}

/// `_json_text.factor`: common prefixes of the alternatives factored out.
fn factor(node: Re) -> Re {
    match node {
        Re::Alt(items) => factor_seqs(
            items
                .into_iter()
                .map(|it| match it {
                    Re::Cat(xs) => xs,
                    x => vec![x],
                })
                .collect(),
        ),
        x => x,
    }
}

fn factor_seqs(seqs: Vec<Vec<Re>>) -> Re {
    let mut groups: Vec<(Re, Vec<Vec<Re>>)> = Vec::new();
    let mut empty = false;
    for mut sq in seqs {
        if sq.is_empty() {
            empty = true;
            continue;
        }
        let head = sq.remove(0);
        match groups.iter_mut().find(|(h, _)| *h == head) {
            Some((_, rests)) => rests.push(sq),
            None => groups.push((head, vec![sq])),
        }
    }
    let mut branches = Vec::with_capacity(groups.len() + 1);
    for (head, mut rests) in groups {
        if rests.len() == 1 {
            let mut items = vec![head];
            items.append(&mut rests[0]);
            branches.push(cat(items));
        } else {
            branches.push(cat(vec![head, factor_seqs(rests)]));
        }
    }
    if empty {
        branches.push(Re::Eps);
    }
    alt(branches)
}

/// `_json_text._cp`: one character as printed.
fn char_text(c: u8, in_class: bool, out: &mut String) {
    const META: &[u8] = b"\\.+*?()|[]{}^$#&-~";
    if META.contains(&c) || (in_class && b"[]^-&~".contains(&c)) {
        out.push('\\');
    }
    out.push(c as char);
}

/// `_json_text._set_text` for a set of printable ASCII characters (never printed negated: its
/// complement has more ranges).
pub(super) fn set_text(cs: &[u8], out: &mut String) {
    if let [c] = cs {
        char_text(*c, false, out);
        return;
    }
    out.push('[');
    let mut i = 0;
    while i < cs.len() {
        let mut j = i;
        while j + 1 < cs.len() && cs[j + 1] == cs[j] + 1 {
            j += 1;
        }
        char_text(cs[i], true, out);
        if j == i + 1 {
            char_text(cs[j], true, out);
        } else if j > i + 1 {
            out.push('-');
            char_text(cs[j], true, out);
        }
        i = j + 1;
    }
    out.push(']');
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Set,
    Cat,
    Alt,
    Rep,
}

/// `_json_text._plain_walk`: the kind, the text, the states and the nesting depth.
fn print(n: &Re) -> (Kind, String, usize, usize) {
    match n {
        Re::Set(cs) => {
            let mut s = String::new();
            set_text(cs, &mut s);
            (Kind::Set, s, 1, 0)
        }
        Re::Cat(xs) | Re::Alt(xs) => {
            let is_cat = matches!(n, Re::Cat(_));
            let (mut states, mut depth) = (0, 0);
            let mut texts = Vec::with_capacity(xs.len());
            for x in xs {
                let (kind, text, s, d) = print(x);
                texts.push(if is_cat && kind == Kind::Alt {
                    format!("(?:{text})")
                } else {
                    text
                });
                states += s;
                depth = depth.max(d);
            }
            if is_cat {
                (Kind::Cat, texts.concat(), states, depth + 1)
            } else {
                (Kind::Alt, texts.join("|"), states, depth + 1)
            }
        }
        Re::Opt(x) => {
            let (kind, text, s, d) = print(x);
            let text = if kind == Kind::Set {
                text
            } else {
                format!("(?:{text})")
            };
            (Kind::Rep, text + "?", s, d + 1)
        }
        Re::Eps => (Kind::Cat, String::new(), 0, 0),
        Re::Escaped => (Kind::Cat, "\\x5C/".to_owned(), 2, 1),
    }
}

/// Most states and nesting of the printed regex (the Python translator's budgets for one
/// terminal are 3,000 and 100; kept well below, so the fast path never meets them).
const MAX_STATES: usize = 2_000;
const MAX_DEPTH: usize = 64;

/// The regex (without the `#"…"`) of a JSON string that is one of `words` (distinct, in schema
/// order), or `None` when a word is empty or has a character outside printable ASCII but `"`
/// and `\`, or the regex would be large. (The states and depth are `_plain_walk`'s, and for
/// words with `/`, `regex_rules.metrics`'s: the same sums.)
pub(super) fn enum_regex(words: &[String]) -> Option<String> {
    let mut items = Vec::with_capacity(words.len());
    for w in words {
        if w.is_empty()
            || !w
                .bytes()
                .all(|b| (b' '..=b'~').contains(&b) && !matches!(b, b'"' | b'\\'))
        {
            return None;
        }
        items.push(cat(w.bytes().map(|b| Re::Set(vec![b])).collect()));
    }
    let (kind, text, states, depth) = print(&encode(factor(alt(items))));
    if states + 2 > MAX_STATES || depth + 1 > MAX_DEPTH {
        return None;
    }
    Some(match kind {
        Kind::Alt => format!("\\x22(?:{text})\\x22"),
        _ => format!("\\x22{text}\\x22"),
    })
}
