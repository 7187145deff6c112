use super::formats;
use super::*;

fn obj(members: &[(&str, Json)]) -> Json {
    Json::Object(
        members
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    )
}

fn s(x: &str) -> Json {
    Json::Str(x.to_owned())
}

#[test]
fn scalars_print_as_the_python_translator_does() {
    let integer = translate(&obj(&[("type", s("integer"))]), None).unwrap();
    assert_eq!(
        integer,
        "start ::= root;\ninteger ::= #\"\\-?(?:0|[1-9][0-9]*)\";\nroot ::= integer;\n"
    );
    let null = translate(&obj(&[("type", s("null"))]), None).unwrap();
    assert_eq!(null, "start ::= root;\nroot ::= 'null';\n");
}

#[test]
fn objects_chain_their_members_and_share_equal_subschemas() {
    let inner = obj(&[
        ("type", s("object")),
        ("properties", obj(&[("x", obj(&[("type", s("string"))]))])),
    ]);
    let schema = obj(&[
        ("type", s("object")),
        ("properties", obj(&[("p", inner.clone()), ("q", inner)])),
        ("required", Json::Array(vec![s("p"), s("q")])),
        ("additionalProperties", Json::Bool(false)),
    ]);
    let text = translate(&schema, None).unwrap();
    assert!(
        text.contains("object_m ::= '\"p\"' ': ' object_1 object_m_1;\n"),
        "{text}"
    );
    assert!(text.contains("object_m_1 ::= ', ' '\"q\"' ': ' object_1 object_m_2;\n"));
    assert!(text.contains("object_m_2 ::= '';\n"));
    assert!(
        !text.contains("object_2"),
        "equal subschemas share one rule: {text}"
    );
}

#[test]
fn other_shapes_decline() {
    let declined = [
        obj(&[("type", s("string")), ("pattern", s("^a+"))]),
        obj(&[
            ("type", s("string")),
            ("enum", Json::Array(vec![s("a\\b")])),
        ]),
        obj(&[
            ("type", s("string")),
            ("enum", Json::Array(vec![s("a"), s("")])),
        ]),
        obj(&[("enum", Json::Array(vec![s("a"), Json::Null]))]),
        obj(&[
            ("type", Json::Array(vec![s("integer"), s("null")])),
            ("enum", Json::Array(vec![s("a")])),
        ]),
        obj(&[
            ("type", s("string")),
            ("minLength", Json::Number(Some(3))),
            ("maxLength", Json::Number(Some(2))),
        ]),
        obj(&[("type", s("string")), ("minLength", Json::Number(None))]),
        obj(&[
            ("type", s("string")),
            ("minLength", Json::Number(Some(100))),
        ]),
        obj(&[("type", s("string")), ("$id", Json::Number(Some(1)))]),
        obj(&[("$ref", s("#/definitions/x"))]),
        obj(&[
            ("type", s("object")),
            ("required", Json::Array(vec![s("missing")])),
            ("additionalProperties", Json::Bool(false)),
        ]),
        obj(&[("properties", obj(&[]))]),
        obj(&[
            ("type", s("object")),
            ("properties", obj(&[("it's", Json::Bool(true))])),
        ]),
        obj(&[("type", s("array")), ("items", Json::Array(vec![]))]),
        // (the Python translator writes `unique!` or rules over subsets)
        obj(&[("type", s("array")), ("uniqueItems", Json::Bool(true))]),
        obj(&[("$schema", s("http://json-schema.org/draft-03/schema#"))]),
        Json::Bool(false),
        Json::Other,
    ];
    for schema in &declined {
        assert_eq!(translate(schema, None), None, "{schema:?}");
    }
}

#[test]
fn deep_schemas_decline_instead_of_recursing() {
    let mut schema = obj(&[("type", s("string"))]);
    for _ in 0..1_000 {
        schema = Json::Object(vec![
            ("type".to_owned(), s("array")),
            ("items".to_owned(), schema),
        ]);
    }
    assert_eq!(translate(&schema, None), None);
}

#[test]
fn number_lengths_use_the_engines_len() {
    let text = translate(&obj(&[("type", s("number"))]), Some(24)).unwrap();
    assert!(text.contains(
        "number ::= len!(#\"\\-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[Ee][\\+\\-]?[0-9]+)?\", 1, 24);"
    ));
}

#[test]
fn enums_are_factored_as_the_python_translator_does() {
    let enum_of = |words: &[&str]| {
        let text = translate(
            &obj(&[("enum", Json::Array(words.iter().map(|w| s(w)).collect()))]),
            None,
        )
        .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("str ::= "))
            .unwrap()
            .to_owned()
    };
    assert_eq!(enum_of(&["ab", "ac"]), r##"#"\x22a[bc]\x22";"##);
    assert_eq!(enum_of(&["bc", "a"]), r##"#"\x22(?:a|bc)\x22";"##);
    assert_eq!(enum_of(&["a1", "a2", "b"]), r##"#"\x22(?:b|a[12])\x22";"##);
    assert_eq!(enum_of(&["x", "y", "x"]), r##"#"\x22[xy]\x22";"##);
    assert_eq!(enum_of(&["ab", "abc"]), r##"#"\x22abc?\x22";"##);
    assert_eq!(enum_of(&["a.b", "a-c"]), r##"#"\x22a(?:\.b|\-c)\x22";"##);
    assert_eq!(enum_of(&["a", "b", "c", "e"]), r##"#"\x22[a-ce]\x22";"##);
    // (a slash is `/` or `\/` in JSON: a set holding it, or it alone, becomes an alternation)
    assert_eq!(enum_of(&["a/", "ab"]), r##"#"\x22a(?:[/b]|\x5C/)\x22";"##);
    assert_eq!(enum_of(&["a", "/"]), r##"#"\x22(?:[/a]|\x5C/)\x22";"##);
    assert_eq!(
        enum_of(&["x/y", "x/z", "q"]),
        r##"#"\x22(?:q|x(?:/|\x5C/)[yz])\x22";"##
    );
}

#[test]
fn type_lists_become_one_rule_in_kind_order() {
    let text = translate(
        &obj(&[(
            "type",
            Json::Array(vec![s("string"), s("null"), s("boolean")]),
        )]),
        None,
    )
    .unwrap();
    assert!(
        text.contains("any_of ::= 'null' | boolean | json_string;\n"),
        "{text}"
    );
    let number = translate(
        &obj(&[("type", Json::Array(vec![s("integer"), s("number")]))]),
        None,
    )
    .unwrap();
    assert!(number.contains("root ::= number;"), "{number}");
}

#[test]
fn references_are_rules_named_after_their_target() {
    // {"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array",
    //  "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}
    let node = obj(&[
        ("type", s("object")),
        (
            "properties",
            obj(&[(
                "kids",
                obj(&[
                    ("type", s("array")),
                    ("items", obj(&[("$ref", s("#/$defs/node"))])),
                ]),
            )]),
        ),
    ]);
    let schema = obj(&[
        ("$defs", obj(&[("node", node)])),
        ("$ref", s("#/$defs/node")),
    ]);
    let text = translate(&schema, None).unwrap();
    assert!(
        text.starts_with(
            "start ::= root;\nnode ::= object;\narray ::= '[]' | '[' node (', ' node)* ']';\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("root ::= object;\n"), "{text}");
    // A cycle of references to references has no schema at its end.
    let cycle = obj(&[
        (
            "definitions",
            obj(&[("a", obj(&[("$ref", s("#/definitions/a"))]))]),
        ),
        ("$ref", s("#/definitions/a")),
    ]);
    assert_eq!(translate(&cycle, None), None);
}

#[test]
fn objects_with_many_members_pick_them_from_a_segment_tree() {
    let props: Vec<(String, Json)> = (0..30)
        .map(|i| (format!("p{i}"), obj(&[("type", s("integer"))])))
        .collect();
    let schema = obj(&[
        ("type", s("object")),
        ("properties", Json::Object(props)),
        ("required", Json::Array(vec![s("p29")])),
        ("additionalProperties", Json::Bool(false)),
    ]);
    let text = translate(&schema, None).unwrap();
    // The first member up to the required last one: [0, 30) is one tree node.
    assert!(text.contains("object ::= '{' object_p '}';\n"), "{text}");
    assert!(
        text.contains("object_p ::= object_p_1 | object_p_"),
        "{text}"
    );
    assert!(text.contains("'\"p29\"' ': ' integer object_a"), "{text}");
}

#[test]
fn string_lengths_are_a_repetition_or_the_engines_json_len() {
    let string = |lengths: &[(&str, i64)]| {
        let mut members = vec![("type", s("string"))];
        members.extend(lengths.iter().map(|&(k, v)| (k, Json::Number(Some(v)))));
        let text = translate(&obj(&members), None).unwrap();
        text.lines()
            .nth(1)
            .unwrap()
            .replace(crate::dfa::JSON_CHAR, "C")
    };
    assert_eq!(string(&[("maxLength", 0)]), r#"str ::= #"\x22\x22";"#);
    assert_eq!(string(&[("maxLength", 1)]), r#"str ::= #"\x22C?\x22";"#);
    assert_eq!(
        string(&[("minLength", 1), ("maxLength", 1)]),
        r#"str ::= #"\x22C\x22";"#
    );
    assert_eq!(string(&[("minLength", 1)]), r#"str ::= #"\x22C+\x22";"#);
    assert_eq!(
        string(&[("minLength", 2), ("maxLength", 8)]),
        r#"str ::= #"\x22C{2,8}\x22";"#
    );
    assert_eq!(
        string(&[("minLength", 9), ("maxLength", 9)]),
        r#"str ::= '"' json_len!(#"C*", 9, 9) '"';"#
    );
    assert_eq!(
        string(&[("minLength", 0)]),
        "json_string ::= json_string_except!();"
    );
}

#[test]
fn number_bounds_print_the_python_translators_interval() {
    let number = |lengths: &[(&str, i64)]| {
        let mut members = vec![("type", s("number"))];
        members.extend(lengths.iter().map(|&(k, v)| (k, Json::Number(Some(v)))));
        translate(&obj(&members), None).map(|text| text.lines().nth(1).unwrap().to_owned())
    };
    assert_eq!(
        number(&[("minimum", 0), ("maximum", 1)]).unwrap(),
        r#"num ::= #"\-?0(?:\.0+)?|0\.[0-9]*[1-9][0-9]*|1(?:\.0+)?|[1-9](?:\.[0-9]+)?[Ee]\-0*(?:[1-9]|[1-9][0-9]+)|1(?:\.0+)?[Ee](?:\+?0*0|\-0+)";"#
    );
    assert_eq!(
        number(&[("minimum", 3), ("maximum", 3)]).unwrap(),
        r#"num ::= #"3(?:\.0+)?|3(?:\.0+)?[Ee](?:\+?0*0|\-0+)";"#
    );
    assert_eq!(number(&[("minimum", 3), ("exclusiveMaximum", 3)]), None);
}

/// `$id` (like draft 4's `id`) is a base URI for references only: without references, at the
/// root or below, the text is the one without it.
#[test]
fn ids_without_references_change_nothing() {
    let plain = obj(&[
        ("type", s("object")),
        ("properties", obj(&[("a", obj(&[("type", s("string"))]))])),
    ]);
    let with_ids = obj(&[
        ("$id", s("http://x.example/root")),
        ("type", s("object")),
        (
            "properties",
            obj(&[("a", obj(&[("$id", s("a")), ("type", s("string"))]))]),
        ),
    ]);
    let text = translate(&plain, None).expect("common shape");
    assert_eq!(translate(&with_ids, None), Some(text));
}

#[test]
fn formats_print_their_table_rule_and_share_it() {
    let date = obj(&[("type", s("string")), ("format", s("date"))]);
    let schema = obj(&[
        ("type", s("object")),
        ("properties", obj(&[("a", date.clone()), ("b", date)])),
    ]);
    let text = translate(&schema, None).unwrap();
    let rule = format!("str ::= {};\n", formats::FORMATS[0].1);
    assert_eq!(formats::FORMATS[0].0, "date");
    assert!(text.contains(&rule), "{text}");
    assert_eq!(text.matches("str ::=").count(), 1, "{text}");
    // Unknown formats are annotations; formats of other types are ignored.
    let unknown = obj(&[("type", s("string")), ("format", s("int32"))]);
    let plain = obj(&[("type", s("string"))]);
    assert_eq!(translate(&unknown, None), translate(&plain, None));
    let integer = obj(&[("type", s("integer")), ("format", s("date"))]);
    let plain = obj(&[("type", s("integer"))]);
    assert_eq!(translate(&integer, None), translate(&plain, None));
    for declined in [
        obj(&[("type", s("string")), ("format", s("regex"))]),
        obj(&[("type", s("string")), ("format", s("iri"))]),
        obj(&[("format", s("int32"))]),
        obj(&[
            ("type", s("string")),
            ("format", s("date")),
            ("maxLength", Json::Number(Some(10))),
        ]),
        obj(&[("type", s("integer")), ("format", Json::Number(Some(3)))]),
    ] {
        assert_eq!(translate(&declined, None), None, "{declined:?}");
    }
}

#[test]
fn a_string_const_is_a_one_word_enum() {
    let constant = obj(&[("const", s("x"))]);
    let one = obj(&[("enum", Json::Array(vec![s("x")]))]);
    assert!(translate(&constant, None).is_some());
    assert_eq!(translate(&constant, None), translate(&one, None));
    let draft4 = obj(&[
        ("$schema", s("http://json-schema.org/draft-04/schema#")),
        ("const", s("x")),
    ]);
    let both = obj(&[("const", s("x")), ("enum", Json::Array(vec![s("x")]))]);
    for declined in [draft4, both, obj(&[("const", Json::Null)])] {
        assert_eq!(translate(&declined, None), None, "{declined:?}");
    }
}

#[test]
fn any_of_keeps_objects_that_require_apart() {
    let branch = |name: &str, required: bool| {
        let mut members = vec![
            ("type", s("object")),
            ("properties", obj(&[(name, obj(&[("type", s("integer"))]))])),
        ];
        if required {
            members.push(("required", Json::Array(vec![s(name)])));
        }
        obj(&members)
    };
    let any_of = |branches: Vec<Json>| obj(&[("anyOf", Json::Array(branches))]);
    let text = translate(
        &any_of(vec![
            branch("a", true),
            branch("b", true),
            branch("c", true),
        ]),
        None,
    )
    .unwrap();
    assert!(
        text.contains("any_of ::= object | object_1 | object_2;\n"),
        "{text}"
    );
    // (two objects are never compared; three may subsume one another)
    assert!(translate(&any_of(vec![branch("a", false), branch("b", false)]), None).is_some());
    for declined in [
        any_of(vec![
            branch("a", false),
            branch("b", true),
            branch("c", true),
        ]),
        any_of(vec![branch("a", true), obj(&[("type", s("object"))])]),
        any_of(vec![branch("a", true), branch("a", true)]),
    ] {
        assert_eq!(translate(&declined, None), None, "{declined:?}");
    }
}

#[test]
fn keywords_of_other_types_are_read_and_ignored() {
    let with_items = obj(&[
        ("type", s("object")),
        ("items", obj(&[("type", s("string"))])),
    ]);
    let plain = obj(&[("type", s("object"))]);
    assert!(translate(&with_items, None).is_some());
    assert_eq!(translate(&with_items, None), translate(&plain, None));
    let required = obj(&[
        ("type", s("array")),
        ("required", Json::Array(vec![s("unlisted")])),
    ]);
    assert_eq!(
        translate(&required, None),
        translate(&obj(&[("type", s("array"))]), None)
    );
    // Without a type: every type, each under its keywords; any value when none constrains.
    let untyped = translate(&obj(&[("minLength", Json::Number(Some(2)))]), None).unwrap();
    assert!(
        untyped.contains("any_of ::= 'null' | boolean | number | str | array | object;\n"),
        "{untyped}"
    );
    let any = obj(&[("items", obj(&[]))]);
    assert_eq!(translate(&any, None), None);
    // (`additionalItems` beside one `items` schema: no effect)
    let extra = obj(&[
        ("type", s("array")),
        ("items", obj(&[("type", s("string"))])),
        ("additionalItems", Json::Bool(false)),
    ]);
    let items = obj(&[
        ("type", s("array")),
        ("items", obj(&[("type", s("string"))])),
    ]);
    assert!(translate(&extra, None).is_some());
    assert_eq!(translate(&extra, None), translate(&items, None));
    let bad_items = obj(&[
        ("type", s("object")),
        ("items", obj(&[("pattern", s("a"))])),
    ]);
    assert_eq!(translate(&bad_items, None), None);
}

#[test]
fn anchored_patterns_print_the_python_translators_regex() {
    let rule = |p: &str| {
        let text = translate(&obj(&[("type", s("string")), ("pattern", s(p))]), None)?;
        text.lines()
            .find_map(|l| l.strip_prefix("str ::= "))
            .map(|l| l.trim_end_matches(';').to_owned())
    };
    assert_eq!(
        rule("^[a-zA-Z0-9_]+$").unwrap(),
        r##"#"\x22[0-9A-Z_a-z]+\x22""##
    );
    assert_eq!(
        rule("^([a-z])([a-z0-9-])*$").unwrap(),
        r##"#"\x22[a-z][\-0-9a-z]*\x22""##
    );
    // (nested counts merge; a counted character past 8 is the engine's `json_len!`)
    assert_eq!(rule("^(a?){2,5}$").unwrap(), r##"#"\x22a{0,5}\x22""##);
    assert_eq!(
        rule("^((ab){2})+$").unwrap(),
        r##"#"\x22(?:(?:ab){2})+\x22""##
    );
    assert_eq!(
        rule(r"^[A-Fa-f\d]{24}$").unwrap(),
        r##"'"' json_len!(#"[0-9A-Fa-f]*", 24, 24) '"'"##
    );
    assert_eq!(
        rule("^x{9}y{9}$").unwrap(),
        r##"'"' json_len!(#"x*y{9}", 18, 18) '"'"##
    );
    for declined in [
        "a+",
        "^(a|b)$",
        "^a.b$",
        r"^\/$",
        "^[^a]$",
        r"^\s$",
        "^{1}$",
        "^a**$",
        "^a{3,2}$",
        "^[]$",
        "^()$",
        "^a{2000000}$",
    ] {
        assert_eq!(rule(declined), None, "{declined}");
    }
}

#[test]
fn required_names_not_listed_are_members_of_the_other_keys_value() {
    let schema = |props: Vec<(&str, Json)>| {
        obj(&[
            ("type", s("object")),
            ("properties", obj(&props)),
            ("required", Json::Array(vec![s("z"), s("a"), s("b")])),
        ])
    };
    let unlisted = schema(vec![("a", obj(&[("type", s("string"))]))]);
    let listed = schema(vec![
        ("a", obj(&[("type", s("string"))])),
        ("b", obj(&[])),
        ("z", obj(&[])),
    ]);
    assert!(translate(&unlisted, None).is_some());
    assert_eq!(translate(&unlisted, None), translate(&listed, None));
    // (the two are different objects for the Python translator: two rules)
    let both = obj(&[
        ("type", s("object")),
        ("properties", obj(&[("x", unlisted), ("y", listed)])),
    ]);
    let text = translate(&both, None).unwrap();
    assert!(
        text.contains("object_1 ::=") && text.contains("object_2 ::="),
        "{text}"
    );
}

#[test]
fn one_of_branches_of_different_kinds_is_their_any_of() {
    let branches = Json::Array(vec![
        obj(&[("type", s("string"))]),
        obj(&[("type", s("integer"))]),
    ]);
    let one = obj(&[("oneOf", branches.clone())]);
    let any = obj(&[("anyOf", branches)]);
    assert!(translate(&one, None).is_some());
    assert_eq!(translate(&one, None), translate(&any, None));
    let objects = obj(&[(
        "oneOf",
        Json::Array(vec![
            obj(&[("type", s("object"))]),
            obj(&[("type", s("object")), ("required", Json::Array(vec![]))]),
        ]),
    )]);
    assert_eq!(translate(&objects, None), None);
}
