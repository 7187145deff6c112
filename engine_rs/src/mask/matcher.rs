//! Per-sequence matcher: token acceptance, rollback, forced bytes and exact bitmasks.

use std::sync::Arc;

use super::CompiledGrammar;
use crate::dfa::ByteSet;
use crate::earley::Recognizer;
use crate::error::EngineError;
use crate::vocab::TokenTrie;

/// Longest forced continuation reported by [`Matcher::forced_bytes`].
const MAX_FORCED: usize = 4096;

/// One generated sequence's parse state. Cloning forks it (cheap relative to a mask).
#[derive(Clone)]
pub struct Matcher {
    cg: Arc<CompiledGrammar>,
    rec: Recognizer,
    /// Recognizer length after each accepted token (EOS repeats the previous length).
    token_ends: Vec<u32>,
    /// An EOS token was accepted: nothing more may follow.
    stopped: bool,
}

impl Matcher {
    pub fn new(cg: Arc<CompiledGrammar>) -> Matcher {
        let rec = Recognizer::new(cg.grammar.clone());
        Matcher {
            cg,
            rec,
            token_ends: Vec::new(),
            stopped: false,
        }
    }

    pub fn compiled(&self) -> &Arc<CompiledGrammar> {
        &self.cg
    }

    pub fn recognizer(&self) -> &Recognizer {
        &self.rec
    }

    /// Whether an EOS token was accepted, or the output is complete and nothing can follow.
    pub fn is_finished(&self) -> bool {
        self.stopped || (self.rec.is_complete() && self.rec.is_dead())
    }

    /// Whether the output so far is a complete sentence (EOS is allowed now).
    pub fn can_finish(&self) -> bool {
        !self.stopped && self.rec.is_complete()
    }

    /// Number of tokens accepted (EOS and `accept_bytes` calls count as one each).
    pub fn num_tokens(&self) -> usize {
        self.token_ends.len()
    }

    pub fn reset(&mut self) {
        self.rec.reset();
        self.token_ends.clear();
        self.stopped = false;
    }

    /// Accepts a token if it keeps the output completable; otherwise returns `false` unchanged.
    /// Special tokens other than EOS, padding ids and out-of-range ids are never accepted.
    pub fn accept_token(&mut self, id: u32) -> Result<bool, EngineError> {
        if self.stopped {
            return Ok(false);
        }
        let vocab = &self.cg.vocab;
        if vocab.eos_token_ids().contains(&id) {
            if self.rec.is_complete() {
                self.stopped = true;
                self.token_ends.push(self.rec.len() as u32);
                return Ok(true);
            }
            return Ok(false);
        }
        if !vocab.is_text_token(id) {
            return Ok(false);
        }
        let cg = self.cg.clone();
        let bytes = cg.vocab.token_bytes(id).unwrap_or_default();
        self.accept_bytes(bytes)
    }

    /// Accepts raw bytes as one step (rolled back as one token).
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> Result<bool, EngineError> {
        if self.stopped {
            return Ok(false);
        }
        if self.rec.try_feed(bytes)? {
            self.token_ends.push(self.rec.len() as u32);
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Undoes the last `n` accepted steps (all of them if `n` is larger).
    pub fn rollback(&mut self, n: usize) {
        let keep = self.token_ends.len().saturating_sub(n);
        self.token_ends.truncate(keep);
        let len = self.token_ends.last().copied().unwrap_or(0) as usize;
        self.rec.rollback_to(len);
        self.stopped = false;
    }

    /// The longest byte string that every valid continuation starts with (empty when EOS or
    /// several bytes are possible).
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        let base = self.rec.len();
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        while out.len() < MAX_FORCED && !self.rec.is_complete() {
            let allowed = self.rec.allowed_bytes();
            if allowed.len() != 1 {
                break;
            }
            let b = allowed.iter().next().expect("one byte");
            if !self.rec.feed_byte(b) {
                break;
            }
            out.push(b);
        }
        self.rec.rollback_to(base);
        out
    }

    /// Writes the mask of allowed tokens into `out` (at least [`CompiledGrammar::mask_words`]
    /// words; bit `i` of word `i / 32` set ⇔ token `i` allowed).
    pub fn fill_next_token_bitmask(&mut self, out: &mut [u32]) -> Result<(), EngineError> {
        let words = self.cg.index.words;
        let out = &mut out[..words];
        out.iter_mut().for_each(|w| *w = 0);
        if self.stopped {
            return Ok(());
        }
        let cg = self.cg.clone();
        let first = self.rec.allowed_bytes();
        if !first.is_empty() {
            // The deepest slice depth any scanned terminal offers.
            let depth = self
                .rec
                .scan_terminals()
                .map(|(sym, state, _)| cg.slice_depth(sym, state))
                .max()
                .unwrap_or(0);
            for bucket in &cg.index.buckets {
                if bucket.max_len < depth as usize {
                    for (o, m) in out.iter_mut().zip(&bucket.mask) {
                        *o |= m;
                    }
                } else {
                    walk(&mut self.rec, &bucket.trie, &first, out)?;
                }
            }
            walk(&mut self.rec, &cg.index.rest, &first, out)?;
        }
        if self.rec.is_complete() {
            for &e in cg.vocab.eos_token_ids() {
                if (e as usize) < words * 32 {
                    out[e as usize / 32] |= 1 << (e % 32);
                }
            }
        }
        Ok(())
    }

    /// Whether `id` is allowed now, by trying it (reference for tests; slow).
    pub fn is_token_allowed(&mut self, id: u32) -> Result<bool, EngineError> {
        let saved = (self.token_ends.len(), self.stopped);
        let ok = self.accept_token(id)?;
        if ok {
            self.rollback(1);
        }
        debug_assert_eq!((self.token_ends.len(), self.stopped), saved);
        Ok(ok)
    }
}

/// Walks a token trie depth-first with recognizer push (feed) and pop (rollback), setting the bit
/// of every token whose bytes the recognizer accepts. First bytes are filtered by `first`.
fn walk(
    rec: &mut Recognizer,
    trie: &TokenTrie,
    first: &ByteSet,
    out: &mut [u32],
) -> Result<(), EngineError> {
    let base = rec.len();
    let nodes = trie.nodes();
    let mut i = 1;
    while i < nodes.len() {
        let n = &nodes[i];
        let depth = n.depth();
        if depth == 1 && !first.contains(n.byte()) {
            i = n.subtree_end();
            continue;
        }
        rec.rollback_to(base + depth - 1);
        match rec.try_feed_byte(n.byte()) {
            Ok(true) => {
                if let Some(t) = n.token() {
                    out[t as usize / 32] |= 1 << (t % 32);
                    if n.has_extra_tokens() {
                        for &t in trie.extra_tokens(i) {
                            out[t as usize / 32] |= 1 << (t % 32);
                        }
                    }
                }
                i += 1;
            }
            Ok(false) => i = n.subtree_end(),
            Err(e) => {
                rec.rollback_to(base);
                return Err(e);
            }
        }
    }
    rec.rollback_to(base);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{CompileOptions, Grammar};
    use crate::vocab::Vocabulary;

    /// A vocabulary with every 1- and 2-byte string over an alphabet that exercises JSON, plus
    /// longer words (slice buckets), multi-byte UTF-8, partial UTF-8 and an EOS token.
    fn vocab() -> Arc<Vocabulary> {
        let alphabet: &[u8] = b"{}[]\":, \n\\ab01.-eEtrufalsn";
        let mut toks: Vec<Option<Vec<u8>>> = vec![None]; // id 0 = EOS
        for &a in alphabet {
            toks.push(Some(vec![a]));
            for &b in alphabet {
                toks.push(Some(vec![a, b]));
            }
        }
        for w in [
            "true",
            "false",
            "null",
            "\"a\"",
            "\": ",
            "\", \"",
            "hello world",
            "ab\"",
            "é",
            "\u{1F422}",
            "0123456789",
            "-1.5e",
            "\": {\"",
            "abcdefghijklmnopqrstuvwxyz",
            "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdef",
        ] {
            toks.push(Some(w.as_bytes().to_vec()));
        }
        toks.push(Some(vec![0xC3])); // partial UTF-8 (byte fallback)
        toks.push(Some(vec![0xA9]));
        toks.push(Some(b"e".to_vec())); // duplicate bytes
        Arc::new(Vocabulary::from_byte_tokens(&toks, &[0], Some(toks.len() + 5)).unwrap())
    }

    fn brute(m: &mut Matcher, words: usize) -> Vec<u32> {
        let mut out = vec![0u32; words];
        for id in 0..(m.cg.vocab.size() as u32) {
            if m.is_token_allowed(id).unwrap() {
                out[id as usize / 32] |= 1 << (id % 32);
            }
        }
        out
    }

    fn check(grammar: &str, inputs: &[&[u8]]) {
        let g = Arc::new(Grammar::compile(grammar, &CompileOptions::default()).unwrap());
        let cg = Arc::new(CompiledGrammar::new(g, vocab()));
        let words = cg.mask_words();
        for input in inputs {
            let mut m = cg.matcher();
            for k in 0..=input.len() {
                if k > 0 {
                    assert!(
                        m.accept_bytes(&input[k - 1..k]).unwrap(),
                        "{input:?} at {k}"
                    );
                }
                let mut fast = vec![0u32; words];
                m.fill_next_token_bitmask(&mut fast).unwrap();
                let slow = brute(&mut m, words);
                assert_eq!(
                    fast,
                    slow,
                    "mask differs after {:?}",
                    String::from_utf8_lossy(&input[..k])
                );
            }
        }
    }

    #[test]
    fn json_masks_equal_brute_force() {
        check(
            crate::builtin_grammar("json").unwrap(),
            &[
                br#"{"ab": [1, -0.5e1, true, null], "e\n": {"x": "\u00e9\\"}}"#,
                b" [ \"\xc3\xa9\xf0\x9f\x90\xa2\" , false ] ",
            ],
        );
    }

    #[test]
    fn bounded_strings_and_except_masks_equal_brute_force() {
        check(
            r#"start ::= "\"" #"[a-z ]{0,5}" "\"" | "<" except!(">>", 12) ">>";"#,
            &[b"\"ab c\"", b"<a>b>\xc3\xa9 >>"],
        );
    }

    #[test]
    fn rollback_and_fork_match_replay() {
        let g = Arc::new(
            Grammar::compile(
                crate::builtin_grammar("json").unwrap(),
                &CompileOptions::default(),
            )
            .unwrap(),
        );
        let cg = Arc::new(CompiledGrammar::new(g, vocab()));
        let v = cg.vocab().clone();
        let id = |s: &[u8]| {
            (0..v.size() as u32)
                .find(|&i| v.token_bytes(i) == Some(s))
                .unwrap()
        };
        let toks = [
            id(b"{"),
            id(b"\"a"),
            id(b"\":"),
            id(b" ["),
            id(b"1"),
            id(b"]}"),
        ];
        let mut m = cg.matcher();
        for &t in &toks {
            assert!(m.accept_token(t).unwrap());
        }
        assert!(m.can_finish());
        let forked = m.clone();
        m.rollback(3);
        let mut replay = cg.matcher();
        for &t in &toks[..3] {
            replay.accept_token(t).unwrap();
        }
        let (mut a, mut b) = (vec![0; cg.mask_words()], vec![0; cg.mask_words()]);
        m.fill_next_token_bitmask(&mut a).unwrap();
        replay.fill_next_token_bitmask(&mut b).unwrap();
        assert_eq!(a, b);
        assert!(forked.can_finish());
        assert!(
            m.accept_token(0).is_ok_and(|ok| !ok),
            "EOS refused before completion"
        );
        let mut f = forked;
        assert!(f.accept_token(0).unwrap() && f.is_finished());
    }

    #[test]
    fn forced_bytes() {
        let g = Arc::new(
            Grammar::compile(
                r#"start ::= "{\"name\": " #"[a-z]+" "}";"#,
                &CompileOptions::default(),
            )
            .unwrap(),
        );
        let cg = Arc::new(CompiledGrammar::new(g, vocab()));
        let mut m = cg.matcher();
        assert_eq!(m.forced_bytes(), b"{\"name\": ".to_vec());
        assert!(m.accept_bytes(b"{\"name\": ab").unwrap());
        assert_eq!(m.forced_bytes(), Vec::<u8>::new());
        assert_eq!(m.num_tokens(), 1);
    }
}
