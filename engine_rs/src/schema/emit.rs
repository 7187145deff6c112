//! Nodes → KBNF rules → text, in the Python translator's order and names (compact layout).
//!
//! This follows `structout/schema/_emit` step for step for the node kinds of the subset: rule
//! names come from the same hints with the same suffixes (`fresh`), identical terminals share one
//! rule (`shared`), rules are kept in insertion order, nested values are emitted before the rule
//! that uses them, and the same pruning pass drops rules without a derivation.

use rustc_hash::{FxHashMap, FxHashSet};

use super::common_shape::{Node, NodeId, Nodes, MAX_MEMBERS};
use super::formats::FORMATS;
use super::numbers::quant;
use crate::dfa::{JSON_CHAR, JSON_INTEGER, JSON_NUMBER};

/// Objects with more named members than this use [`Emitter::object_tree`] (the Python
/// translator's `TREE_MIN_MEMBERS`).
const TREE_MIN_MEMBERS: usize = 24;

/// A symbol of an alternative: a rule name, a quoted literal, a terminal, or a repetition of
/// symbols (`(…)*`).
#[derive(Clone)]
enum Sym {
    Text(String),
    Star(Vec<Sym>),
    /// `(…){lo,hi}` (`hi`: `None` for unbounded), printed as the Python translator's
    /// `render_sym` does.
    Rep(Vec<Sym>, u64, Option<u64>),
}

fn t(s: &str) -> Sym {
    Sym::Text(s.to_owned())
}

/// The rule names the Python translator writes without `fresh` in the compact layout
/// (`structout/schema/_emit/emitter.py`, `fixed_names`; `tests/test_schema_fast_path.py`
/// compares the two): taken first, so that no hint (a
/// definition named `boolean` or `start`, say) gets one and replaces or borrows that rule.
pub const FIXED_NAMES: &[&str] = &[
    "start",
    "ws",
    "boolean",
    "rx_string",
    "rx_body",
    "rx_alt",
    "rx_term",
    "rx_atom",
    "rx_quant",
    "rx_esc",
    "rx_class",
    "rx_item",
    "rx_cesc",
    "rx_hex",
    "json_value",
    "json_object",
    "json_array",
    "json_member",
];

const GENERIC_STRING: &str = "json_string_except!()";
/// Largest `maxLength` written as a regex repetition (the Python translator's `SHORT_BOUND`):
/// a string of at most that many characters is one terminal, a larger bound is `json_len!`.
const SHORT_BOUND: u64 = 8;

/// One rule: its distinct alternatives, printed, and the names each one uses.
struct Rule {
    texts: Vec<String>,
    refs: Vec<Vec<String>>,
}

pub(super) struct Emitter<'a> {
    nodes: &'a Nodes,
    max_number_length: Option<u32>,
    /// Rules in insertion order (`index` finds them by name).
    rules: Vec<(String, Rule)>,
    index: FxHashMap<String, usize>,
    /// Printed single-alternative rules shared by every identical use → their name.
    shared: FxHashMap<String, String>,
    counter: FxHashMap<String, u32>,
    /// The names handed out by `fresh` (besides [`FIXED_NAMES`], which are taken from the
    /// start).
    used: FxHashSet<String>,
    memo: FxHashMap<NodeId, String>,
    generic_done: bool,
    /// Arrays and objects being emitted (references make this deeper than any one subschema).
    nest: usize,
    too_deep: bool,
}

/// Deepest nesting of arrays and objects being emitted on the fast path (the Python translator
/// stops at `max_schema_depth`, 256 by default: the fast path declines before).
const MAX_NEST: usize = 200;

impl<'a> Emitter<'a> {
    pub(super) fn new(nodes: &'a Nodes, max_number_length: Option<u32>) -> Emitter<'a> {
        // (sized for the rules a schema of this many nodes usually has: a tool's parameters
        // are a few dozen nodes, and growing each map step by step costs more than the rules)
        let rules = 2 * nodes.nodes.len() + 8;
        Emitter {
            nodes,
            max_number_length: max_number_length.filter(|&n| n > 0),
            rules: Vec::with_capacity(rules),
            index: FxHashMap::with_capacity_and_hasher(rules, Default::default()),
            shared: FxHashMap::with_capacity_and_hasher(rules, Default::default()),
            counter: FxHashMap::with_capacity_and_hasher(rules, Default::default()),
            // (the fixed names are taken too: `fresh` checks them apart)
            used: FxHashSet::with_capacity_and_hasher(rules, Default::default()),
            memo: FxHashMap::with_capacity_and_hasher(nodes.nodes.len(), Default::default()),
            generic_done: false,
            nest: 0,
            too_deep: false,
        }
    }

    /// The KBNF text, or `None` when the schema has no value at all or nests deeper than the
    /// fast path goes.
    pub(super) fn run(mut self) -> Option<String> {
        let root = self.value(self.nodes.root);
        self.add_rule("start", vec![vec![Sym::Text(root)]]);
        if self.too_deep {
            return None;
        }
        self.prune()?;
        Some(self.render())
    }

    // ------------------------------------------------------------------ rules

    /// The hint's rule name, else it with the first free suffix `_n`.
    fn fresh(&mut self, hint: &str) -> String {
        let mut n = self.counter.get(hint).copied().unwrap_or(0);
        let mut name = if n == 0 {
            hint.to_owned()
        } else {
            format!("{hint}_{n}")
        };
        while self.used.contains(&name) || FIXED_NAMES.contains(&name.as_str()) {
            n += 1;
            name = format!("{hint}_{n}");
        }
        match self.counter.get_mut(hint) {
            Some(next) => *next = n + 1,
            None => {
                self.counter.insert(hint.to_owned(), n + 1);
            }
        }
        self.used.insert(name.clone());
        name
    }

    fn add_rule(&mut self, name: &str, alts: Vec<Vec<Sym>>) {
        let mut rule = Rule {
            texts: Vec::new(),
            refs: Vec::new(),
        };
        for alt in &alts {
            let text = render_alt(alt);
            if !rule.texts.contains(&text) {
                rule.texts.push(text);
                let mut names = Vec::new();
                alt_refs(alt, &mut names);
                rule.refs.push(names);
            }
        }
        self.put(name, rule);
    }

    fn put(&mut self, name: &str, rule: Rule) {
        match self.index.get(name) {
            Some(&i) => self.rules[i].1 = rule,
            None => {
                self.index.insert(name.to_owned(), self.rules.len());
                self.rules.push((name.to_owned(), rule));
            }
        }
    }

    /// A rule of one alternative, shared by every identical alternative (named after the first
    /// hint).
    fn shared_rule(&mut self, alt: Vec<Sym>, hint: &str) -> String {
        let text = render_alt(&alt);
        if let Some(name) = self.shared.get(&text) {
            return name.clone();
        }
        let name = self.fresh(hint);
        self.shared.insert(text.clone(), name.clone());
        let mut names = Vec::new();
        alt_refs(&alt, &mut names);
        self.put(
            &name,
            Rule {
                texts: vec![text],
                refs: vec![names],
            },
        );
        name
    }

    fn terminal(&mut self, regex: &str, hint: &str) -> String {
        self.shared_rule(vec![Sym::Text(format!("#\"{regex}\""))], hint)
    }

    // ------------------------------------------------------------------ values

    fn value(&mut self, id: NodeId) -> String {
        if let Some(s) = self.memo.get(&id) {
            return s.clone();
        }
        let node = &self.nodes.nodes[id as usize];
        if matches!(node, Node::Array { .. } | Node::Object { .. }) {
            if self.nest >= MAX_NEST {
                self.too_deep = true;
                return "''".to_owned();
            }
            self.nest += 1;
        }
        let sym = match node {
            Node::Any => self.generic_value(),
            Node::Ref(_) => {
                let (hint, target) = &self.nodes.refs[&id];
                let name = self.fresh(hint);
                self.memo.insert(id, name.clone());
                let body = self.value(*target);
                self.add_rule(&name, vec![vec![Sym::Text(body)]]);
                name
            }
            Node::Null => "'null'".to_owned(),
            Node::Boolean => {
                if !self.index.contains_key("boolean") {
                    self.add_rule("boolean", vec![vec![t("'true'")], vec![t("'false'")]]);
                }
                "boolean".to_owned()
            }
            Node::Integer => {
                let hint = if self.nodes.draft4 { "num" } else { "integer" };
                self.number(JSON_INTEGER, hint)
            }
            Node::Bounded(regex) => self.number(regex, "num"),
            Node::Number => self.number(JSON_NUMBER, "number"),
            Node::String => self.generic_string(),
            Node::StrLen { min, max } => self.bounded_string(*min, *max),
            Node::Enum { regex, .. } => self.terminal(regex, "str"),
            Node::Format(f) => self.shared_rule(vec![t(FORMATS[*f as usize].1)], "str"),
            Node::Pattern(rule) => self.shared_rule(vec![t(rule)], "str"),
            Node::Array { item, min, max } => {
                let (item, min, max) = (*item, *min, *max);
                let name = self.fresh("array");
                self.memo.insert(id, name.clone());
                let rest = self.value(item);
                self.add_rule(&name, bounded_listing(&rest, min, max));
                name
            }
            Node::Union(parts) => {
                let alts: Vec<Vec<Sym>> = parts
                    .iter()
                    .map(|&p| vec![Sym::Text(self.value(p))])
                    .collect();
                let name = self.fresh("any_of");
                self.add_rule(&name, alts);
                name
            }
            Node::Object {
                props,
                required,
                others,
                ..
            } => self.object(id, props, required, *others),
        };
        if matches!(node, Node::Array { .. } | Node::Object { .. }) {
            self.nest -= 1;
        }
        self.memo.insert(id, sym.clone());
        sym
    }

    fn number(&mut self, regex: &str, hint: &str) -> String {
        match self.max_number_length {
            None => self.terminal(regex, hint),
            Some(n) => {
                self.shared_rule(vec![Sym::Text(format!("len!(#\"{regex}\", 1, {n})"))], hint)
            }
        }
    }

    /// A string of `min` to `max` characters (not any string), as the Python translator's
    /// `StringRules.string` writes it: with a `maxLength` over [`SHORT_BOUND`] the engine's
    /// `json_len!` around any string body (`counted_chars`), else one terminal, quotes included,
    /// of the counted repetition of a character (`""` for `maxLength: 0`).
    fn bounded_string(&mut self, min: u64, max: Option<u64>) -> String {
        match max {
            Some(hi) if hi > SHORT_BOUND => {
                let body = format!("json_len!(#\"{JSON_CHAR}*\", {min}, {hi})");
                self.shared_rule(vec![t("'\"'"), Sym::Text(body), t("'\"'")], "str")
            }
            Some(0) => self.terminal(r"\x22\x22", "str"),
            Some(1) if min == 1 => self.terminal(&format!(r"\x22{JSON_CHAR}\x22"), "str"),
            _ => {
                let q = quant(min, max);
                self.terminal(&format!(r"\x22{JSON_CHAR}{q}\x22"), "str")
            }
        }
    }

    fn generic_string(&mut self) -> String {
        self.shared_rule(vec![t(GENERIC_STRING)], "json_string")
    }

    /// Any JSON value: the `json_*` rules, once.
    fn generic_value(&mut self) -> String {
        if !self.generic_done {
            self.generic_done = true;
            let string = self.generic_string();
            let number = self.number(JSON_NUMBER, "json_number");
            let (s, n) = (Sym::Text(string), Sym::Text(number));
            self.add_rule("json_object", listing('{', "json_member"));
            self.add_rule(
                "json_member",
                vec![vec![s.clone(), t("': '"), t("json_value")]],
            );
            self.add_rule("json_array", listing('[', "json_value"));
            self.add_rule(
                "json_value",
                vec![
                    vec![t("json_object")],
                    vec![t("json_array")],
                    vec![s],
                    vec![n],
                    vec![t("'true'")],
                    vec![t("'false'")],
                    vec![t("'null'")],
                ],
            );
        }
        "json_value".to_owned()
    }

    /// An object: `{`, the named members in order (optional ones may be left out), then any
    /// other keys when allowed, `}` (the Python translator's member chain).
    fn object(
        &mut self,
        id: NodeId,
        props: &[(String, NodeId)],
        required: &[String],
        others: Option<NodeId>,
    ) -> String {
        debug_assert!(props.len() <= MAX_MEMBERS);
        let name = self.fresh("object");
        self.memo.insert(id, name.clone());
        let mut members = Vec::with_capacity(props.len());
        for (k, v) in props {
            let sym = self.value(*v);
            members.push((format!("'\"{k}\"'"), sym, required.contains(k)));
        }
        let mut region_items = Vec::new();
        if let Some(others) = others {
            let key = if props.is_empty() {
                self.generic_string()
            } else {
                let mut words: Vec<&str> = props.iter().map(|(k, _)| k.as_str()).collect();
                words.sort_unstable();
                words.dedup();
                let list: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
                self.shared_rule(
                    vec![Sym::Text(format!(
                        "json_string_except!({})",
                        list.join(", ")
                    ))],
                    "key",
                )
            };
            let value = self.value(others);
            region_items.push(vec![Sym::Text(key), t("': '"), Sym::Text(value)]);
        }
        let out = if members.len() > TREE_MIN_MEMBERS {
            self.object_tree(&members, region_items, &name)
        } else {
            let start = self.object_chain(&members, region_items, &name);
            let mut out = Vec::new();
            if !members.iter().any(|m| m.2) {
                out.push(vec![t("'{}'")]);
            }
            out.push(vec![t("'{'"), Sym::Text(start), t("'}'")]);
            out
        };
        self.add_rule(&name, out);
        name
    }

    /// The rule of one other key and its value (`None`: no other keys).
    fn other_keys_rule(&mut self, region_items: Vec<Vec<Sym>>, base: &str) -> Option<String> {
        if region_items.is_empty() {
            return None;
        }
        let kv = self.fresh(&format!("{base}_kv"));
        self.add_rule(&kv, region_items);
        Some(kv)
    }

    /// The alternatives of an object with many members: after member `i` the next one is
    /// picked from the segment-tree nodes covering the members allowed next (up to the next
    /// required one), as the Python translator's `_object_tree` builds them (rules linear in
    /// the members, normalized grammars of O(n log n) symbols).
    fn object_tree(
        &mut self,
        members: &[(String, String, bool)],
        region_items: Vec<Vec<Sym>>,
        base: &str,
    ) -> Vec<Vec<Sym>> {
        let n = members.len();
        // The first required member at index >= i (n: none).
        let mut next_req = vec![n; n + 1];
        for i in (0..n).rev() {
            next_req[i] = if members[i].2 { i } else { next_req[i + 1] };
        }
        let item = self.other_keys_rule(region_items, base);
        let mut tree = TreeStates {
            n,
            pick_hint: format!("{base}_p"),
            after_hint: format!("{base}_a"),
            picks: FxHashMap::default(),
            after: FxHashMap::default(),
            todo: Vec::new(),
        };
        let choices = |i: usize| -> Vec<(usize, usize)> {
            let hi = (next_req[i] + 1).min(n);
            let mut out = Vec::new();
            if i < hi {
                cover(i, hi, 0, n, &mut out);
            }
            out
        };
        let mut out = Vec::new();
        if next_req[0] == n {
            out.push(vec![t("'{}'")]);
            if let Some(kv) = &item {
                out.push(vec![t("'{'"), Sym::Text(kv.clone()), more_of(kv), t("'}'")]);
            }
        }
        for (a, b) in choices(0) {
            out.push(vec![t("'{'"), Sym::Text(tree.pick(self, a, b)), t("'}'")]);
        }
        while let Some((is_pick, a, b)) = tree.todo.pop() {
            let (name, alts) = if is_pick {
                let alts = if b - a == 1 {
                    let (lit, sym, _) = &members[a];
                    let after = tree.after_of(self, a + 1);
                    vec![vec![
                        Sym::Text(lit.clone()),
                        t("': '"),
                        Sym::Text(sym.clone()),
                        Sym::Text(after),
                    ]]
                } else {
                    let m = (a + b) / 2;
                    vec![
                        vec![Sym::Text(tree.pick(self, a, m))],
                        vec![Sym::Text(tree.pick(self, m, b))],
                    ]
                };
                (tree.picks[&(a, b)].clone(), alts)
            } else {
                let i = a;
                let mut alts: Vec<Vec<Sym>> = choices(i)
                    .into_iter()
                    .map(|(c, d)| vec![t("', '"), Sym::Text(tree.pick(self, c, d))])
                    .collect();
                if next_req[i] == n {
                    alts.push(vec![t("''")]);
                    if let Some(kv) = &item {
                        alts.push(vec![t("', '"), Sym::Text(kv.clone()), more_of(kv)]);
                    }
                }
                (tree.after[&i].clone(), alts)
            };
            self.add_rule(&name, alts);
        }
        out
    }

    /// The chain of states `(i, first)` before named member `i` (`i == n`: the other keys),
    /// named and built from a stack as the Python translator's `_object_chain` does.
    fn object_chain(
        &mut self,
        members: &[(String, String, bool)],
        region_items: Vec<Vec<Sym>>,
        base: &str,
    ) -> String {
        let n = members.len();
        let item = self.other_keys_rule(region_items, base);
        let mut states = ChainStates {
            n,
            hint: format!("{base}_m"),
            names: FxHashMap::default(),
            todo: Vec::new(),
        };
        let start = states.name(self, (0, true));
        while let Some(key) = states.todo.pop() {
            let (i, first) = key;
            let alts = if i < n {
                let (lit, sym, required) = &members[i];
                let next = states.name(self, (i + 1, false));
                let mut alt = if first { vec![] } else { vec![t("', '")] };
                alt.extend([
                    Sym::Text(lit.clone()),
                    t("': '"),
                    Sym::Text(sym.clone()),
                    Sym::Text(next),
                ]);
                let mut alts = vec![alt];
                if !required {
                    alts.push(vec![Sym::Text(states.name(self, (i + 1, first)))]);
                }
                alts
            } else if let Some(kv) = &item {
                if first {
                    vec![vec![Sym::Text(kv.clone()), more_of(kv)]]
                } else {
                    vec![vec![more_of(kv)]]
                }
            } else if first {
                vec![]
            } else {
                vec![vec![t("''")]]
            };
            let name = states.names[&key].clone();
            self.add_rule(&name, alts);
        }
        start
    }

    // ------------------------------------------------------------------ pruning, printing

    /// Drops the alternatives that use a rule without a derivation and the rules not reachable
    /// from `start`; `None` when `start` itself has no derivation.
    fn prune(&mut self) -> Option<()> {
        // Per rule, per alternative: the rules it uses (a name that is no rule, e.g.
        // `json_string_except!()`, is a terminal: alive), looked up once.
        let deps: Vec<Vec<Vec<usize>>> = (self.rules.iter())
            .map(|(_, rule)| {
                (rule.refs.iter())
                    .map(|names| {
                        let mut need: Vec<usize> = (names.iter())
                            .filter_map(|d| self.index.get(d).copied())
                            .collect();
                        need.sort_unstable();
                        need.dedup();
                        need
                    })
                    .collect()
            })
            .collect();
        let productive = productive(&deps);
        let start = self.index["start"];
        if !productive[start] {
            return None;
        }
        let alive = |need: &[usize]| need.iter().all(|&j| productive[j]);
        let mut reach = vec![false; self.rules.len()];
        reach[start] = true;
        let mut stack = vec![start];
        while let Some(i) = stack.pop() {
            for need in deps[i].iter().filter(|need| alive(need)) {
                for &j in need {
                    if !reach[j] {
                        reach[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        let mut kept = Vec::with_capacity(self.rules.len());
        for (i, (name, mut rule)) in std::mem::take(&mut self.rules).into_iter().enumerate() {
            if !reach[i] {
                continue;
            }
            let keep: Vec<bool> = deps[i].iter().map(|need| alive(need)).collect();
            if keep.iter().all(|&k| k) {
                kept.push((name, rule));
                continue;
            }
            let (mut k, mut r) = (keep.iter(), keep.iter());
            rule.texts.retain(|_| *k.next().unwrap_or(&false));
            rule.refs.retain(|_| *r.next().unwrap_or(&false));
            kept.push((name, rule));
        }
        self.rules = kept;
        self.index = (self.rules.iter().enumerate())
            .map(|(i, (name, _))| (name.clone(), i))
            .collect();
        Some(())
    }

    /// The rules, `start` first, then the others in insertion order (rules left without
    /// alternatives are not printed).
    fn render(&self) -> String {
        let start = self.index["start"];
        let size: usize = (self.rules.iter())
            .map(|(name, rule)| {
                name.len() + 8 + rule.texts.iter().map(|t| t.len() + 3).sum::<usize>()
            })
            .sum();
        let mut out = String::with_capacity(size);
        let mut line = |name: &str, rule: &Rule| {
            if !rule.texts.is_empty() {
                out.push_str(name);
                out.push_str(" ::= ");
                for (k, text) in rule.texts.iter().enumerate() {
                    if k > 0 {
                        out.push_str(" | ");
                    }
                    out.push_str(text);
                }
                out.push_str(";\n");
            }
        };
        line("start", &self.rules[start].1);
        for (i, (name, rule)) in self.rules.iter().enumerate() {
            if i != start {
                line(name, rule);
            }
        }
        if out.is_empty() {
            out.push('\n');
        }
        out
    }
}

/// Per rule: whether it derives some text, from the rules each alternative uses (`deps[i][a]`,
/// deduplicated). The least fixed point, by a worklist over the alternatives still waiting for
/// rules (references make rules use themselves).
fn productive(deps: &[Vec<Vec<usize>>]) -> Vec<bool> {
    let n = deps.len();
    let mut productive = vec![false; n];
    let mut queue = Vec::new();
    // Per rule: the alternatives waiting for it, as (rule, alternative) indices.
    let mut users: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    let mut missing: Vec<Vec<usize>> = Vec::with_capacity(n);
    for (i, alts) in deps.iter().enumerate() {
        let mut counts = Vec::with_capacity(alts.len());
        for (a, need) in alts.iter().enumerate() {
            for &j in need {
                users[j].push((i, a));
            }
            counts.push(need.len());
            if need.is_empty() && !productive[i] {
                productive[i] = true;
                queue.push(i);
            }
        }
        missing.push(counts);
    }
    while let Some(j) = queue.pop() {
        for &(i, a) in &users[j] {
            missing[i][a] -= 1;
            if missing[i][a] == 0 && !productive[i] {
                productive[i] = true;
                queue.push(i);
            }
        }
    }
    productive
}

fn render_alt(alt: &[Sym]) -> String {
    let mut out = String::new();
    write_alt(alt, &mut out);
    out
}

/// [`render_alt`] into `out`.
fn write_alt(alt: &[Sym], out: &mut String) {
    if alt.is_empty() {
        out.push_str("''");
        return;
    }
    for (k, s) in alt.iter().enumerate() {
        if k > 0 {
            out.push(' ');
        }
        match s {
            Sym::Text(x) => out.push_str(x),
            Sym::Star(seq) => {
                out.push('(');
                write_alt(seq, out);
                out.push_str(")*");
            }
            Sym::Rep(seq, lo, hi) => {
                out.push('(');
                write_alt(seq, out);
                out.push(')');
                out.push_str(&quant(*lo, *hi));
            }
        }
    }
}

/// An empty `{}`/`[]`, or the bracket, `item`, any more `, item`, the closing bracket (the
/// compact layout's object members and array items).
fn listing(open: char, item: &str) -> Vec<Vec<Sym>> {
    let close = if open == '{' { '}' } else { ']' };
    vec![
        vec![Sym::Text(format!("'{open}{close}'"))],
        vec![
            Sym::Text(format!("'{open}'")),
            t(item),
            more_of(item),
            Sym::Text(format!("'{close}'")),
        ],
    ]
}

/// An array of `min` to `max` items (`min <= max`), as the Python translator's `array` writes
/// it: `'[]'` when empty is allowed, then `'['`, the first item, the others as a counted
/// repetition of `', ' item`, `']'`.
fn bounded_listing(item: &str, min: u64, max: Option<u64>) -> Vec<Vec<Sym>> {
    let mut alts = Vec::new();
    if min == 0 {
        alts.push(vec![t("'[]'")]);
    }
    if max.is_none_or(|m| m > 0) {
        let lo = min.max(1) - 1;
        let hi = max.map(|m| m - 1);
        let mut alt = vec![t("'['"), t(item)];
        if hi != Some(0) {
            alt.push(Sym::Rep(vec![t("', '"), t(item)], lo, hi));
        }
        alt.push(t("']'"));
        alts.push(alt);
    }
    alts
}

/// `(', ' kv)*`: any more of an object's other keys.
fn more_of(kv: &str) -> Sym {
    Sym::Star(vec![t("', '"), t(kv)])
}

/// The names an alternative uses (every symbol that is not a literal or a terminal).
fn alt_refs(alt: &[Sym], out: &mut Vec<String>) {
    for s in alt {
        match s {
            Sym::Text(x) if !x.starts_with(['\'', '"', '#']) => out.push(x.clone()),
            Sym::Text(_) => {}
            Sym::Star(seq) | Sym::Rep(seq, ..) => alt_refs(seq, out),
        }
    }
}

/// The states of an object's member chain, named on first use and queued to be built.
struct ChainStates {
    n: usize,
    hint: String,
    names: FxHashMap<(usize, bool), String>,
    todo: Vec<(usize, bool)>,
}

impl ChainStates {
    /// The rule name of state `key` (after the last member: the other keys' state itself).
    fn name(&mut self, e: &mut Emitter<'_>, mut key: (usize, bool)) -> String {
        if key.0 == self.n {
            key = (self.n + 1, key.1);
        }
        if let Some(name) = self.names.get(&key) {
            return name.clone();
        }
        let name = e.fresh(&self.hint);
        self.names.insert(key, name.clone());
        self.todo.push(key);
        name
    }
}

/// The segment-tree nodes `[a', b')` of `[a, b)` that partition `[lo, hi)` (`lo < hi`).
fn cover(lo: usize, hi: usize, a: usize, b: usize, out: &mut Vec<(usize, usize)>) {
    if lo <= a && b <= hi {
        out.push((a, b));
        return;
    }
    let m = (a + b) / 2;
    if lo < m {
        cover(lo, hi, a, m, out);
    }
    if hi > m {
        cover(lo, hi, m, b, out);
    }
}

/// The rules of an object tree, named on first use and queued to be built: `pick[a, b)` (one
/// member of `[a, b)` and what follows it) and `after[i]` (the state after member `i - 1`).
struct TreeStates {
    n: usize,
    pick_hint: String,
    after_hint: String,
    picks: FxHashMap<(usize, usize), String>,
    after: FxHashMap<usize, String>,
    /// (whether a pick, a, b): picks `[a, b)`, afters `i = a`.
    todo: Vec<(bool, usize, usize)>,
}

impl TreeStates {
    fn pick(&mut self, e: &mut Emitter<'_>, a: usize, b: usize) -> String {
        if let Some(name) = self.picks.get(&(a, b)) {
            return name.clone();
        }
        let name = e.fresh(&self.pick_hint);
        self.picks.insert((a, b), name.clone());
        self.todo.push((true, a, b));
        name
    }

    fn after_of(&mut self, e: &mut Emitter<'_>, i: usize) -> String {
        debug_assert!(i <= self.n);
        if let Some(name) = self.after.get(&i) {
            return name.clone();
        }
        let name = e.fresh(&self.after_hint);
        self.after.insert(i, name.clone());
        self.todo.push((false, i, 0));
        name
    }
}
