//! The disk layer of the compiled-grammar cache: a compiled grammar written by one process is
//! loaded by the next instead of being compiled again.
//!
//! One file per (grammar text, options, vocabulary fingerprint, engine build), named by a hash of
//! those and laid out as
//!
//! ```text
//! MAGIC | FORMAT: u32 | build id: str | text: str | options | vocabulary fingerprint: u64 | LNF
//!       | checksum of all the bytes before it: u64
//! ```
//!
//! Invariants: an entry is used only when its magic, format, build id and checksum match **and**
//! its key (the full text, the options and the fingerprint) equals the request's, so a hash
//! collision, a foreign or stale file, or a torn write is a miss, never a wrong grammar. Decoding
//! checks every index the recognizer and the mask code use (see [`crate::persist`]), so even a
//! well-formed hostile file cannot make them read out of bounds. Files are written to a temporary
//! name in the same directory and renamed over the entry, so readers see a whole file or none.
//!
//! Loading streams the file once through a small buffer ([`Reader`]): each chunk is checksummed
//! and decoded into the grammar's own tables while it is in cache, and the grammar is returned
//! only once the checksum at the end matches (decoding first is safe: it checks every bound
//! itself, and no length can make it allocate more than twice the file's size).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::CompiledGrammar;
use crate::dfa::Dfa;
use crate::grammar::{CompileOptions, Grammar};
use crate::kbnf::ast::MemberKind;
use crate::lnf::{AnyOrder, ExceptInfo, LSym, Lnf, MemberSets, ParamPos, Unique, NOT_PARAMETRIC};
use crate::persist::{ensure, Checksum, DecodeError, Reader, Writer};
use crate::vocab::Vocabulary;

const MAGIC: &[u8; 8] = b"structog";
/// Bump when the layout changes (the build id also changes with any engine source change).
/// 3: the checksum at the end, over everything before it (read in one streaming pass); a DFA's
/// accepting flags before its transitions. 4: an eight-lane checksum; entries named by it.
/// 6: `unique!` counts after each `any_order!` entry. 7: member-set counts after them, and the
/// members' kinds of those (`any_order!` with interned member sets).
const FORMAT: u32 = 7;
/// The engine build: its version and a hash of its sources (see `build.rs`). An entry written by
/// another build is never read, since the same text may compile differently there.
const BUILD: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "+",
    env!("STRUCTOUT_ENGINE_SOURCE_HASH")
);

/// Where the entry for this key lives under `dir`.
pub(crate) fn entry_path(dir: &Path, text: &str, options: &CompileOptions, vocab: u64) -> PathBuf {
    let mut key = Writer::default();
    key.str(BUILD);
    key.u32(FORMAT);
    encode_options(&mut key, options);
    key.u64(vocab);
    let key = key.into_bytes();
    // Two independent lane hashes: a large text is hashed at memory speed, not one word at a
    // time (the key bytes are self-delimiting, so key + text is unambiguous).
    let name: String = [1u64, 2]
        .iter()
        .map(|&seed| {
            let mut h = Checksum::seeded(seed);
            h.update(&key);
            h.update(text.as_bytes());
            format!("{:016x}", h.finish())
        })
        .collect();
    dir.join(format!("v{FORMAT}"))
        .join(&name[..2])
        .join(format!("{name}.grammar"))
}

/// Why an entry could not be used.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// No entry for this key.
    Missing,
    /// The file could not be read.
    Io,
    /// The file is not a whole entry of this build for this key (corrupt, truncated, foreign).
    Invalid,
}

/// The compiled grammar stored at `path` for exactly this key.
pub(crate) fn load(
    path: &Path,
    text: &str,
    options: &CompileOptions,
    vocab: &Arc<Vocabulary>,
) -> Result<CompiledGrammar, LoadError> {
    let mut file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(LoadError::Missing),
        Err(_) => return Err(LoadError::Io),
    };
    let len = file.metadata().map_err(|_| LoadError::Io)?.len();
    decode_entry(&mut file, len, text, options, vocab).map_err(|_| LoadError::Invalid)
}

/// Writes `grammar` (compiled from `text`) to `path` atomically. Not synced to the device (a
/// millisecond or so on the path of every new grammar): the checksum makes an entry that a crash
/// left half written a miss.
pub(crate) fn store(path: &Path, text: &str, grammar: &CompiledGrammar) -> std::io::Result<()> {
    write_atomic(path, &encode_entry(text, grammar))
}

/// Writes `bytes` to `path` so that readers see the old file or the whole new one: a temporary
/// file in the same directory (created with its parents), renamed over `path`. The temporary
/// name carries the process and thread, so concurrent writers never share one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("entry path has no parent"))?;
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.{:?}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id(),
        std::thread::current().id()
    ));
    let written = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

fn encode_entry(text: &str, cg: &CompiledGrammar) -> Vec<u8> {
    let mut w = Writer::default();
    for &b in MAGIC {
        w.u8(b);
    }
    w.u32(FORMAT);
    w.str(BUILD);
    w.str(text);
    encode_options(&mut w, cg.grammar.options());
    w.u64(cg.vocab.fingerprint());
    // Slice tables are not stored: they are built on first use, after loading as after compiling.
    encode_lnf(&mut w, cg.grammar.lnf());
    let mut bytes = w.into_bytes();
    let sum = Checksum::of(&bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    bytes
}

/// Decodes the entry of `len` bytes that `src` holds, for exactly this key: in one pass, its
/// checksum verified before the grammar is returned.
fn decode_entry(
    mut src: impl Read,
    len: u64,
    text: &str,
    options: &CompileOptions,
    vocab: &Arc<Vocabulary>,
) -> Result<CompiledGrammar, DecodeError> {
    let body = len
        .checked_sub(8)
        .ok_or(DecodeError("shorter than a checksum"))?;
    let mut r = Reader::stream(&mut src, body);
    let mut magic = [0u8; 8];
    for b in &mut magic {
        *b = r.u8()?;
    }
    ensure(&magic == MAGIC, "not a structout compiled grammar")?;
    ensure(r.u32()? == FORMAT, "another format version")?;
    ensure(
        r.bytes_eq(BUILD.as_bytes())?,
        "written by another engine build",
    )?;
    ensure(r.bytes_eq(text.as_bytes())?, "another grammar text")?;
    ensure(decode_options(&mut r)? == *options, "other options")?;
    ensure(r.u64()? == vocab.fingerprint(), "another vocabulary")?;
    let lnf = decode_lnf(&mut r)?;
    let sum = r.checksum()?;
    drop(r);
    let mut stored = [0u8; 8];
    src.read_exact(&mut stored)
        .map_err(|_| DecodeError("truncated"))?;
    ensure(u64::from_le_bytes(stored) == sum, "checksum mismatch")?;
    ensure(matches!(src.read(&mut [0u8; 1]), Ok(0)), "trailing bytes")?;
    let grammar = Arc::new(Grammar {
        lnf,
        options: options.clone(),
        source: Checksum::of(text.as_bytes()),
    });
    Ok(CompiledGrammar::new(grammar, vocab.clone()))
}

fn encode_options(w: &mut Writer, o: &CompileOptions) {
    w.str(&o.start);
    w.usize(o.dfa_size_limit);
    w.u32(o.max_repetition);
    w.usize(o.max_grammar_symbols);
    w.usize(o.max_items_per_set);
    w.usize(o.max_total_items);
    w.usize(o.max_work_per_byte);
    w.usize(o.mask_cache_bytes);
    w.bool(o.regular_terminals);
}

fn decode_options(r: &mut Reader<'_>) -> Result<CompileOptions, DecodeError> {
    Ok(CompileOptions {
        start: r.string()?,
        dfa_size_limit: r.usize()?,
        max_repetition: r.u32()?,
        max_grammar_symbols: r.usize()?,
        max_items_per_set: r.usize()?,
        max_total_items: r.usize()?,
        max_work_per_byte: r.usize()?,
        mask_cache_bytes: r.usize()?,
        regular_terminals: r.bool()?,
    })
}

fn encode_lnf(w: &mut Writer, l: &Lnf) {
    w.usize(l.syms.len());
    for s in &l.syms {
        let (tag, v) = match *s {
            LSym::Nt(v) => (0, v),
            LSym::Lit(v) => (1, v),
            LSym::Regex(v) => (2, v),
            LSym::Except(v) => (3, v),
            LSym::End(v) => (4, v),
        };
        w.u8(tag);
        w.u32(v);
    }
    w.u32s(&l.init_state);
    w.u32s(&l.prod_starts);
    w.u32s(&l.nt_prods);
    w.usize(l.names.len());
    for n in &l.names {
        w.str(n);
    }
    w.bytes(&l.lit_bytes);
    w.u32s(&l.lit_offsets);
    w.usize(l.dfas.len());
    for d in &l.dfas {
        d.encode(w);
    }
    w.usize(l.excepts.len());
    for e in &l.excepts {
        w.u32(e.dfa);
        w.u32(e.max);
    }
    w.bool(l.start_nullable);
    w.u32s(&l.nt_any_order);
    w.usize(l.any_orders.len());
    for a in &l.any_orders {
        w.u32(a.required);
        w.u32(a.once);
        let unique = a.unique.map(|u| vec![u.min, u.max, u.last]);
        let sets = a.sets.map(|m| {
            let repeatable = m.repeatable as u32;
            vec![m.min, m.max, m.kinds, m.members, m.required, repeatable]
        });
        for fields in [unique, sets] {
            w.bool(fields.is_some());
            fields.iter().flatten().for_each(|&x| w.u32(x));
        }
    }
    let kinds: Vec<u32> = l.member_kinds.iter().map(|&k| k as u32).collect();
    w.u32s(&kinds);
    let lhs: Vec<u32> = l.param_pos.iter().map(|p| p.lhs).collect();
    let bits: Vec<u32> = l.param_pos.iter().map(|p| p.bit).collect();
    w.u32s(&lhs);
    w.u32s(&bits);
}

/// Decodes an LNF and checks the invariants its readers index by (see [`crate::lnf`]): symbol
/// indices in range, productions that start inside `syms` and end with an `End`, monotone offset
/// tables, initial states that exist in their automata, non-empty literals.
fn decode_lnf(r: &mut Reader<'_>) -> Result<Lnf, DecodeError> {
    let n = r.count(5)?;
    let mut syms = Vec::with_capacity(n);
    r.elements(n, 5, |c| {
        for s in c.chunks_exact(5) {
            let v = u32::from_le_bytes([s[1], s[2], s[3], s[4]]);
            syms.push(match s[0] {
                0 => LSym::Nt(v),
                1 => LSym::Lit(v),
                2 => LSym::Regex(v),
                3 => LSym::Except(v),
                4 => LSym::End(v),
                _ => return Err(DecodeError("an unknown symbol kind")),
            });
        }
        Ok(())
    })?;
    let init_state = r.u32s()?;
    let prod_starts = r.u32s()?;
    let nt_prods = r.u32s()?;
    let n = r.count(8)?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        names.push(r.string()?);
    }
    let lit_bytes = r.bytes()?;
    let lit_offsets = r.u32s()?;
    let n = r.count(8)?;
    let mut dfas = Vec::with_capacity(n);
    for _ in 0..n {
        dfas.push(Dfa::decode(r)?);
    }
    let n = r.count(8)?;
    let mut excepts = Vec::with_capacity(n);
    for _ in 0..n {
        excepts.push(ExceptInfo {
            dfa: r.u32()?,
            max: r.u32()?,
        });
    }
    let start_nullable = r.bool()?;
    let nt_any_order = r.u32s()?;
    let n = r.count(8)?;
    let mut any_orders = Vec::with_capacity(n);
    for _ in 0..n {
        let required = r.u32()?;
        let once = r.u32()?;
        let unique = match r.bool()? {
            false => None,
            true => {
                let u = Unique {
                    min: r.u32()?,
                    max: r.u32()?,
                    last: r.u32()?,
                };
                ensure(1 <= u.min && u.min <= u.max, "unique! counts")?;
                Some(u)
            }
        };
        let sets = match r.bool()? {
            false => None,
            true => Some(MemberSets {
                min: r.u32()?,
                max: r.u32()?,
                kinds: r.u32()?,
                members: r.u32()?,
                required: r.u32()?,
                repeatable: r.u32()? != 0,
            }),
        };
        any_orders.push(AnyOrder {
            required,
            once,
            unique,
            sets,
        });
    }
    let member_kinds = r
        .u32s()?
        .into_iter()
        .map(|k| match k {
            0 => Ok(MemberKind::Once),
            1 => Ok(MemberKind::Optional),
            2 => Ok(MemberKind::Many),
            3 => Ok(MemberKind::Some),
            _ => Err(()),
        })
        .collect::<Result<Vec<_>, ()>>();
    ensure(member_kinds.is_ok(), "any_order! member kinds")?;
    let member_kinds = member_kinds.unwrap_or_default();
    ensure(
        any_orders.iter().filter_map(|a| a.sets).all(|m| {
            m.min <= m.max
                && m.members >= 1
                && m.required <= m.members
                && (m.kinds as u64 + m.members as u64) <= member_kinds.len() as u64
        }),
        "any_order! member sets",
    )?;
    let lhs = r.u32s()?;
    let bits = r.u32s()?;

    let monotone = |v: &[u32], strict: bool| {
        v.windows(2)
            .all(|w| if strict { w[0] < w[1] } else { w[0] <= w[1] })
    };
    ensure(
        nt_prods.len() >= 2
            && nt_prods[0] == 0
            && monotone(&nt_prods, false)
            && nt_prods.last().copied() == Some(prod_starts.len() as u32),
        "production table",
    )?;
    let nts = nt_prods.len() - 1;
    ensure(names.len() == nts, "nonterminal names")?;
    ensure(
        lit_offsets.first() == Some(&0)
            && monotone(&lit_offsets, true)
            && lit_offsets.last().copied() == Some(lit_bytes.len() as u32),
        "literal table",
    )?;
    ensure(
        excepts.iter().all(|e| (e.dfa as usize) < dfas.len()),
        "an except! without its automaton",
    )?;
    ensure(
        matches!(syms.last(), Some(LSym::End(_)))
            && prod_starts.iter().all(|&p| (p as usize) < syms.len()),
        "productions outside the symbol table",
    )?;
    ensure(init_state.len() == syms.len(), "initial states")?;
    for (s, &init) in syms.iter().zip(&init_state) {
        let ok = match *s {
            LSym::Nt(v) | LSym::End(v) => (v as usize) < nts,
            LSym::Lit(v) => (v as usize) + 1 < lit_offsets.len(),
            LSym::Regex(d) => dfas
                .get(d as usize)
                .is_some_and(|dfa| (init as usize) < dfa.state_count()),
            LSym::Except(x) => excepts
                .get(x as usize)
                .is_some_and(|e| (init as usize) < dfas[e.dfa as usize].state_count()),
        };
        ensure(ok, "a symbol that refers to nothing")?;
    }
    let param = |nt: u32| {
        nt_any_order
            .get(nt as usize)
            .is_some_and(|&k| k != NOT_PARAMETRIC)
    };
    ensure(
        (nt_any_order.is_empty() && lhs.is_empty() && any_orders.is_empty())
            || (nt_any_order.len() == nts
                && nt_any_order
                    .iter()
                    .all(|&k| k == NOT_PARAMETRIC || (k as usize) < any_orders.len())
                && lhs.len() == syms.len()
                && lhs.iter().all(|&x| x == NOT_PARAMETRIC || param(x))),
        "any_order! tables",
    )?;
    ensure(bits.len() == lhs.len(), "any_order! member bits")?;
    ensure(
        lhs.iter().zip(&bits).all(|(&x, &bit)| {
            let sets = (x != NOT_PARAMETRIC)
                .then(|| any_orders[nt_any_order[x as usize] as usize].sets)
                .flatten();
            sets.is_none_or(|m| bit < m.members)
        }),
        "any_order! member indices",
    )?;
    let param_pos = lhs
        .iter()
        .zip(&bits)
        .map(|(&lhs, &bit)| ParamPos { lhs, bit })
        .collect();
    Ok(Lnf {
        syms,
        init_state,
        prod_starts,
        nt_prods,
        names,
        lit_bytes,
        lit_offsets,
        dfas,
        excepts,
        start_nullable,
        nt_any_order,
        any_orders,
        param_pos,
        member_kinds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Vocabulary;

    const TEXT: &str = r#"start ::= "{" pair ("," pair)* "}" ;
pair ::= key ":" #"[0-9]{1,3}" ;
key ::= #"\"[a-z]{1,8}\"" | except!("\"x\"", 12) ;"#;

    fn vocab() -> Arc<Vocabulary> {
        let mut tokens: Vec<Option<&[u8]>> = [
            "{", "}", ",", ":", "\"", "a", "b", "x", "1", "2", "ab\"", "12",
        ]
        .iter()
        .map(|t| Some(t.as_bytes()))
        .collect();
        tokens.push(None); // EOS
        Arc::new(Vocabulary::from_byte_tokens(&tokens, &[12], None).expect("vocabulary"))
    }

    /// The entry in `bytes`, read as a file of that length.
    fn decode(
        bytes: &[u8],
        text: &str,
        options: &CompileOptions,
        vocab: &Arc<Vocabulary>,
    ) -> Result<CompiledGrammar, DecodeError> {
        decode_entry(bytes, bytes.len() as u64, text, options, vocab)
    }

    fn compiled(text: &str) -> CompiledGrammar {
        let g = Grammar::compile(text, &CompileOptions::default()).expect("compiles");
        CompiledGrammar::new(Arc::new(g), vocab())
    }

    #[test]
    fn member_sets_round_trip() {
        // (more than 32 counted members, and counts: interned member sets)
        let mut members: Vec<String> = (0..33).map(|i| format!("\"k{i}\"?")).collect();
        members.extend(["\"a\"".to_owned(), "\"b\"?".to_owned(), "\"x\"*".to_owned()]);
        let text = format!(
            "start ::= \"{{\" any_order!(\",\", {}, 2, 3) \"}}\" ;",
            members.join(", ")
        );
        let cg = compiled(&text);
        let bytes = encode_entry(&text, &cg);
        let back = Arc::new(
            decode(&bytes, &text, &CompileOptions::default(), &cg.vocab).expect("decodes"),
        );
        assert_eq!(back.grammar.lnf().any_orders, cg.grammar.lnf().any_orders);
        assert_eq!(
            back.grammar.lnf().member_kinds,
            cg.grammar.lnf().member_kinds
        );
        same_masks(
            &Arc::new(cg),
            &back,
            &[b"{", b"{a,", b"{a,x,", b"{x,b,", b"{a,b,x"],
        );
    }

    /// `cg` and `back` accept the same of `inputs` and give the same masks after them.
    fn same_masks(cg: &Arc<CompiledGrammar>, back: &Arc<CompiledGrammar>, inputs: &[&[u8]]) {
        for &input in inputs {
            let (mut a, mut b) = (cg.matcher(), back.matcher());
            assert_eq!(a.accept_bytes(input), b.accept_bytes(input));
            let mut ma = vec![0u32; cg.mask_words()];
            let mut mb = vec![0u32; back.mask_words()];
            a.fill_next_token_bitmask(&mut ma).unwrap();
            b.fill_next_token_bitmask(&mut mb).unwrap();
            assert_eq!(ma, mb, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn an_entry_round_trips_to_the_same_masks() {
        let cg = compiled(TEXT);
        let bytes = encode_entry(TEXT, &cg);
        let back =
            Arc::new(decode(&bytes, TEXT, &CompileOptions::default(), &cg.vocab).expect("decodes"));
        assert_eq!(back.grammar.lnf_debug(), cg.grammar.lnf_debug());
        for d in 0..cg.grammar.lnf().dfas.len() as u32 {
            let (x, y) = (back.slice_tables(d), cg.slice_tables(d));
            assert_eq!(
                (&x.depths, &x.moves, &x.counted_reach),
                (&y.depths, &y.moves, &y.counted_reach)
            );
        }
        same_masks(
            &Arc::new(cg),
            &back,
            &[b"{\"ab\":12,\"x", b"{", b"{\"b\":1"],
        );
    }

    #[test]
    fn any_damage_is_detected() {
        let cg = compiled(TEXT);
        let bytes = encode_entry(TEXT, &cg);
        let opts = CompileOptions::default();
        for cut in (0..bytes.len()).step_by(7) {
            assert!(decode(&bytes[..cut], TEXT, &opts, &cg.vocab).is_err());
        }
        for i in (0..bytes.len()).step_by(3) {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(
                decode(&bad, TEXT, &opts, &cg.vocab).is_err(),
                "a flipped byte at {i} went unnoticed"
            );
        }
    }

    /// A source that hands out at most `step` bytes per read, so values and chunks straddle
    /// every boundary.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(out.len()).min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// A grammar whose entry is several of the reader's chunks long.
    fn large() -> (String, CompiledGrammar) {
        let words: Vec<String> = (0..3000)
            .map(|i| format!("\"w{i}x{}\"", i * 7919 % 10007))
            .collect();
        let text = format!("start ::= {} ;", words.join(" | "));
        let cg = compiled(&text);
        (text, cg)
    }

    #[test]
    fn a_large_entry_streams_in_chunks_of_any_size() {
        let (text, cg) = large();
        let bytes = encode_entry(&text, &cg);
        let opts = CompileOptions::default();
        assert!(bytes.len() > 3 * 128 * 1024, "{} bytes", bytes.len());
        for step in [1usize << 20, 4096, 1001, 7] {
            let back = decode_entry(
                Trickle(&bytes, step),
                bytes.len() as u64,
                &text,
                &opts,
                &cg.vocab,
            )
            .expect("decodes");
            assert_eq!(
                back.grammar.lnf_debug(),
                cg.grammar.lnf_debug(),
                "step {step}"
            );
        }
        // Damage anywhere, a cut anywhere, a file shorter or longer than its stated size.
        for i in (0..bytes.len()).step_by(bytes.len() / 97) {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                decode(&bad, &text, &opts, &cg.vocab).is_err(),
                "a flipped bit at {i}"
            );
            assert!(
                decode(&bytes[..i], &text, &opts, &cg.vocab).is_err(),
                "a cut at {i}"
            );
            let stated = bytes.len() as u64 + 1 + i as u64 % 5000;
            assert!(decode_entry(&bytes[..], stated, &text, &opts, &cg.vocab).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        let stated = bytes.len() as u64;
        assert!(decode_entry(&longer[..], stated, &text, &opts, &cg.vocab).is_err());
        assert!(decode(&longer, &text, &opts, &cg.vocab).is_err());
    }

    /// Through the file system, as the cache does: a whole entry loads, a damaged one is
    /// `Invalid`, a missing one `Missing`.
    #[test]
    fn load_reads_what_store_wrote() {
        let (text, cg) = large();
        let opts = CompileOptions::default();
        let dir = std::env::temp_dir().join(format!("structout-disk-test-{}", std::process::id()));
        let path = entry_path(&dir, &text, &opts, cg.vocab.fingerprint());
        assert!(matches!(
            load(&path, &text, &opts, &cg.vocab),
            Err(LoadError::Missing)
        ));
        store(&path, &text, &cg).expect("stored");
        let back = load(&path, &text, &opts, &cg.vocab).expect("loads");
        assert_eq!(back.grammar.lnf_debug(), cg.grammar.lnf_debug());
        let mut bytes = fs::read(&path).expect("read");
        let at = bytes.len() / 2;
        bytes[at] ^= 0x10;
        fs::write(&path, &bytes).expect("write");
        assert!(matches!(
            load(&path, &text, &opts, &cg.vocab),
            Err(LoadError::Invalid)
        ));
        fs::write(&path, &bytes[..at]).expect("write");
        assert!(matches!(
            load(&path, &text, &opts, &cg.vocab),
            Err(LoadError::Invalid)
        ));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn another_key_is_a_miss() {
        let cg = compiled(TEXT);
        let bytes = encode_entry(TEXT, &cg);
        let other_text = TEXT.replace("{1,3}", "{1,4}");
        assert!(decode(&bytes, &other_text, &CompileOptions::default(), &cg.vocab).is_err());
        let other_opts = CompileOptions {
            max_items_per_set: 7,
            ..CompileOptions::default()
        };
        assert!(decode(&bytes, TEXT, &other_opts, &cg.vocab).is_err());
        let other_vocab = Arc::new(
            Vocabulary::from_byte_tokens(&[Some(b"{"), Some(b"}"), None], &[2], None)
                .expect("vocabulary"),
        );
        assert!(decode(&bytes, TEXT, &CompileOptions::default(), &other_vocab).is_err());
    }

    /// A payload with a valid checksum but broken tables (what only a hostile file could hold)
    /// is refused by the structural checks, not by luck.
    #[test]
    fn structurally_broken_payloads_are_refused() {
        let cg = compiled(TEXT);
        let lnf = cg.grammar.lnf().clone();
        type Damage = Box<dyn Fn(&mut Lnf)>;
        let variants: Vec<Damage> = vec![
            Box::new(|l| l.syms.push(LSym::Nt(9999))),
            Box::new(|l| l.prod_starts[0] = 1 << 30),
            Box::new(|l| l.lit_offsets.push(1 << 30)),
            Box::new(|l| {
                let at = l.syms.iter().position(|s| matches!(s, LSym::Regex(_)));
                l.init_state[at.expect("the grammar has a regex terminal")] = u32::MAX;
            }),
            Box::new(|l| l.names.pop().map(|_| ()).unwrap_or(())),
            Box::new(|l| {
                if let Some(x) = l.excepts.first_mut() {
                    x.dfa = 1 << 20;
                }
            }),
        ];
        // An unknown symbol kind, first or last (the symbol table is decoded in bulk).
        let mut w = Writer::default();
        encode_lnf(&mut w, &lnf);
        let bytes = w.into_bytes();
        assert!(decode_lnf(&mut Reader::new(&bytes)).is_ok());
        for at in [8, 8 + 5 * (lnf.syms.len() - 1)] {
            let mut bad = bytes.clone();
            bad[at] = 5;
            assert!(
                decode_lnf(&mut Reader::new(&bad)).is_err(),
                "kind 5 at {at}"
            );
        }
        for (k, damage) in variants.iter().enumerate() {
            let mut l = lnf.clone();
            damage(&mut l);
            let mut w = Writer::default();
            encode_lnf(&mut w, &l);
            let bytes = w.into_bytes();
            assert!(
                decode_lnf(&mut Reader::new(&bytes)).is_err(),
                "variant {k} decoded"
            );
        }
    }
}
