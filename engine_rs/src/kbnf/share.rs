//! Grammars embedded in one larger grammar, each under its own rule-name prefix, with every rule
//! written once up to renaming (the structural tags' `g<N>_` parts, `structout.kbnf_text`).
//!
//! Grammars of JSON Schemas repeat the same rules (the generic JSON value, string and number
//! rules, `boolean`, equal objects and enums). Two rules whose bodies are equal once rule names
//! are abstracted, and whose names at each position are rules that are (recursively) such twins,
//! derive the same language: the second is dropped and its uses go to the first. Rules are
//! hash-consed bottom-up over the strongly connected components of each grammar's rule graph: a
//! rule outside a cycle by its body and the classes of the rules it names, a rule on a cycle by a
//! canonical walk of its component from it (equal walks: isomorphic rooted components). Rules of
//! components larger than [`MAX_CYCLE`] are kept as they are.
//!
//! Invariants: the lines [`SharedRules::add`] returns for a grammar, with the lines returned
//! before, hold the grammar's language under the start rule name it returns; only grammars of
//! one rule per line (`name ::= body;`, each name defined once, every name used defined) are
//! taken (others are `None`: the caller renames them whole). Work is linear in the text (and
//! quadratic only within components of at most [`MAX_CYCLE`] rules).

use rustc_hash::FxHashMap;

/// Largest strongly connected component whose rules are shared.
pub const MAX_CYCLE: usize = 64;

/// The classes of the rules written so far (see the module documentation).
#[derive(Default)]
pub struct SharedRules {
    /// Rule bodies with names abstracted → their id.
    templates: FxHashMap<String, u64>,
    /// Key of a rule → its class.
    classes: FxHashMap<Vec<u64>, u64>,
    /// Class (ids are dense, in order of interning) → the name of the rule written for it
    /// (empty: none yet).
    names: Vec<String>,
    /// Classes of rules shared with none (large components).
    pinned: u64,
}

/// One rule of a grammar being added.
struct Rule<'t> {
    name: &'t str,
    body: &'t str,
    /// Byte ranges of the rule names in `body`.
    spans: Vec<(usize, usize)>,
    template: u64,
    /// The rules those names refer to (indices into the grammar's rules).
    refs: Vec<usize>,
}

// Key tags (the high bits of a key's words).
const TAG_TEMPLATE: u64 = 1 << 60;
const TAG_CLASS: u64 = 2 << 60;
const TAG_POSITION: u64 = 3 << 60;
const TAG_CYCLE: u64 = 4 << 60;
const TAG_PINNED: u64 = 5 << 60;

impl SharedRules {
    /// No rules written yet.
    pub fn new() -> SharedRules {
        SharedRules::default()
    }

    /// The rule lines to write for `kbnf` (every rule `n` named `prefix + n` unless an equal
    /// rule was written before) and the name of its start rule `start`; `None` when `kbnf` is
    /// not one rule per line, has no `start`, or uses a name it does not define.
    pub fn add(&mut self, kbnf: &str, prefix: &str) -> Option<(Vec<String>, String)> {
        let mut rules = self.parse(kbnf)?;
        let index: FxHashMap<&str, usize> =
            rules.iter().enumerate().map(|(i, r)| (r.name, i)).collect();
        if index.len() != rules.len() {
            return None; // (a name defined twice)
        }
        let start = *index.get("start")?;
        for r in &mut rules {
            r.refs = r
                .spans
                .iter()
                .map(|&(a, b)| index.get(&r.body[a..b]).copied())
                .collect::<Option<Vec<usize>>>()?;
        }
        let cls = self.hash_cons(&rules);
        self.names.resize(self.classes.len(), String::new());
        let mut written = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            let name = &mut self.names[cls[i] as usize];
            if name.is_empty() {
                name.reserve_exact(prefix.len() + r.name.len());
                name.push_str(prefix);
                name.push_str(r.name);
                written.push(i);
            }
        }
        let lines = written
            .into_iter()
            .map(|i| {
                let r = &rules[i];
                let mut line = String::with_capacity(r.body.len() + 64);
                line.push_str(&self.names[cls[i] as usize]);
                line.push_str(" ::= ");
                let mut at = 0;
                for (k, &(a, b)) in r.spans.iter().enumerate() {
                    line.push_str(&r.body[at..a]);
                    line.push_str(&self.names[cls[r.refs[k]] as usize]);
                    at = b;
                }
                line.push_str(&r.body[at..]);
                line.push(';');
                line
            })
            .collect();
        Some((lines, self.names[cls[start] as usize].clone()))
    }

    /// The rules of a one-rule-per-line grammar, their templates interned (`refs` not yet set).
    fn parse<'t>(&mut self, kbnf: &'t str) -> Option<Vec<Rule<'t>>> {
        let mut rules = Vec::new();
        let mut template = String::new(); // (reused: most templates were seen before)
        for line in kbnf.lines() {
            if line.is_empty() {
                continue;
            }
            let name_end = line
                .bytes()
                .position(|b| !(b.is_ascii_alphanumeric() || b == b'_'))
                .unwrap_or(line.len());
            let name = &line[..name_end];
            if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
                return None;
            }
            let body = line[name_end..].strip_prefix(" ::= ")?.strip_suffix(';')?;
            let spans = scan(body, &mut template)?;
            let template = match self.templates.get(template.as_str()) {
                Some(&id) => id,
                None => {
                    let id = self.templates.len() as u64;
                    self.templates.insert(template.clone(), id);
                    id
                }
            };
            rules.push(Rule {
                name,
                body,
                spans,
                template,
                refs: Vec::new(),
            });
        }
        Some(rules)
    }

    /// The class of `key` (a new one if it was not seen before).
    fn intern(&mut self, key: &[u64]) -> u64 {
        if let Some(&class) = self.classes.get(key) {
            return class;
        }
        let class = self.classes.len() as u64;
        self.classes.insert(key.to_vec(), class);
        class
    }

    /// The class of each rule, by Tarjan's algorithm (iterative), whose components come out
    /// after those they use.
    fn hash_cons(&mut self, rules: &[Rule<'_>]) -> Vec<u64> {
        const UNSEEN: usize = usize::MAX;
        let n = rules.len();
        let mut cls = vec![u64::MAX; n];
        let mut order = vec![UNSEEN; n];
        let mut low = vec![0usize; n];
        let mut on_stack = vec![false; n];
        let mut stack: Vec<usize> = Vec::new();
        let mut counter = 0usize;
        let mut work: Vec<(usize, usize)> = Vec::new();
        let mut key: Vec<u64> = Vec::new(); // (reused)
        for root in 0..n {
            if order[root] != UNSEEN {
                continue;
            }
            work.push((root, 0));
            while let Some(&mut (v, ref mut k)) = work.last_mut() {
                if order[v] == UNSEEN {
                    // (discovered: pushed just now, by the loop above or as a callee below)
                    order[v] = counter;
                    low[v] = counter;
                    counter += 1;
                    stack.push(v);
                    on_stack[v] = true;
                }
                if let Some(&w) = rules[v].refs.get(*k) {
                    *k += 1;
                    if order[w] == UNSEEN {
                        work.push((w, 0));
                    } else if on_stack[w] && order[w] < low[v] {
                        low[v] = order[w];
                    }
                    continue;
                }
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] != order[v] {
                    continue;
                }
                let mut members = Vec::new();
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w] = false;
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                if members.len() == 1 && !rules[v].refs.contains(&v) {
                    key.clear();
                    key.push(TAG_TEMPLATE | rules[v].template);
                    key.extend(rules[v].refs.iter().map(|&r| TAG_CLASS | cls[r]));
                    cls[v] = self.intern(&key);
                } else if members.len() > MAX_CYCLE {
                    for &w in &members {
                        self.pinned += 1;
                        cls[w] = self.intern(&[TAG_PINNED | self.pinned]);
                    }
                } else {
                    let keys: Vec<Vec<u64>> = members
                        .iter()
                        .map(|&w| cycle_key(w, &members, rules, &cls))
                        .collect();
                    for (&w, key) in members.iter().zip(keys) {
                        cls[w] = self.intern(&key);
                    }
                }
            }
        }
        cls
    }
}

/// The key of a rule on a cycle: its component walked from it breadth first (names in body
/// order), each rule as its template and, per name, the walk position of a rule of the
/// component or the class of a rule outside it.
fn cycle_key(root: usize, members: &[usize], rules: &[Rule<'_>], cls: &[u64]) -> Vec<u64> {
    let mut pos: FxHashMap<usize, u64> = FxHashMap::default();
    pos.insert(root, 0);
    let mut walk = vec![root];
    let mut key = vec![TAG_CYCLE];
    let mut i = 0;
    while i < walk.len() {
        let v = walk[i];
        i += 1;
        key.push(TAG_TEMPLATE | rules[v].template);
        for &r in &rules[v].refs {
            if members.contains(&r) {
                let next = walk.len() as u64;
                let p = *pos.entry(r).or_insert_with(|| {
                    walk.push(r);
                    next
                });
                key.push(TAG_POSITION | p);
            } else {
                key.push(TAG_CLASS | cls[r]);
            }
        }
    }
    key
}

/// The byte ranges of a rule body's names, with its template written into `template` (the body
/// with each rule name left out; the items that are no name, literals, regexes, comments and
/// special nonterminals, are self-delimiting, so the template and the names' places determine
/// the body); `None` when the body holds something that is no part of one rule (an
/// unterminated item, `;`, `::=`, NUL).
fn scan(body: &str, template: &mut String) -> Option<Vec<(usize, usize)>> {
    let b = body.as_bytes();
    template.clear();
    let mut spans = Vec::new();
    let mut i = 0;
    let mut copied = 0; // (bytes of `body` before it are in `template` or left out)
    while i < b.len() {
        let c = b[i];
        let quoted = |open: usize, q: u8| -> Option<usize> {
            // The end (past the closing quote) of a quoted item whose quote is at `open`.
            let mut j = open + 1;
            while j < b.len() {
                match b[j] {
                    b'\\' if j + 1 < b.len() => j += 2,
                    x if x == q => return Some(j + 1),
                    _ => j += 1,
                }
            }
            None
        };
        if c == b'\'' || c == b'"' {
            i = quoted(i, c)?;
        } else if c == b'#' && b.get(i + 1) == Some(&b'"') {
            i = quoted(i + 1, b'"')?;
        } else if c == b'(' && b.get(i + 1) == Some(&b'*') {
            i = i + 2 + body[i + 2..].find("*)")? + 2;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            if b.get(j) == Some(&b'!') {
                i = j + 1; // (a special nonterminal: kept)
            } else {
                template.push_str(&body[copied..i]);
                template.push('\0');
                copied = j;
                spans.push((i, j));
                i = j;
            }
        } else if c == b';' || c == 0 || (c == b':' && body[i..].starts_with("::=")) {
            return None;
        } else {
            i += 1;
        }
    }
    template.push_str(&body[copied..]);
    Some(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_rules_are_written_once() {
        let mut s = SharedRules::new();
        let (a, start_a) = s
            .add("start ::= a;\na ::= '(' a ')' | 'x';\nw ::= 'w';\n", "g1_")
            .unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(start_a, "g1_start");
        let (b, start_b) = s
            .add("start ::= b;\nb ::= '(' b ')' | 'y';\nw ::= 'w';\n", "g2_")
            .unwrap();
        assert_eq!(start_b, "g2_start");
        assert_eq!(b, ["g2_start ::= g2_b;", "g2_b ::= '(' g2_b ')' | 'y';"]);
        let (c, start_c) = s
            .add(
                "start ::= c;\nc ::= '(' c ')' | 'x';\nq ::= 'w' c;\n",
                "g3_",
            )
            .unwrap();
        assert_eq!(start_c, "g1_start");
        assert_eq!(c, ["g3_q ::= 'w' g1_a;"]);
    }

    #[test]
    fn other_shapes_are_declined() {
        let mut s = SharedRules::new();
        for text in [
            "start ::= 'x'\n  | 'y';\n",
            "start ::= missing;\n",
            "start ::= 'a'; b ::= 'b';\n",
            "start ::= 'a;\n",
            "start ::= 'a';\nstart ::= 'b';\n",
            "a ::= 'a';\n",
            "start ::= (* open;\n",
        ] {
            assert!(s.add(text, "g_").is_none(), "{text}");
        }
        // (names inside items are no names; specials and comments are kept)
        let (lines, _) = s
            .add(
                "start ::= 'a b' #\"c\\\"d\" (* e *) json_string_except!('f') x;\nx ::= '';\n",
                "p_",
            )
            .unwrap();
        assert_eq!(
            lines[0],
            "p_start ::= 'a b' #\"c\\\"d\" (* e *) json_string_except!('f') p_x;"
        );
    }
}
