//! The subset of JSON Schema the fast path translates, as interned nodes.
//!
//! A schema is in the subset when every subschema is `true`, `{}` (annotations only), a local
//! `$ref` (see [`local_pointer`]) or an `anyOf` with nothing but annotations beside it (branches
//! of different kinds, or several arrays and objects the Python translator keeps apart: see
//! [`Builder::kept_apart`]; or a `oneOf` of branches of different kinds, which is their
//! `anyOf`), or has a `type` (or a
//! list of types) of `null`, `boolean`, `integer` or `number` (each optionally bounded by
//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` of integer values; not both in
//! one type list with bounds),
//! `string` (optionally one of: an `enum` of words JSON spells one way, or a string `const`;
//! `minLength`/`maxLength`, see [`string_lengths`]; a `format`, see [`format`]; an anchored
//! `pattern`, see [`pattern_rule`]), `array`
//! (optionally `items`: one subschema, `minItems`/`maxItems`, and an `additionalItems` that
//! one subschema of `items` leaves without effect) or `object`
//! (optionally `properties`, `required` (unlisted names are members of the other keys'
//! value), `additionalProperties`: a boolean or a subschema; properties with plain ASCII
//! names); without a `type`, values of every type under the keywords of each (unless none
//! constrains). Keywords of types a subschema does not have are ignored, as by the Python
//! translator, once their values are found in the subset. The
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
use super::formats::FORMATS;
use super::numbers::{integer_regex, number_regex, tighter_hi, tighter_lo, Bound};
use super::patterns::pattern_rule;

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
    /// A string of a `format` the fast path translates: its index in [`FORMATS`].
    Format(u8),
    /// A string matching a `pattern` the fast path translates: its rule's alternative (see
    /// [`pattern_rule`]).
    Pattern(String),
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
        /// Properties in schema order, then the required names not listed (sorted).
        props: Vec<(String, NodeId)>,
        /// How many of `props` are listed in `properties` (the Python translator's nodes tell
        /// a required name apart from a listed property of the same value).
        listed: usize,
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
/// Most branches of an `anyOf` (the Python translator compares more than two objects pairwise
/// up to 64).
const MAX_BRANCHES: usize = 64;
/// Largest `maxLength` on the fast path: the Python translator's `MAX_ENGINE_LENGTH` (above it,
/// `json_len!` is not used and the repetition becomes rules).
const MAX_ENGINE_LENGTH: u64 = 1 << 20;
/// Largest `minLength` without a `maxLength` on the fast path (`"c{n,}"` is one terminal up to
/// n = 92 under the translator's regex budgets; a margin below).
const MAX_OPEN_MIN_LENGTH: u64 = 64;

/// The keywords that assert something or locate schemas in any draft of JSON Schema (3 to
/// 2020-12), the translator's legacy ones included: a superset of what the Python translator
/// enforces (`tests/test_schema_fast_path.py` checks that its lists are included). The fast path
/// translates eighteen of them (`type`, `enum`, `const`, `format`, `pattern`, `properties`,
/// `required`, `additionalProperties`, `items`, `additionalItems`, the number bounds, the array
/// lengths and the string lengths) and declines a schema with any other; a keyword not listed is
/// an annotation or unknown, and ignored as JSON Schema prescribes (and the Python translator
/// does), except unknown `$` keywords, which decline too.
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
            draft4: false,
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
                        b.draft4 = draft4;
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
    /// Draft 4 (`$schema`): `const` is not a keyword there.
    draft4: bool,
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
                "additionalItems" => kw.extra_items = Some(v),
                // (`const` is a one-word `enum`, as the Python translator's literal of a string
                // is; both in one schema intersect, which declines; draft 4 has no `const`)
                "enum" | "const" if kw.words.is_some() => return None,
                "enum" => match v {
                    Json::Array(values) => kw.words = Some(values),
                    _ => return None,
                },
                "const" if !self.draft4 => match v {
                    Json::Str(_) => kw.words = Some(std::slice::from_ref(v)),
                    _ => return None,
                },
                // (read for strings only, as by the Python translator: ignored beside other types)
                "format" => match v {
                    Json::Str(f) => kw.format = Some(f),
                    _ => return None,
                },
                "pattern" => match v {
                    Json::Str(p) => kw.pattern = Some(p),
                    _ => return None,
                },
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
                "anyOf" | "oneOf" if any_of.is_some() => return None,
                "anyOf" => any_of = Some((v, false)),
                "oneOf" => any_of = Some((v, true)),
                // (draft 4's `$id`, a name in later drafts; and later drafts' `$id`, a name in
                // draft 4: either way a base URI only for references, see `nested_id`)
                "id" | "$id" if matches!(v, Json::Str(_)) => self.nested_id |= !root,
                "$comment" => {}
                k if ASSERTING.contains(&k) || k == "id" || k.starts_with('$') => return None,
                _ => {}
            }
        }
        if let Some((branches, one)) = any_of {
            // (with assertions beside it: not on the fast path)
            if ty.is_some() || reference.is_some() || !kw.is_empty() {
                return None;
            }
            return self.any_of(branches, one, depth);
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
        let mut types = match ty {
            Some(Json::Str(t)) => {
                let t = Type::of(t)?;
                self.other_types(&[t], &kw, depth)?;
                let node = self.typed(t, &kw, depth)?;
                return Some(self.intern(node));
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
                types
            }
            Some(_) => return None,
            None if kw.is_empty() => return Some(self.intern(Node::Any)),
            // (no type: values of any type, each under the keywords of its type)
            None => ALL_TYPES.to_vec(),
        };
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
        if types.is_empty() {
            return None;
        }
        self.other_types(&types, &kw, depth)?;
        types.sort_by_key(|t| t.rank());
        let mut parts = Vec::with_capacity(types.len());
        for &t in &types {
            let part = self.typed(t, &kw, depth)?;
            parts.push(self.intern(part));
        }
        // (every kind, none constrained: the Python translator finds any value, and may write
        // it as such; the fast path cannot tell the arrays and objects it counts as
        // unconstrained)
        if types.len() == 6 && parts.iter().all(|&p| self.unconstrained(p)) {
            return None;
        }
        if parts.len() == 1 {
            return Some(parts[0]);
        }
        Some(self.intern(Node::Union(parts)))
    }

    /// Whether node `id` may be the Python translator's unconstrained value of its kind.
    fn unconstrained(&self, id: NodeId) -> bool {
        match &self.nodes[id as usize] {
            Node::Null | Node::Boolean | Node::Number | Node::String => true,
            Node::Array { item, min, max } => {
                matches!(self.nodes[*item as usize], Node::Any) && *min == 0 && max.is_none()
            }
            Node::Object {
                props,
                required,
                others,
                ..
            } => {
                props.is_empty()
                    && required.is_empty()
                    && others.is_some_and(|o| matches!(self.nodes[o as usize], Node::Any))
            }
            _ => false,
        }
    }

    /// `anyOf`, its branches in their order: of different kinds, as the Python translator
    /// merges scalars of one kind (which the fast path does not copy), but for arrays and objects,
    /// which it keeps apart (see [`Builder::kept_apart`]); a reference only beside `null`
    /// branches (`Optional[Model]`), since its kind is known only once resolved.
    ///
    /// `oneOf` (`one`) of branches that no value satisfies two of is their `anyOf` (the Python
    /// translator's `_one_of` finds no overlap and unites them): branches of different kinds,
    /// without references (of kinds known only once resolved) unless alone.
    fn any_of(&mut self, branches: &Json, one: bool, depth: usize) -> Option<NodeId> {
        let Json::Array(branches) = branches else {
            return None;
        };
        if branches.is_empty() || branches.len() > MAX_BRANCHES {
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
                Node::String
                | Node::StrLen { .. }
                | Node::Format(_)
                | Node::Pattern(_)
                | Node::Enum { .. } => 3,
                Node::Array { .. } => 4,
                Node::Object { .. } => 5,
                Node::Ref(_) => 6,
                Node::Any | Node::Union(_) => return None,
            };
            // (equal branches: the Python translator keeps one, but its nodes may tell apart
            // what the fast path's intern as one, e.g. number bounds printed alike)
            if parts.contains(&id) || (kinds.contains(&kind) && kind != 4 && kind != 5) {
                return None;
            }
            kinds.push(kind);
            parts.push(id);
        }
        if !self.kept_apart(&parts) {
            return None;
        }
        if kinds.contains(&6) && kinds.iter().any(|&k| k != 6 && k != 0) {
            return None;
        }
        if one
            && parts.len() > 1
            && (kinds.contains(&6) || (1..kinds.len()).any(|i| kinds[..i].contains(&kinds[i])))
        {
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

    /// Whether the Python translator's union keeps every array and object branch of `parts`
    /// (distinct nodes) as an alternative of its own, as the fast path does. It drops those an
    /// unconstrained one of their kind subsumes (unless they carry annotations, which the fast
    /// path does not read: such a union declines), and, among more than two objects, one that
    /// another subsumes (`_ir._obj_subsumes`); that never happens when each object requires a
    /// property that the other lacks, so other sets of objects decline.
    fn kept_apart(&self, parts: &[NodeId]) -> bool {
        let (mut arrays, mut objects) = (Vec::new(), Vec::new());
        for &p in parts {
            match &self.nodes[p as usize] {
                Node::Array { .. } => arrays.push(self.unconstrained(p)),
                Node::Object { required, .. } => objects.push((self.unconstrained(p), required)),
                _ => {}
            }
        }
        if (arrays.len() > 1 && arrays.contains(&true))
            || (objects.len() > 1 && objects.iter().any(|o| o.0))
        {
            return false;
        }
        objects.len() <= 2
            || objects.iter().enumerate().all(|(i, a)| {
                objects.iter().enumerate().all(|(j, b)| {
                    // (`b` subsumes `a` only if `a` requires all that `b` requires)
                    i == j || b.1.iter().any(|k| !a.1.contains(k))
                })
            })
    }

    /// `Some` when the keywords of types other than `types` (which the Python translator ignores,
    /// reading not even their values) are in the subset: their nodes are built, to decline what
    /// the fast path does not read, and dropped. An `enum` or `const` without `string` declines
    /// (no value, or values of other kinds).
    fn other_types(&mut self, types: &[Type], kw: &Keywords<'_>, depth: usize) -> Option<()> {
        let has = |t| types.contains(&t);
        if kw.words.is_some() && !has(Type::String) {
            return None;
        }
        if kw.strings() && !has(Type::String) {
            self.typed(Type::String, kw, depth)?;
        }
        if kw.arrays() && !has(Type::Array) {
            self.typed(Type::Array, kw, depth)?;
        }
        if kw.numeric() && !has(Type::Integer) && !has(Type::Number) {
            self.typed(Type::Number, kw, depth)?;
        }
        if kw.objects() && !has(Type::Object) {
            // (`required` names strings, not necessarily listed properties: of no object here)
            if let Some(names) = kw.required {
                let Json::Array(names) = names else {
                    return None;
                };
                if !names.iter().all(|n| matches!(n, Json::Str(_))) {
                    return None;
                }
            }
            let others = Keywords {
                required: None,
                ..*kw
            };
            self.typed(Type::Object, &others, depth)?;
        }
        Some(())
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
            Type::String => {
                let lengths = kw.min_length.is_some() || kw.max_length.is_some();
                let format = format(kw.format)?;
                // (lengths, an enum, a format and a pattern: the Python translator intersects
                // any two of them)
                let constraints = usize::from(lengths)
                    + usize::from(kw.words.is_some())
                    + usize::from(format.is_some())
                    + usize::from(kw.pattern.is_some());
                if constraints > 1 {
                    return None;
                }
                match (kw.words, format, kw.pattern) {
                    (Some(w), _, _) => plain_enum(w)?,
                    (_, Some(f), _) => Node::Format(f),
                    (_, _, Some(p)) => Node::Pattern(pattern_rule(p)?),
                    _ => string_lengths(kw.min_length, kw.max_length)?,
                }
            }
            Type::Array => {
                let item = match kw.items {
                    None => self.intern(Node::Any),
                    Some(s @ (Json::Object(_) | Json::Bool(true))) => {
                        self.node(s, depth + 1, false)?
                    }
                    Some(_) => return None,
                };
                // (ignored by the Python translator beside one `items` schema: read and dropped)
                match kw.extra_items {
                    None | Some(Json::Bool(_)) => {}
                    Some(s @ Json::Object(_)) => {
                        self.node(s, depth + 1, false)?;
                    }
                    Some(_) => return None,
                }
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
                                Json::Str(s) if plain_key(s) => {
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
                // Required names not listed are named members after the listed ones, in their
                // sorted order, of the other keys' value (`_emit.objects._obj_variants`); none
                // when there are no other keys (no object: the Python translator reports it).
                let listed = list.len();
                for name in &req {
                    if !list[..listed].iter().any(|(k, _)| k == name) {
                        list.push((name.clone(), others?));
                    }
                }
                Node::Object {
                    props: list,
                    listed,
                    required: req,
                    others,
                }
            }
        })
    }
}

/// The keywords of the subset a subschema has (`None`: absent).
#[derive(Default, Clone, Copy)]
struct Keywords<'a> {
    props: Option<&'a Json>,
    required: Option<&'a Json>,
    others: Option<&'a Json>,
    items: Option<&'a Json>,
    /// `additionalItems`: read beside an array of `items` only (which declines), else ignored.
    extra_items: Option<&'a Json>,
    /// `enum`'s values, or `const`'s one.
    words: Option<&'a [Json]>,
    format: Option<&'a str>,
    pattern: Option<&'a str>,
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
        self.words.is_none()
            && self.format.is_none()
            && !self.numeric()
            && !self.strings()
            && !self.arrays()
            && !self.objects()
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

    fn strings(&self) -> bool {
        self.min_length.is_some() || self.max_length.is_some() || self.pattern.is_some()
    }

    fn arrays(&self) -> bool {
        self.items.is_some()
            || self.extra_items.is_some()
            || self.min_items.is_some()
            || self.max_items.is_some()
    }

    fn objects(&self) -> bool {
        self.props.is_some() || self.required.is_some() || self.others.is_some()
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

/// The types of a value without a `type` (an integer is a number).
const ALL_TYPES: [Type; 6] = [
    Type::Null,
    Type::Boolean,
    Type::Number,
    Type::String,
    Type::Array,
    Type::Object,
];

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

/// The format of a string: `Some(None)` when absent or unknown (an annotation: the Python
/// translator ignores it), its index in [`FORMATS`] when the fast path prints it, `None` for the
/// formats it leaves to Python (`regex`, and the IRIs, whose terminals the translator splits).
fn format(name: Option<&str>) -> Option<Option<u8>> {
    let Some(name) = name else {
        return Some(None);
    };
    if let Some(i) = FORMATS.iter().position(|(f, _)| *f == name) {
        return u8::try_from(i).ok().map(Some);
    }
    match name {
        "regex" | "iri" | "iri-reference" => None,
        _ => Some(None),
    }
}

/// A string enum: its distinct words in schema order and their regex ([`enum_regex`]); `None`
/// for other values, or words the fast path does not print.
fn plain_enum(values: &[Json]) -> Option<Node> {
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
