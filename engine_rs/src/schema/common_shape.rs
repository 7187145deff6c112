//! The subset of JSON Schema the fast path translates, as interned nodes.
//!
//! A schema is in the subset when every subschema is `true`, `{}` (annotations only), a local
//! `$ref` (see [`local_pointer`]) or an `anyOf` of branches of different kinds with nothing but
//! annotations beside it, or has a `type` (or a
//! list of types) of `null`, `boolean`, `integer` or `number` (each optionally bounded by
//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` of integer values; not both in
//! one type list with bounds),
//! `string` (optionally an `enum` of words JSON spells one way, or `minLength`/`maxLength`: see
//! [`string_lengths`]), `array` (optionally `items`:
//! one subschema, and `minItems`/`maxItems`) or `object`
//! (optionally `properties`, `required` naming listed properties, `additionalProperties`: a
//! boolean or a subschema; properties with plain ASCII names). The
//! document may keep `definitions`/`$defs` and `$schema` (drafts 4 to 2020-12). Keywords that
//! assert nothing (annotations such as `title` or `description`, unknown ones) are ignored, as
//! by the Python translator. Any other keyword, value or shape declines.
//!
//! Invariants: nodes are interned by their meaning (annotations and `required`'s order aside),
//! as the Python translator's IR is, so equal subschemas share one node and hence one rule; a
//! reference is a node of its own (one rule named after its target), resolved once, after the
//! schemas that use it, so recursive definitions stay finite.

use rustc_hash::FxHashMap;

use super::enums::enum_regex;
use super::numbers::{integer_regex, number_regex, tighter_hi, tighter_lo, Bound};

/// A JSON value, as the bindings hand a schema over. A number carries its value when it is an
/// integer (`10` or `10.0`) of at most 2^53 in magnitude, else none (the subset reads only such
/// values); `Other` is anything that is not JSON data (the schema then declines wherever it
/// matters).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number: its value when an integer of at most 2^53 in magnitude.
    Number(Option<i64>),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, its members in order.
    Object(Vec<(String, Json)>),
    /// Not JSON data.
    Other,
}

/// Index of a node in [`Nodes`].
pub(super) type NodeId = u32;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Node {
    Any,
    Null,
    Boolean,
    Integer,
    /// An integer or a number between bounds: its printed regex (see [`integer_regex`],
    /// [`number_regex`]).
    Bounded(String),
    Number,
    String,
    /// A string of `min` to `max` (`None`: any) characters, not just any string (see
    /// [`string_lengths`]).
    StrLen {
        min: u64,
        max: Option<u64>,
    },
    /// A string enum: its distinct words in schema order, and their regex.
    Enum {
        words: Vec<String>,
        regex: String,
    },
    /// An array of items of a node, between `min` and `max` (`None`: any) many.
    Array {
        item: NodeId,
        min: u64,
        max: Option<u64>,
    },
    /// Values of any of the parts (at least two, of different kinds: a type list's in
    /// [`Type::rank`] order, an `anyOf`'s in its order).
    Union(Vec<NodeId>),
    /// A reference, by its JSON pointer (`""` the document, `/definitions/x`, `/$defs/x`): one
    /// rule named after its last segment (see [`Nodes::refs`]).
    Ref(String),
    Object {
        /// Properties in schema order.
        props: Vec<(String, NodeId)>,
        /// Required names, sorted.
        required: Vec<String>,
        /// The values of other keys (`None`: no other keys).
        others: Option<NodeId>,
    },
}

/// The nodes of one schema; the root is the last one interned.
pub(super) struct Nodes {
    pub(super) nodes: Vec<Node>,
    /// The document: a reference to `#`.
    pub(super) root: NodeId,
    /// Per reference node: its rule name hint and the node it resolves to (references to
    /// schemas that are themselves only a reference followed to the end, as the Python
    /// translator resolves them).
    pub(super) refs: FxHashMap<NodeId, (String, NodeId)>,
    /// Draft 4 (`$schema`): its integers are lexical (`1.0` is none), named apart.
    pub(super) draft4: bool,
}

/// Most properties of an object on the fast path.
pub(super) const MAX_MEMBERS: usize = 2048;
/// Deepest nesting of subschemas on the fast path.
const MAX_DEPTH: usize = 48;
/// Most subschemas on the fast path.
const MAX_SUBSCHEMAS: usize = 4096;
/// Longest enum word (an enum is printed as one regex terminal).
const MAX_WORD: usize = 256;
/// Most enum words.
const MAX_WORDS: usize = 1024;
/// Largest `maxLength` on the fast path: the Python translator's `MAX_ENGINE_LENGTH` (above it,
/// `json_len!` is not used and the repetition becomes rules).
const MAX_ENGINE_LENGTH: u64 = 1 << 20;
/// Largest `minLength` without a `maxLength` on the fast path (`"c{n,}"` is one terminal up to
/// n = 92 under the translator's regex budgets; a margin below).
const MAX_OPEN_MIN_LENGTH: u64 = 64;

/// The keywords that assert something or locate schemas in any draft of JSON Schema (3 to
/// 2020-12), the translator's legacy ones included: a superset of what the Python translator
/// enforces (`tests/test_schema_fast_path.py` checks that its lists are included). The fast path
/// translates fourteen of them (`type`, `enum`, `properties`, `required`, `additionalProperties`,
/// `items`, the number bounds, the array lengths and the string lengths) and declines a schema with any other; a keyword not listed is an annotation or
/// unknown, and ignored as JSON Schema prescribes (and the Python translator does), except
/// unknown `$` keywords, which decline too.
pub const ASSERTING: &[&str] = &[
    // validation
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    // applicators
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependencies",
    "prefixItems",
    "items",
    "additionalItems",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
    // draft 3
    "disallow",
    "extends",
    "divisibleBy",
    // references and the schemas they find
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$defs",
    "definitions",
    "$vocabulary",
    "$schema",
];

/// `$schema` values the fast path accepts (drafts whose keywords of the subset mean the same).
const DIALECTS: &[&str] = &[
    "http://json-schema.org/draft-04/schema#",
    "http://json-schema.org/draft-04/schema",
    "http://json-schema.org/draft-06/schema#",
    "http://json-schema.org/draft-06/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "https://json-schema.org/draft/2020-12/schema",
];

impl Nodes {
    /// The nodes of `schema`, or `None` when it is outside the subset.
    pub(super) fn of(schema: &Json) -> Option<Nodes> {
        let mut b = Builder {
            nodes: Vec::new(),
            index: FxHashMap::default(),
            seen: 0,
            queue: Vec::new(),
            has_ref: false,
            nested_id: false,
        };
        let mut draft4 = false;
        if let Json::Object(members) = schema {
            if let Some((_, v)) = members.iter().find(|(k, _)| k == "$schema") {
                match v {
                    Json::Str(s) if DIALECTS.contains(&s.as_str()) => {
                        draft4 = s.contains("draft-04");
                    }
                    _ => return None,
                }
            }
        }
        let root = b.reference("");
        let mut target: FxHashMap<NodeId, NodeId> = FxHashMap::default();
        while let Some(id) = b.queue.pop() {
            let Node::Ref(pointer) = &b.nodes[id as usize] else {
                unreachable!("only references are queued");
            };
            let at_root = pointer.is_empty();
            let schema_at = lookup(schema, pointer)?;
            target.insert(id, b.node(schema_at, 0, at_root)?);
        }
        // A reference to a schema that is only a reference (or an `anyOf` of one) resolves to
        // what that one resolves to, as in the Python translator; a cycle of those declines.
        let mut refs = FxHashMap::default();
        for (&id, &first) in &target {
            let mut at = first;
            for _ in 0..=target.len() {
                if !matches!(b.nodes[at as usize], Node::Ref(_)) {
                    break;
                }
                at = target[&at];
            }
            if matches!(b.nodes[at as usize], Node::Ref(_)) {
                return None;
            }
            let Node::Ref(pointer) = &b.nodes[id as usize] else {
                unreachable!("only references are queued");
            };
            refs.insert(id, (ref_hint(pointer), at));
        }
        if b.has_ref && b.nested_id {
            return None; // (an `id` below the root would change what a reference means)
        }
        Some(Nodes {
            nodes: b.nodes,
            root,
            refs,
            draft4,
        })
    }
}

struct Builder {
    nodes: Vec<Node>,
    index: FxHashMap<Node, NodeId>,
    seen: usize,
    /// Reference nodes whose targets are not parsed yet.
    queue: Vec<NodeId>,
    has_ref: bool,
    nested_id: bool,
}

impl Builder {
    fn intern(&mut self, node: Node) -> NodeId {
        if let Some(&id) = self.index.get(&node) {
            return id;
        }
        let id = self.nodes.len() as NodeId;
        self.nodes.push(node.clone());
        self.index.insert(node, id);
        id
    }

    /// The reference node of `pointer`, queued to be resolved the first time.
    fn reference(&mut self, pointer: &str) -> NodeId {
        let node = Node::Ref(pointer.to_owned());
        if let Some(&id) = self.index.get(&node) {
            return id;
        }
        let id = self.intern(node);
        self.queue.push(id);
        id
    }

    fn node(&mut self, schema: &Json, depth: usize, root: bool) -> Option<NodeId> {
        self.seen += 1;
        if depth > MAX_DEPTH || self.seen > MAX_SUBSCHEMAS {
            return None;
        }
        let members = match schema {
            Json::Bool(true) => return Some(self.intern(Node::Any)),
            Json::Object(members) => members,
            _ => return None,
        };
        let mut ty = None;
        let mut reference = None;
        let mut any_of = None;
        let mut kw = Keywords::default();
        for (k, v) in members {
            match k.as_str() {
                "type" => ty = Some(v),
                "properties" => kw.props = Some(v),
                "required" => kw.required = Some(v),
                "additionalProperties" => kw.others = Some(v),
                "items" => kw.items = Some(v),
                "enum" => kw.words = Some(v),
                "minimum" => kw.minimum = Some(v),
                "maximum" => kw.maximum = Some(v),
                "exclusiveMinimum" => kw.ex_minimum = Some(v),
                "exclusiveMaximum" => kw.ex_maximum = Some(v),
                "minItems" => kw.min_items = Some(v),
                "maxItems" => kw.max_items = Some(v),
                "minLength" => kw.min_length = Some(v),
                "maxLength" => kw.max_length = Some(v),
                "$schema" if root => {} // (checked by `Nodes::of`)
                "definitions" | "$defs" if root && matches!(v, Json::Object(_)) => {}
                "$ref" => reference = Some(v),
                "anyOf" => any_of = Some(v),
                // (draft 4's `$id`, a name in later drafts; and later drafts' `$id`, a name in
                // draft 4: either way a base URI only for references, see `nested_id`)
                "id" | "$id" if matches!(v, Json::Str(_)) => self.nested_id |= !root,
                "$comment" => {}
                k if ASSERTING.contains(&k) || k == "id" || k.starts_with('$') => return None,
                _ => {}
            }
        }
        if let Some(branches) = any_of {
            // (with assertions beside it: not on the fast path)
            if ty.is_some() || reference.is_some() || !kw.is_empty() {
                return None;
            }
            return self.any_of(branches, depth);
        }
        if let Some(r) = reference {
            // (a reference with assertions beside it is not on the fast path)
            if ty.is_some() || !kw.is_empty() {
                return None;
            }
            let Json::Str(r) = r else {
                return None;
            };
            let pointer = local_pointer(r)?;
            self.has_ref = true;
            return Some(self.reference(&pointer));
        }
        let node = match ty {
            Some(Json::Str(t)) => {
                let t = Type::of(t)?;
                if !kw.only_for(&[t]) {
                    return None;
                }
                self.typed(t, &kw, depth)?
            }
            // `type: [...]`: the union of those types (each with its own keywords).
            Some(Json::Array(list)) => {
                let mut types = Vec::new();
                for t in list {
                    let Json::Str(t) = t else {
                        return None;
                    };
                    let t = Type::of(t)?;
                    if !types.contains(&t) {
                        types.push(t);
                    }
                }
                if types.contains(&Type::Number) {
                    if types.contains(&Type::Integer) && kw.numeric() {
                        return None; // (the Python translator unites the two intervals)
                    }
                    types.retain(|&t| t != Type::Integer); // (every integer is a number)
                }
                if kw.words.is_some() {
                    // (an enum of strings leaves the string part only)
                    if !types.contains(&Type::String) {
                        return None;
                    }
                    types = vec![Type::String];
                }
                // (all six kinds unconstrained would be any value: not on the fast path)
                if types.is_empty() || types.len() == 6 {
                    return None;
                }
                if !kw.only_for(&types) {
                    return None;
                }
                types.sort_by_key(|t| t.rank());
                let mut parts = Vec::with_capacity(types.len());
                for &t in &types {
                    let part = self.typed(t, &kw, depth)?;
                    parts.push(self.intern(part));
                }
                if parts.len() == 1 {
                    return Some(parts[0]);
                }
                Node::Union(parts)
            }
            Some(_) => return None,
            None if kw.words.is_some() => {
                if !kw.only_for(&[Type::String]) {
                    return None;
                }
                self.typed(Type::String, &kw, depth)?
            }
            None if kw.is_empty() => Node::Any,
            None => return None,
        };
        Some(self.intern(node))
    }

    /// `anyOf` of branches of different kinds (the Python translator merges branches of one
    /// kind, which the fast path does not copy), in their order; a reference only beside
    /// `null` branches (`Optional[Model]`), since its kind is known only once resolved.
    fn any_of(&mut self, branches: &Json, depth: usize) -> Option<NodeId> {
        let Json::Array(branches) = branches else {
            return None;
        };
        if branches.is_empty() || branches.len() > 6 {
            return None;
        }
        let mut parts: Vec<NodeId> = Vec::with_capacity(branches.len());
        let mut kinds: Vec<u8> = Vec::with_capacity(branches.len());
        for b in branches {
            let id = self.node(b, depth + 1, false)?;
            let kind = match &self.nodes[id as usize] {
                Node::Null => 0,
                Node::Boolean => 1,
                Node::Integer | Node::Bounded(_) | Node::Number => 2,
                Node::String | Node::StrLen { .. } | Node::Enum { .. } => 3,
                Node::Array { .. } => 4,
                Node::Object { .. } => 5,
                Node::Ref(_) => 6,
                Node::Any | Node::Union(_) => return None,
            };
            if kinds.contains(&kind) {
                return None;
            }
            kinds.push(kind);
            parts.push(id);
        }
        if kinds.contains(&6) && kinds.iter().any(|&k| k != 6 && k != 0) {
            return None;
        }
        // (all six kinds: the Python translator may find it is any value and write that)
        if (0..6).all(|k| kinds.contains(&k)) {
            return None;
        }
        if parts.len() == 1 {
            return Some(parts[0]);
        }
        Some(self.intern(Node::Union(parts)))
    }

    /// The node of type `t` under the keywords that apply to it.
    fn typed(&mut self, t: Type, kw: &Keywords<'_>, depth: usize) -> Option<Node> {
        Some(match t {
            Type::Null => Node::Null,
            Type::Boolean => Node::Boolean,
            Type::Integer => match kw.integer_bounds()? {
                (None, None) => Node::Integer,
                (lo, hi) => Node::Bounded(integer_regex(lo, hi)?),
            },
            Type::Number => match kw.integer_bounds()? {
                (None, None) => Node::Number,
                (lo, hi) => Node::Bounded(number_regex(lo, hi)?),
            },
            Type::String => match kw.words {
                None => string_lengths(kw.min_length, kw.max_length)?,
                // (an enum with lengths: the Python translator intersects them)
                Some(_) if kw.min_length.is_some() || kw.max_length.is_some() => return None,
                Some(w) => plain_enum(w)?,
            },
            Type::Array => {
                let item = match kw.items {
                    None => self.intern(Node::Any),
                    Some(s @ (Json::Object(_) | Json::Bool(true))) => {
                        self.node(s, depth + 1, false)?
                    }
                    Some(_) => return None,
                };
                let min = count(kw.min_items)?.unwrap_or(0);
                let max = count(kw.max_items)?;
                if max.is_some_and(|m| m < min) {
                    return None; // (no array at all: the Python translator drops the value)
                }
                Node::Array { item, min, max }
            }
            Type::Object => {
                let mut list = Vec::new();
                match kw.props {
                    None => {}
                    Some(Json::Object(ps)) => {
                        if ps.len() > MAX_MEMBERS {
                            return None;
                        }
                        for (name, sub) in ps {
                            if !plain_key(name) {
                                return None;
                            }
                            list.push((name.clone(), self.node(sub, depth + 1, false)?));
                        }
                    }
                    Some(_) => return None,
                }
                let mut req: Vec<String> = Vec::new();
                match kw.required {
                    None => {}
                    Some(Json::Array(names)) => {
                        for n in names {
                            match n {
                                Json::Str(s) if list.iter().any(|(k, _)| k == s) => {
                                    if req.contains(s) {
                                        return None;
                                    }
                                    req.push(s.clone());
                                }
                                _ => return None,
                            }
                        }
                    }
                    Some(_) => return None,
                }
                req.sort();
                let others = match kw.others {
                    None => Some(self.intern(Node::Any)),
                    Some(Json::Bool(false)) => None,
                    Some(s @ (Json::Bool(true) | Json::Object(_))) => {
                        Some(self.node(s, depth + 1, false)?)
                    }
                    Some(_) => return None,
                };
                Node::Object {
                    props: list,
                    required: req,
                    others,
                }
            }
        })
    }
}

/// The keywords of the subset a subschema has (`None`: absent).
#[derive(Default)]
struct Keywords<'a> {
    props: Option<&'a Json>,
    required: Option<&'a Json>,
    others: Option<&'a Json>,
    items: Option<&'a Json>,
    words: Option<&'a Json>,
    minimum: Option<&'a Json>,
    maximum: Option<&'a Json>,
    ex_minimum: Option<&'a Json>,
    ex_maximum: Option<&'a Json>,
    min_items: Option<&'a Json>,
    max_items: Option<&'a Json>,
    min_length: Option<&'a Json>,
    max_length: Option<&'a Json>,
}

impl Keywords<'_> {
    fn is_empty(&self) -> bool {
        self.props.is_none()
            && self.required.is_none()
            && self.others.is_none()
            && self.items.is_none()
            && self.words.is_none()
            && !self.numeric()
            && self.min_items.is_none()
            && self.max_items.is_none()
            && self.min_length.is_none()
            && self.max_length.is_none()
    }

    /// Whether a keyword of numbers is present.
    fn numeric(&self) -> bool {
        self.minimum.is_some()
            || self.maximum.is_some()
            || self.ex_minimum.is_some()
            || self.ex_maximum.is_some()
    }

    /// The bounds of an integer or a number (each the tighter of its inclusive and exclusive keyword, as
    /// the Python translator merges them); `None` when a bound is not an integer the fast path
    /// reads (fractions, huge values, draft 4's boolean `exclusiveMinimum` among them).
    fn integer_bounds(&self) -> Option<(Bound, Bound)> {
        let value = |v: Option<&Json>, incl: bool| -> Option<Bound> {
            match v {
                None => Some(None),
                Some(Json::Number(Some(x))) => Some(Some((*x, incl))),
                Some(_) => None,
            }
        };
        let lo = tighter_lo(value(self.ex_minimum, false)?, value(self.minimum, true)?);
        let hi = tighter_hi(value(self.ex_maximum, false)?, value(self.maximum, true)?);
        Some((lo, hi))
    }

    /// Whether every keyword present applies to one of `types` (a keyword of another type
    /// declines; the Python translator would ignore it).
    fn only_for(&self, types: &[Type]) -> bool {
        let has = |t| types.contains(&t);
        ((self.words.is_none() && self.min_length.is_none() && self.max_length.is_none())
            || has(Type::String))
            && ((self.items.is_none() && self.min_items.is_none() && self.max_items.is_none())
                || has(Type::Array))
            && (!self.numeric() || has(Type::Integer) || has(Type::Number))
            && ((self.props.is_none() && self.required.is_none() && self.others.is_none())
                || has(Type::Object))
    }
}

/// A count keyword's value (`minItems`, `maxItems`, `minLength`, `maxLength`): `Some(None)` when absent, `None` when not
/// a non-negative integer the fast path reads.
fn count(v: Option<&Json>) -> Option<Option<u64>> {
    match v {
        None => Some(None),
        Some(Json::Number(Some(n))) => u64::try_from(*n).ok().map(Some),
        Some(_) => None,
    }
}

/// A string between `minLength` and `maxLength` (code points): [`Node::String`] when unbounded
/// (`minLength: 0`); `None` (declined) when not counts the fast path reads, when no string is
/// that long (the Python translator drops the value), or when the translator would not print
/// one terminal or one `json_len!` (a `maxLength` over [`MAX_ENGINE_LENGTH`], a `minLength`
/// alone over [`MAX_OPEN_MIN_LENGTH`]).
fn string_lengths(min: Option<&Json>, max: Option<&Json>) -> Option<Node> {
    let min = count(min)?.unwrap_or(0);
    let max = count(max)?;
    match max {
        None if min == 0 => Some(Node::String),
        None if min > MAX_OPEN_MIN_LENGTH => None,
        Some(m) if m < min || m > MAX_ENGINE_LENGTH => None,
        _ => Some(Node::StrLen { min, max }),
    }
}

/// A JSON Schema type name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Type {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl Type {
    fn of(name: &str) -> Option<Type> {
        Some(match name {
            "null" => Type::Null,
            "boolean" => Type::Boolean,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "string" => Type::String,
            "array" => Type::Array,
            "object" => Type::Object,
            _ => return None,
        })
    }

    /// The order of the parts of a union (the Python translator's).
    fn rank(self) -> u8 {
        match self {
            Type::Null => 0,
            Type::Boolean => 1,
            Type::Integer | Type::Number => 2,
            Type::String => 3,
            Type::Array => 4,
            Type::Object => 5,
        }
    }
}

/// A string enum: its distinct words in schema order and their regex ([`enum_regex`]); `None`
/// for other values, or words the fast path does not print.
fn plain_enum(v: &Json) -> Option<Node> {
    let Json::Array(values) = v else {
        return None;
    };
    let mut words: Vec<String> = Vec::new();
    for w in values {
        let Json::Str(s) = w else {
            return None;
        };
        if s.len() > MAX_WORD {
            return None;
        }
        if !words.contains(s) {
            words.push(s.clone());
            if words.len() > MAX_WORDS {
                return None;
            }
        }
    }
    if words.is_empty() {
        return None;
    }
    let regex = enum_regex(&words)?;
    Some(Node::Enum { words, regex })
}

/// A property name that a JSON text and a KBNF literal both hold as it is: non-empty printable
/// ASCII but `"`, `'` and `\`.
fn plain_key(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && !matches!(b, b'"' | b'\'' | b'\\'))
}

/// The JSON pointer of a `$ref` the fast path follows: `#` (the document) or `#/a/b/…`, through
/// members of objects, each segment of ASCII letters, digits, `_`, `-`, `.`, `:` and `$`
/// (nothing to unescape).
fn local_pointer(r: &str) -> Option<String> {
    if r == "#" {
        return Some(String::new());
    }
    let rest = r.strip_prefix("#/")?;
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':' | b'$'))
    };
    (rest.split('/').count() <= 16 && rest.split('/').all(plain)).then(|| format!("/{rest}"))
}

/// The value at `pointer` (see [`local_pointer`]) in `doc`; `None` when an object the pointer
/// passes after the document (the target included) holds a keyword that sets a base URI or a
/// dialect (the Python translator applies those along the way).
fn lookup<'d>(doc: &'d Json, pointer: &str) -> Option<&'d Json> {
    let mut at = doc;
    for segment in pointer.split('/').skip(1) {
        let Json::Object(members) = at else {
            return None;
        };
        at = &members.iter().find(|(m, _)| m == segment)?.1;
        if let Json::Object(members) = at {
            let scoping = |k: &str| {
                matches!(
                    k,
                    "$id" | "id" | "$schema" | "$anchor" | "$dynamicAnchor" | "$recursiveAnchor"
                )
            };
            if members.iter().any(|(k, _)| scoping(k)) {
                return None;
            }
        }
    }
    Some(at)
}

/// The rule name hint of a reference: its pointer's last segment (`root` for the document), as
/// the Python translator's `_rule_name_base` makes a name of it.
fn ref_hint(pointer: &str) -> String {
    let last = pointer
        .rsplit('/')
        .next()
        .filter(|l| !l.is_empty())
        .unwrap_or("root");
    let mut base: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !base.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        base.insert_str(0, "r_");
    }
    base.truncate(48);
    base
}
