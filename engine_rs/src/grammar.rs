//! Compiling KBNF text into an immutable [`Grammar`] shared by any number of recognizers.

use crate::error::{CompileError, Diagnostic, Span};
use crate::kbnf::parser;
use crate::lnf::{lower, normalize, Lnf};
pub use crate::options::CompileOptions;
use crate::persist::Checksum;

/// A compiled grammar: the LNF plus the options it was compiled with. Immutable, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct Grammar {
    pub(crate) lnf: Lnf,
    pub(crate) options: CompileOptions,
    /// Checksum of the text it was compiled from: the disk cache files a grammar only under
    /// that text (see `mask::grammar_cache::store`).
    pub(crate) source: u64,
}

impl Grammar {
    /// Parses, validates and normalizes KBNF text.
    pub fn compile(text: &str, options: &CompileOptions) -> Result<Grammar, CompileError> {
        let ast =
            parser::parse(text, options.max_repetition).map_err(|d| CompileError::new(text, d))?;
        let mut bnf = lower::lower(&ast, options).map_err(|d| CompileError::new(text, d))?;
        let start_span = ast
            .rules
            .iter()
            .find(|r| r.name == options.start)
            .map_or(Span::default(), |r| r.name_span);
        // (freed before normalizing, whose allocations then reuse its memory, still in cache)
        drop(ast);
        let start_nullable =
            normalize::normalize(&mut bnf, options).map_err(|mut d: Diagnostic| {
                if d.span == Span::default() {
                    d.span = start_span;
                }
                CompileError::new(text, vec![d])
            })?;
        Ok(Grammar {
            lnf: Lnf::from_bnf(bnf, start_nullable),
            options: options.clone(),
            source: Checksum::of(text.as_bytes()),
        })
    }

    /// The normalized grammar, printed.
    pub fn lnf_debug(&self) -> String {
        self.lnf.debug_string()
    }

    /// The normalized grammar.
    pub fn lnf(&self) -> &Lnf {
        &self.lnf
    }

    /// The options it was compiled with.
    pub fn options(&self) -> &CompileOptions {
        &self.options
    }

    /// Heap bytes used by the compiled grammar (approximate).
    pub fn memory_usage(&self) -> usize {
        let l = &self.lnf;
        l.syms.len() * 8
            + l.init_state.len() * 4
            + l.prod_starts.len() * 4
            + l.lit_bytes.len()
            + l.dfas.iter().map(|d| d.memory_usage()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The LNF of `text` with right-linear rules kept as rules (to see the other passes).
    fn lnf(text: &str) -> String {
        let opts = CompileOptions {
            regular_terminals: false,
            ..CompileOptions::default()
        };
        Grammar::compile(text, &opts)
            .unwrap_or_else(|e| panic!("{e}"))
            .lnf_debug()
    }

    fn lnf_collapsed(text: &str) -> String {
        Grammar::compile(text, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .lnf_debug()
    }

    #[test]
    fn right_linear_rules_become_one_terminal() {
        // Regular by shape: one DFA, also through right recursion and nullable tails.
        assert_eq!(
            lnf_collapsed("start ::= 'ab' start | 'ab' A; A ::= 'c' 'd' | 'e' A;"),
            "start#0 ::= #regex0[7 states];\n"
        );
        // The automaton rules of the translator (s0 ::= '' | c s1 ...) inside quotes merge into
        // one terminal with them.
        assert_eq!(
            lnf_collapsed(
                "start ::= '[' s0 ']' start | 'x'; s0 ::= '' | #\"[a-z]\" s1; s1 ::= #\"[0-9]\" s0;"
            ),
            "start#0 ::= #regex0[5 states] start#0 | \"x\";\n"
        );
        // Self-embedding stays context-free.
        assert_eq!(
            lnf_collapsed("start ::= '(' start ')' | 'x';"),
            "start#0 ::= \"(\" start#0 \")\" | \"x\";\n"
        );
    }

    fn err(text: &str) -> String {
        Grammar::compile(text, &CompileOptions::default())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn snapshot_seed_examples() {
        // Useless rules (C unused, S ::= S) disappear; B ::= 'a' B has no base case and is removed.
        assert_eq!(
            lnf("start ::= 'ab' start | 'ab' A | 'ab' B; start ::= start; A ::= 'c' 'd'; B ::= 'a' B; C ::= 'dc';"),
            "start#0 ::= \"ab\" start#0 | \"abcd\";\n"
        );
        // Nested groups and repetitions, merged terminals.
        assert_eq!(
            lnf("start ::= ('a' | 'b') 'c'*;"),
            "start#0 ::= #regex0[3 states] star@22#1 | #regex0[3 states];\nstar@22#1 ::= star@22#1 \"c\" | \"c\";\n"
        );
        // Nullable elimination: B? B? B? becomes non-nullable alternatives.
        assert_eq!(
            lnf("start ::= B? B?; B ::= 'b';"),
            "(* start is nullable *)\nstart#0 ::= #regex0[4 states];\n"
        );
        // Unit rules vanish; equal nonterminals merge.
        assert_eq!(
            lnf("start ::= A | X 'y'; A ::= B; B ::= 'x'; X ::= 'x';"),
            "start#0 ::= #regex0[4 states];\n"
        );
    }

    #[test]
    fn counted_repetition_is_logarithmic() {
        let g = Grammar::compile(
            "start ::= ('a' | 'bc'){3,100000};",
            &CompileOptions::default(),
        )
        .unwrap();
        assert!(g.lnf.syms.len() < 3000, "{}", g.lnf.syms.len());
    }

    #[test]
    fn semantic_errors() {
        let e = err("start ::= foo;\nfoo ::= bar;");
        assert!(e.contains("2:9: undefined nonterminal `bar`"), "{e}");
        let e = err("start ::= 'a' start;");
        assert!(e.contains("language of `start` is empty"), "{e}");
        let e = err("start ::= #\"(\";");
        assert!(e.contains("1:11: invalid regex terminal"), "{e}");
        let e = err("start ::= except!(X); X ::= 'a' Y; Y ::= 'b';");
        assert!(e.contains("invalid except! argument"), "{e}");
        let e = err("other ::= 'a';");
        assert!(e.contains("start symbol `start` is not defined"), "{e}");
        assert_eq!(
            lnf("start ::= #\"\" 'a' #\"b?\";"),
            "start#0 ::= #regex0[4 states];\n"
        );
        let e = err("start ::= a; start ::= b;");
        assert!(
            e.contains("1:11") && e.contains("1:24"),
            "several errors: {e}"
        );
    }

    #[test]
    fn limits_are_errors() {
        let opts = CompileOptions {
            dfa_size_limit: 1 << 16,
            ..CompileOptions::default()
        };
        let e = Grammar::compile("start ::= #\"(a|b)*a(a|b){25}\";", &opts).unwrap_err();
        assert!(e.to_string().contains("dfa_size_limit"), "{e}");
        let opts = CompileOptions {
            max_repetition: 10,
            ..CompileOptions::default()
        };
        let e = Grammar::compile("start ::= 'a'{11};", &opts).unwrap_err();
        assert!(e.to_string().contains("max_repetition"), "{e}");
    }
}
