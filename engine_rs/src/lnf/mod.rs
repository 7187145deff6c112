//! Loup's normal form (LNF): the normalized grammar in flat buffers, as read by the recognizer.
//!
//! Layout: every production is stored in [`Lnf::syms`] as its symbols followed by an
//! [`LSym::End`] marker naming its left-hand side. A dotted position is an index into `syms`, so an
//! Earley item needs no separate rule/dot fields. Productions of nonterminal `n` start at
//! `prod_starts[nt_prods[n]..nt_prods[n + 1]]`.
//!
//! Invariants established by normalization: no production is empty; no unit productions; every
//! nonterminal is reachable from the start and productive; every terminal stands for non-empty
//! matches; an `Except` symbol is always the first symbol of its production.

pub mod bnf;
pub mod lower;
pub mod normalize;

use std::fmt::Write;

use bnf::{Bnf, Sym};

use crate::dfa::Dfa;

/// A symbol of the flat LNF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LSym {
    Nt(u32),
    /// A literal, by index into the literal table.
    Lit(u32),
    /// A regex terminal, by index into [`Lnf::dfas`].
    Regex(u32),
    /// `except!`, by index into [`Lnf::excepts`].
    Except(u32),
    /// End of a production of the given nonterminal.
    End(u32),
}

/// The length-bounded `except!` terminal: its DFA (an index into [`Lnf::dfas`]) and byte bound.
#[derive(Clone, Copy, Debug)]
pub struct ExceptInfo {
    pub dfa: u32,
    /// `u32::MAX` when unbounded.
    pub max: u32,
}

#[derive(Clone, Debug)]
pub struct Lnf {
    pub syms: Vec<LSym>,
    /// Initial terminal state for the symbol at each position (0 for literals and nonterminals).
    pub init_state: Vec<u32>,
    pub prod_starts: Vec<u32>,
    pub nt_prods: Vec<u32>,
    pub names: Vec<String>,
    pub lit_bytes: Vec<u8>,
    pub lit_offsets: Vec<u32>,
    pub dfas: Vec<Dfa>,
    pub excepts: Vec<ExceptInfo>,
    /// The start nonterminal is always 0.
    pub start_nullable: bool,
}

impl Lnf {
    pub fn nt_count(&self) -> usize {
        self.nt_prods.len() - 1
    }

    #[inline]
    pub fn productions(&self, nt: u32) -> &[u32] {
        &self.prod_starts
            [self.nt_prods[nt as usize] as usize..self.nt_prods[nt as usize + 1] as usize]
    }

    #[inline]
    pub fn literal(&self, id: u32) -> &[u8] {
        &self.lit_bytes
            [self.lit_offsets[id as usize] as usize..self.lit_offsets[id as usize + 1] as usize]
    }

    /// Flattens a normalized BNF, renumbering reachable nonterminals (start first).
    pub fn from_bnf(mut bnf: Bnf, start_nullable: bool) -> Lnf {
        // Renumber nonterminals in BFS order from start.
        let mut id = vec![u32::MAX; bnf.rules.len()];
        let mut order = vec![bnf.start];
        id[bnf.start as usize] = 0;
        let mut i = 0;
        while i < order.len() {
            let nt = order[i] as usize;
            for alt in &bnf.rules[nt] {
                for &s in alt {
                    if let Sym::Nt(m) = s {
                        if id[m as usize] == u32::MAX {
                            id[m as usize] = order.len() as u32;
                            order.push(m);
                        }
                    }
                }
            }
            i += 1;
        }
        // Renumber terminals that are used.
        let mut lit_map = vec![u32::MAX; bnf.literals.len()];
        let mut rx_map = vec![u32::MAX; bnf.regexes.len()];
        let mut ex_map = vec![u32::MAX; bnf.excepts.len()];
        let mut lnf = Lnf {
            syms: Vec::new(),
            init_state: Vec::new(),
            prod_starts: Vec::new(),
            nt_prods: vec![0],
            names: Vec::new(),
            lit_bytes: Vec::new(),
            lit_offsets: vec![0],
            dfas: Vec::new(),
            excepts: Vec::new(),
            start_nullable,
        };
        for &nt in &order {
            lnf.names.push(bnf.names[nt as usize].clone());
            for alt in &bnf.rules[nt as usize] {
                lnf.prod_starts.push(lnf.syms.len() as u32);
                for &s in alt {
                    let (sym, init) = match s {
                        Sym::Nt(m) => (LSym::Nt(id[m as usize]), 0),
                        Sym::Lit(l) => {
                            if lit_map[l as usize] == u32::MAX {
                                lit_map[l as usize] = (lnf.lit_offsets.len() - 1) as u32;
                                lnf.lit_bytes.extend_from_slice(&bnf.literals[l as usize]);
                                lnf.lit_offsets.push(lnf.lit_bytes.len() as u32);
                            }
                            (LSym::Lit(lit_map[l as usize]), 0)
                        }
                        Sym::Regex(r) => {
                            if rx_map[r as usize] == u32::MAX {
                                rx_map[r as usize] = lnf.dfas.len() as u32;
                                // Moved, not cloned: each used DFA is taken once.
                                let dfa = &mut bnf.regexes[r as usize].dfa;
                                lnf.dfas.push(std::mem::replace(dfa, Dfa::empty()));
                            }
                            let d = rx_map[r as usize];
                            (LSym::Regex(d), lnf.dfas[d as usize].start())
                        }
                        Sym::Except(e) => {
                            if ex_map[e as usize] == u32::MAX {
                                ex_map[e as usize] = lnf.excepts.len() as u32;
                                let t = &mut bnf.excepts[e as usize];
                                lnf.excepts.push(ExceptInfo {
                                    dfa: lnf.dfas.len() as u32,
                                    max: t.max.unwrap_or(u32::MAX),
                                });
                                lnf.dfas.push(std::mem::replace(&mut t.dfa, Dfa::empty()));
                            }
                            let x = ex_map[e as usize];
                            let d = lnf.excepts[x as usize].dfa;
                            (LSym::Except(x), lnf.dfas[d as usize].start())
                        }
                    };
                    lnf.syms.push(sym);
                    lnf.init_state.push(init);
                }
                lnf.syms.push(LSym::End(id[nt as usize]));
                lnf.init_state.push(0);
            }
            lnf.nt_prods.push(lnf.prod_starts.len() as u32);
        }
        lnf
    }

    /// A stable, human-readable rendering for debugging and snapshot tests.
    pub fn debug_string(&self) -> String {
        let mut out = String::new();
        if self.start_nullable {
            out.push_str("(* start is nullable *)\n");
        }
        for nt in 0..self.nt_count() as u32 {
            let _ = write!(out, "{} ::=", self.nt_name(nt));
            for (k, &p) in self.productions(nt).iter().enumerate() {
                if k > 0 {
                    out.push_str(" |");
                }
                let mut pos = p as usize;
                while !matches!(self.syms[pos], LSym::End(_)) {
                    out.push(' ');
                    out.push_str(&self.sym_string(self.syms[pos]));
                    pos += 1;
                }
            }
            out.push_str(";\n");
        }
        out
    }

    fn nt_name(&self, nt: u32) -> String {
        format!("{}#{nt}", self.names[nt as usize])
    }

    pub fn sym_string(&self, s: LSym) -> String {
        match s {
            LSym::Nt(n) => self.nt_name(n),
            LSym::Lit(l) => format!("{:?}", String::from_utf8_lossy(self.literal(l))),
            LSym::Regex(d) => format!("#regex{d}[{} states]", self.dfas[d as usize].state_count()),
            LSym::Except(x) => {
                let e = self.excepts[x as usize];
                if e.max == u32::MAX {
                    format!("except!#{x}")
                } else {
                    format!("except!#{x}[..{}]", e.max)
                }
            }
            LSym::End(n) => format!("END({})", self.nt_name(n)),
        }
    }
}
