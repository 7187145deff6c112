use super::decode::byte_level_encode;
use super::*;

fn some(s: &[&str]) -> Vec<Option<String>> {
    s.iter().map(|t| Some(t.to_string())).collect()
}

fn added(id: u32, content: &str, special: bool) -> AddedToken {
    AddedToken {
        id,
        content: content.to_string(),
        special,
    }
}

fn text_ids(v: &Vocabulary) -> Vec<u32> {
    v.text_tokens().map(|(id, _)| id).collect()
}

/// The trie holds exactly the text tokens, each at the node of its bytes.
fn check_trie(v: &Vocabulary) {
    let trie = v.trie();
    assert_eq!(trie.num_tokens(), v.num_text_tokens());
    for (id, bytes) in v.text_tokens() {
        let node = trie.find(bytes).expect("text token in trie");
        assert!(trie.tokens_at(node).any(|t| t == id), "token {id}");
    }
    let mut count = 0;
    for i in 0..trie.len() {
        for t in trie.tokens_at(i) {
            assert!(v.is_text_token(t));
            count += 1;
        }
    }
    assert_eq!(count, v.num_text_tokens());
    // Every node's parent holds its path less the last byte.
    let parent = trie.parents();
    for (i, &p) in parent.iter().enumerate().skip(1) {
        let path = trie.path_of(i);
        assert_eq!(trie.path_of(p as usize), path[..path.len() - 1], "node {i}");
    }
}

#[test]
fn from_byte_tokens_basic_and_padding() {
    let toks: Vec<Option<&[u8]>> = vec![Some(b"a"), Some(b"bc"), None, Some(b""), Some(&[0xFF])];
    let v = Vocabulary::from_byte_tokens(&toks, &[2], Some(8)).unwrap();
    assert_eq!(v.size(), 8);
    assert_eq!(v.token_bytes(1), Some(&b"bc"[..]));
    assert_eq!(v.token_bytes(4), Some(&[0xFFu8][..]));
    assert_eq!(v.token_bytes(7), Some(&b""[..]));
    assert_eq!(v.token_bytes(8), None);
    assert_eq!(v.eos_token_ids(), &[2]);
    assert!(v.is_special(2) && !v.is_padding(2));
    assert!(!v.is_special(0) && !v.is_padding(0));
    // The empty token is not special but is not a text token either.
    assert!(!v.is_special(3) && !v.is_text_token(3));
    for id in 5..8 {
        assert!(v.is_special(id) && v.is_padding(id) && !v.is_text_token(id));
    }
    assert!(v.is_special(100) && v.is_padding(100) && !v.is_text_token(100));
    assert_eq!(text_ids(&v), vec![0, 1, 4]);
    assert_eq!(v.num_text_tokens(), 3);
    assert_eq!(v.max_token_len(), 2);
    assert_eq!(v.decode(&[1, 0, 4]).unwrap(), b"bca\xff");
    assert_eq!(v.decode(&[1, 9]), Err(9));
    check_trie(&v);
}

#[test]
fn eos_is_special_even_with_bytes() {
    let toks = vec![Some("x"), Some("</s>")];
    let v = Vocabulary::from_byte_tokens(&toks, &[1, 1], None).unwrap();
    assert_eq!(v.eos_token_ids(), &[1]);
    assert!(v.is_special(1));
    assert_eq!(v.token_bytes(1), Some(&b"</s>"[..]));
    assert_eq!(text_ids(&v), vec![0]);
}

#[test]
fn size_errors() {
    let toks = vec![Some("a"), None, Some("b"), None];
    // Cutting off only special ids is fine.
    let v = Vocabulary::from_byte_tokens(&toks, &[], Some(3)).unwrap();
    assert_eq!(v.size(), 3);
    let err = Vocabulary::from_byte_tokens(&toks, &[], Some(2)).unwrap_err();
    assert_eq!(
        err,
        VocabError::SizeTooSmall {
            vocab_size: 2,
            needed: 4,
            id: 2
        }
    );
    assert!(err.to_string().contains("vocab_size 2"), "{err}");
    let err = Vocabulary::from_byte_tokens(&toks, &[4], None).unwrap_err();
    assert_eq!(err, VocabError::EosOutOfRange { id: 4, size: 4 });
    let none: Vec<Option<&str>> = vec![];
    assert_eq!(
        Vocabulary::from_byte_tokens(&none, &[], None).unwrap_err(),
        VocabError::Empty
    );
    // Padding-only vocabulary is allowed (no text tokens).
    let v = Vocabulary::from_byte_tokens(&none, &[], Some(4)).unwrap();
    assert_eq!(v.num_text_tokens(), 0);
    assert!(v.trie().is_empty());
}

#[test]
fn hf_byte_level() {
    // GPT-2 style: "Ġ" = space, "Ċ" = newline, "Ã©" = é.
    let mut toks = some(&["a", "Ġhello", "ĊĊ", "Ã©", "Ã", "<|endoftext|>"]);
    toks.push(None); // a hole in the model vocabulary
    let add = [
        added(5, "<|endoftext|>", true),
        added(7, "<|im_start|>", true),
        added(8, "  custom\n", false),
    ];
    let v =
        Vocabulary::from_hf_tokens(&toks, TokenEncoding::ByteLevel, &add, &[5], Some(12)).unwrap();
    assert_eq!(v.size(), 12);
    assert_eq!(v.token_bytes(1), Some(&b" hello"[..]));
    assert_eq!(v.token_bytes(2), Some(&b"\n\n"[..]));
    assert_eq!(v.token_bytes(3), Some("é".as_bytes()));
    assert_eq!(v.token_bytes(4), Some(&[0xC3u8][..]));
    assert_eq!(v.token_bytes(5), Some(&b"<|endoftext|>"[..]));
    assert!(v.is_special(5));
    assert!(v.is_padding(6), "hole in the model vocabulary is padding");
    assert!(v.is_special(7) && !v.is_padding(7));
    // A non-special added token produces its literal content (not byte-level decoded).
    assert_eq!(v.token_bytes(8), Some(&b"  custom\n"[..]));
    assert!(v.is_text_token(8));
    for id in 9..12 {
        assert!(v.is_padding(id));
    }
    assert_eq!(text_ids(&v), vec![0, 1, 2, 3, 4, 8]);
    assert_eq!(v.eos_token_ids(), &[5]);
    check_trie(&v);

    // Every byte through the alphabet.
    let all: Vec<Option<String>> = (0..=255u8).map(|b| Some(byte_level_encode(&[b]))).collect();
    let v = Vocabulary::from_hf_tokens(&all, TokenEncoding::ByteLevel, &[], &[], None).unwrap();
    for b in 0..=255u8 {
        assert_eq!(v.token_bytes(b as u32), Some(&[b][..]));
    }
    check_trie(&v);
}

#[test]
fn hf_decode_error_is_typed() {
    let toks = some(&["ok", "bad token"]);
    let err =
        Vocabulary::from_hf_tokens(&toks, TokenEncoding::ByteLevel, &[], &[], None).unwrap_err();
    match &err {
        VocabError::Decode { id, token, .. } => {
            assert_eq!(*id, 1);
            assert_eq!(token, "bad token");
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("token 1") && msg.contains("byte-level"),
        "{msg}"
    );
    // An added token at that id overrides the undecodable model entry.
    let v = Vocabulary::from_hf_tokens(
        &toks,
        TokenEncoding::ByteLevel,
        &[added(1, "bad token", true)],
        &[],
        None,
    )
    .unwrap();
    assert!(v.is_special(1));
}

#[test]
fn hf_sentencepiece_with_byte_fallback_and_duplicates() {
    let mut toks = some(&["<unk>", "<s>", "</s>"]);
    toks.extend((0..=255u8).map(|b| Some(format!("<0x{b:02X}>"))));
    let base = toks.len() as u32;
    toks.extend(some(&["▁", "e", "▁the", "▁▁", "日本", "<0x41>x"]));
    let add = [
        added(0, "<unk>", true),
        added(1, "<s>", true),
        added(2, "</s>", true),
    ];
    let sp = TokenEncoding::SentencePiece {
        byte_fallback: true,
    };
    let v = Vocabulary::from_hf_tokens(&toks, sp, &add, &[2], None).unwrap();
    assert_eq!(v.size(), base as usize + 6);
    assert!(v.is_special(0) && v.is_special(1) && v.is_special(2));
    for b in 0..=255u8 {
        assert_eq!(
            v.token_bytes(3 + b as u32),
            Some(&[b][..]),
            "byte token {b}"
        );
        assert!(v.is_text_token(3 + b as u32));
    }
    assert_eq!(v.token_bytes(base), Some(&b" "[..]));
    assert_eq!(v.token_bytes(base + 1), Some(&b"e"[..]));
    assert_eq!(v.token_bytes(base + 2), Some(&b" the"[..]));
    assert_eq!(v.token_bytes(base + 3), Some(&b"  "[..]));
    assert_eq!(v.token_bytes(base + 4), Some("日本".as_bytes()));
    // Only an exact `<0xNN>` piece is a byte token.
    assert_eq!(v.token_bytes(base + 5), Some(&b"<0x41>x"[..]));
    // Duplicates: <0x65> and "e" both produce "e" and both are in the trie at one node.
    let trie = v.trie();
    let node = trie.find(b"e").unwrap();
    assert_eq!(
        trie.tokens_at(node).collect::<Vec<_>>(),
        vec![3 + 0x65, base + 1]
    );
    let node = trie.find(b" ").unwrap();
    assert_eq!(
        trie.tokens_at(node).collect::<Vec<_>>(),
        vec![3 + 0x20, base]
    );
    check_trie(&v);

    // Without byte fallback the pieces are literal text.
    let v = Vocabulary::from_hf_tokens(
        &toks,
        TokenEncoding::SentencePiece {
            byte_fallback: false,
        },
        &add,
        &[2],
        None,
    )
    .unwrap();
    assert_eq!(v.token_bytes(3 + 0x41), Some(&b"<0x41>"[..]));
}

#[test]
fn hf_added_tokens_extend_the_vocabulary_and_conflicts() {
    let toks = some(&["a", "b"]);
    let add = [added(5, "<tool>", false), added(4, "<eot>", true)];
    let v = Vocabulary::from_hf_tokens(&toks, TokenEncoding::Raw, &add, &[4], None).unwrap();
    assert_eq!(v.size(), 6);
    assert!(v.is_padding(2) && v.is_padding(3));
    assert!(v.is_text_token(5));
    // vocab_size cutting off the non-special added token is an error...
    let err =
        Vocabulary::from_hf_tokens(&toks, TokenEncoding::Raw, &add, &[], Some(5)).unwrap_err();
    assert!(
        matches!(err, VocabError::SizeTooSmall { id: 5, .. }),
        "{err:?}"
    );
    // ...cutting off only a special one is not.
    let v = Vocabulary::from_hf_tokens(&toks, TokenEncoding::Raw, &add[1..], &[], Some(4)).unwrap();
    assert_eq!(v.size(), 4);
    // The same id added twice with different content.
    let err = Vocabulary::from_hf_tokens(
        &toks,
        TokenEncoding::Raw,
        &[added(3, "x", true), added(3, "y", true)],
        &[],
        None,
    )
    .unwrap_err();
    assert!(
        matches!(err, VocabError::DuplicateId { id: 3, .. }),
        "{err:?}"
    );
    // Identical repeats are harmless.
    Vocabulary::from_hf_tokens(
        &toks,
        TokenEncoding::Raw,
        &[added(3, "x", true), added(3, "x", true)],
        &[],
        None,
    )
    .unwrap();
}

fn b64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = c.len();
        let w = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for k in 0..4 {
            if k <= n {
                out.push(A[(w >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn tiktoken_rank_file() {
    let toks: Vec<&[u8]> = vec![b"!", b" the", b"\n\n", &[0xE6, 0x97], b"hello world"];
    let mut file = String::new();
    for (rank, t) in toks.iter().enumerate() {
        // Rank 3 is left out: a gap becomes padding.
        let rank = if rank >= 3 { rank + 1 } else { rank };
        file.push_str(&format!("{} {}\r\n", b64(t), rank));
    }
    file.push('\n');
    let specials = vec![
        ("<|endoftext|>".to_string(), 6u32),
        ("<|im_end|>".to_string(), 8),
    ];
    let v = Vocabulary::from_tiktoken(file.as_bytes(), &specials, &[6, 8], Some(10)).unwrap();
    assert_eq!(v.size(), 10);
    assert_eq!(v.token_bytes(0), Some(&b"!"[..]));
    assert_eq!(v.token_bytes(1), Some(&b" the"[..]));
    assert_eq!(v.token_bytes(2), Some(&b"\n\n"[..]));
    assert!(v.is_padding(3));
    assert_eq!(v.token_bytes(4), Some(&[0xE6u8, 0x97][..]));
    assert_eq!(v.token_bytes(5), Some(&b"hello world"[..]));
    assert_eq!(v.token_bytes(6), Some(&b"<|endoftext|>"[..]));
    assert!(v.is_special(6) && !v.is_padding(6));
    assert!(v.is_padding(7) && v.is_padding(9));
    assert_eq!(v.eos_token_ids(), &[6, 8]);
    assert_eq!(text_ids(&v), vec![0, 1, 2, 4, 5]);
    check_trie(&v);
}

#[test]
fn tiktoken_errors() {
    let err = Vocabulary::from_tiktoken(b"IQ== 0\nIg==\n", &[], &[], None).unwrap_err();
    assert!(
        matches!(err, VocabError::Tiktoken { line: 2, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("line 2"), "{err}");
    let err = Vocabulary::from_tiktoken(b"IQ== x\n", &[], &[], None).unwrap_err();
    assert!(err.to_string().contains("rank \"x\""), "{err}");
    let err = Vocabulary::from_tiktoken(b"I*== 0\n", &[], &[], None).unwrap_err();
    assert!(err.to_string().contains("invalid base64"), "{err}");
    let err = Vocabulary::from_tiktoken(b"IQ== 0\nIg== 0\n", &[], &[], None).unwrap_err();
    assert!(
        matches!(err, VocabError::DuplicateId { id: 0, .. }),
        "{err:?}"
    );
    let sp = vec![("<s>".to_string(), 0u32)];
    let err = Vocabulary::from_tiktoken(b"IQ== 0\n", &sp, &[], None).unwrap_err();
    assert!(
        matches!(err, VocabError::DuplicateId { id: 0, .. }),
        "{err:?}"
    );
    let err = Vocabulary::from_tiktoken(b"IQ== 0 1\n", &[], &[], None).unwrap_err();
    assert!(err.to_string().contains("two fields"), "{err}");
    assert_eq!(
        Vocabulary::from_tiktoken(b"\n\n", &[], &[], None).unwrap_err(),
        VocabError::Empty
    );
}

#[test]
fn fingerprint_is_stable_and_sensitive() {
    let a = Vocabulary::from_byte_tokens(&[Some("ab"), Some("c"), None], &[2], None).unwrap();
    // Same vocabulary through another constructor: same fingerprint.
    let b = Vocabulary::from_hf_tokens(
        &some(&["ab", "c"]),
        TokenEncoding::Raw,
        &[added(2, "", true)],
        &[2],
        None,
    )
    .unwrap();
    assert_eq!(a.fingerprint(), b.fingerprint());
    let variants = [
        // Token boundary moved.
        Vocabulary::from_byte_tokens(&[Some("a"), Some("bc"), None], &[2], None).unwrap(),
        // EOS differs.
        Vocabulary::from_byte_tokens(&[Some("ab"), Some("c"), None], &[], None).unwrap(),
        // Size differs (padding).
        Vocabulary::from_byte_tokens(&[Some("ab"), Some("c"), None], &[2], Some(4)).unwrap(),
        // Special flag differs.
        Vocabulary::from_hf_tokens(
            &some(&["ab", "c"]),
            TokenEncoding::Raw,
            &[added(1, "c", true), added(2, "", true)],
            &[2],
            None,
        )
        .unwrap(),
        // Bytes differ.
        Vocabulary::from_byte_tokens(&[Some("ab"), Some("d"), None], &[2], None).unwrap(),
    ];
    for (k, v) in variants.iter().enumerate() {
        assert_ne!(v.fingerprint(), a.fingerprint(), "variant {k}");
    }
    // Pinned value: the fingerprint is a cache key and must not change across builds or
    // platforms; update this only together with a deliberate format change.
    assert_eq!(
        a.fingerprint(),
        PINNED_FINGERPRINT,
        "{:#018x}",
        a.fingerprint()
    );
}

const PINNED_FINGERPRINT: u64 = 0x567d_a2b9_de6a_c0e1;

#[test]
fn large_vocabulary_trie_is_consistent() {
    // A synthetic byte-level vocabulary: all bytes plus many multi-byte tokens.
    let mut toks: Vec<Option<Vec<u8>>> = (0..=255u8).map(|b| Some(vec![b])).collect();
    let mut x: u64 = 12345;
    for _ in 0..5000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = 2 + (x >> 60) as usize;
        let t: Vec<u8> = (0..len)
            .map(|k| b"abcde \n{}\""[((x >> (k * 3)) % 10) as usize])
            .collect();
        toks.push(Some(t));
    }
    let v = Vocabulary::from_byte_tokens(&toks, &[], Some(6000)).unwrap();
    check_trie(&v);
    assert_eq!(v.num_text_tokens(), 5256);
}

/// Timing of the Llama 3 vocabulary preparation in Rust alone (decode + trie + fingerprint).
/// Run with `STRUCTOUT_LLAMA3_TOKENIZER=/path/to/tokenizer.json cargo test --release --lib
/// llama3_prepare_timing -- --ignored --nocapture`.
#[test]
#[ignore = "needs STRUCTOUT_LLAMA3_TOKENIZER; timing only"]
fn llama3_prepare_timing() {
    let Ok(path) = std::env::var("STRUCTOUT_LLAMA3_TOKENIZER") else {
        return;
    };
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).expect("read tokenizer.json")).unwrap();
    let vocab = json["model"]["vocab"].as_object().unwrap();
    let mut tokens: Vec<Option<String>> = vec![None; vocab.len()];
    for (tok, id) in vocab {
        tokens[id.as_u64().unwrap() as usize] = Some(tok.clone());
    }
    let added: Vec<AddedToken> = json["added_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| AddedToken {
            id: a["id"].as_u64().unwrap() as u32,
            content: a["content"].as_str().unwrap().to_string(),
            special: a["special"].as_bool().unwrap(),
        })
        .collect();
    for round in 0..5 {
        let t0 = std::time::Instant::now();
        let v = Vocabulary::from_hf_tokens(
            &tokens,
            TokenEncoding::ByteLevel,
            &added,
            &[128001, 128009],
            None,
        )
        .unwrap();
        let t1 = t0.elapsed();
        let s0 = std::time::Instant::now();
        let trie = TokenTrie::build(v.text_tokens()).unwrap();
        let t2 = s0.elapsed();
        println!(
            "round {round}: from_hf_tokens {:.1} ms (trie alone {:.1} ms), size {}, nodes {}",
            t1.as_secs_f64() * 1e3,
            t2.as_secs_f64() * 1e3,
            v.size(),
            trie.len()
        );
    }
}
