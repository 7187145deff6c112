//! The subset of JSON Schema the fast path translates, as interned nodes.
//!
//! A schema is in the subset when every subschema is `true`, `{}` (annotations only), or has a
//! `type` (or a list of types) of `null`, `boolean`, `integer`, `number`, `string` (optionally an
//! `enum` of words JSON spells one way), `array` (optionally `items`: one subschema) or `object` (optionally
//! `properties`, `required` naming listed properties, `additionalProperties: true | false`, at
//! most [`MAX_MEMBERS`] properties with plain ASCII names). Keywords that assert nothing
//! (annotations such as `title` or `description`, unknown ones) are ignored, as by the Python
//! translator. Any other keyword, value or shape declines.
//!
//! Invariant: nodes are interned by their meaning (annotations and `required`'s order aside), as
//! the Python translator's IR is, so equal subschemas share one node and hence one rule.

use rustc_hash::FxHashMap;

use super::enums::enum_regex;

/// A JSON value, as the bindings hand a schema over. Numbers carry no value (the subset never
/// reads one); `Other` is anything that is not JSON data (the schema then declines wherever it
/// matters).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Number,
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
    Number,
    String,
    /// A string enum: its distinct words in schema order, and their regex.
    Enum {
        words: Vec<String>,
        regex: String,
    },
    Array(NodeId),
    /// Values of any of the parts (at least two, of different kinds, in [`Type::rank`] order).
    Union(Vec<NodeId>),
    Object {
        /// Properties in schema order.
        props: Vec<(String, NodeId)>,
        /// Required names, sorted.
        required: Vec<String>,
        /// Whether other keys are allowed (with any value).
        others: bool,
    },
}

/// The nodes of one schema; the root is the last one interned.
pub(super) struct Nodes {
    pub(super) nodes: Vec<Node>,
    pub(super) root: NodeId,
    /// Draft 4 (`$schema`): its integers are lexical (`1.0` is none), named apart.
    pub(super) draft4: bool,
}

/// Most properties of an object on the fast path (the Python translator switches to another
/// rule layout above 24).
pub(super) const MAX_MEMBERS: usize = 24;
/// Deepest nesting of subschemas on the fast path.
const MAX_DEPTH: usize = 48;
/// Most subschemas on the fast path.
const MAX_SUBSCHEMAS: usize = 4096;
/// Longest enum word (an enum is printed as one regex terminal).
const MAX_WORD: usize = 256;
/// Most enum words.
const MAX_WORDS: usize = 1024;

/// The keywords that assert something or locate schemas in any draft of JSON Schema (3 to
/// 2020-12), the translator's legacy ones included: a superset of what the Python translator
/// enforces (`tests/test_schema_fast_path.py` checks that its lists are included). The fast path
/// translates six of them (`type`, `enum`, `properties`, `required`, `additionalProperties`,
/// `items`) and declines a schema with any other; a keyword not listed is an annotation or
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
        let root = b.node(schema, 0, true)?;
        Some(Nodes {
            nodes: b.nodes,
            root,
            draft4,
        })
    }
}

struct Builder {
    nodes: Vec<Node>,
    index: FxHashMap<Node, NodeId>,
    seen: usize,
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
        let mut kw = Keywords::default();
        for (k, v) in members {
            match k.as_str() {
                "type" => ty = Some(v),
                "properties" => kw.props = Some(v),
                "required" => kw.required = Some(v),
                "additionalProperties" => kw.others = Some(v),
                "items" => kw.items = Some(v),
                "enum" => kw.words = Some(v),
                "$schema" if root => {} // (checked by `Nodes::of`)
                // (draft 4's `$id`; a name in later drafts)
                "id" if matches!(v, Json::Str(_)) => {}
                "$comment" => {}
                k if ASSERTING.contains(&k) || k == "id" || k.starts_with('$') => return None,
                _ => {}
            }
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
                    types.retain(|&t| t != Type::Integer); // (every integer is a number)
                }
                // (all six kinds unconstrained would be any value: not on the fast path)
                if types.is_empty() || types.len() == 6 || kw.words.is_some() {
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

    /// The node of type `t` under the keywords that apply to it.
    fn typed(&mut self, t: Type, kw: &Keywords<'_>, depth: usize) -> Option<Node> {
        Some(match t {
            Type::Null => Node::Null,
            Type::Boolean => Node::Boolean,
            Type::Integer => Node::Integer,
            Type::Number => Node::Number,
            Type::String => match kw.words {
                None => Node::String,
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
                Node::Array(item)
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
                    None | Some(Json::Bool(true)) => true,
                    Some(Json::Bool(false)) => false,
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
}

impl Keywords<'_> {
    fn is_empty(&self) -> bool {
        self.props.is_none()
            && self.required.is_none()
            && self.others.is_none()
            && self.items.is_none()
            && self.words.is_none()
    }

    /// Whether every keyword present applies to one of `types` (a keyword of another type
    /// declines; the Python translator would ignore it).
    fn only_for(&self, types: &[Type]) -> bool {
        let has = |t| types.contains(&t);
        (self.words.is_none() || has(Type::String))
            && (self.items.is_none() || has(Type::Array))
            && ((self.props.is_none() && self.required.is_none() && self.others.is_none())
                || has(Type::Object))
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
