//! The options a grammar is compiled with: its start symbol and every limit. A leaf module (it
//! depends on nothing else in the crate), so every layer can take options without depending on
//! the layers above it.

/// Limits and settings for compiling a grammar. Every limit produces a clear error when hit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// The start nonterminal.
    pub start: String,
    /// Memory for one regex/`except!` automaton while it is built and stored, in bytes.
    pub dfa_size_limit: usize,
    /// Largest count allowed in `X{m,n}`.
    pub max_repetition: u32,
    /// Largest normalized grammar, in symbols.
    pub max_grammar_symbols: usize,
    /// Earley items allowed in one set (bounds the work per byte on ambiguous grammars).
    pub max_items_per_set: usize,
    /// Earley items allowed in total for one recognizer (bounds memory per sequence).
    pub max_total_items: usize,
    /// Completion steps allowed while reading one byte (bounds time per byte on highly
    /// ambiguous grammars, whose work per byte can grow with the input length).
    pub max_work_per_byte: usize,
    /// Bytes of token masks cached per compiled grammar (keys plus masks; 0 disables the
    /// cache). When full, the cache starts over, so it never holds more than this.
    pub mask_cache_bytes: usize,
    /// Compile each right-linear part of the grammar (rules whose language is regular by shape)
    /// into one regex terminal, within `dfa_size_limit` (default true). Off, such rules are
    /// parsed as rules (tests of the Earley machinery use that).
    pub regular_terminals: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            start: "start".to_owned(),
            dfa_size_limit: 32 << 20,
            max_repetition: 1 << 20,
            max_grammar_symbols: 4 << 20,
            max_items_per_set: 1 << 16,
            max_total_items: 1 << 27,
            max_work_per_byte: 1 << 18,
            mask_cache_bytes: 64 << 20,
            regular_terminals: true,
        }
    }
}
