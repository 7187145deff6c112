//! Loup's normal form (LNF): the normalized grammar in flat buffers, as read by the recognizer.
//!
//! Layout: every production is stored in [`Lnf::syms`] as its symbols followed by an
//! [`LSym::End`] marker naming its left-hand side. A dotted position is an index into `syms`, so an
//! Earley item needs no separate rule/dot fields. Productions of nonterminal `n` start at
//! `prod_starts[nt_prods[n]..nt_prods[n + 1]]`.
//!
//! Invariants established by normalization: no production is empty; no unit productions except
//! into and out of `any_order!` nonterminals; every nonterminal is reachable from the start and
//! productive; every terminal stands for non-empty matches; an `Except` symbol is always the first
//! symbol of its production.
//!
//! `any_order!(sep, m1, ..., mn)` is a *parametric* nonterminal `X` (see [`AnyOrder`]) with the
//! productions `X ::= m_i` and `X ::= X sep m_i` for each member, all of nonterminals (terminal
//! members and separators get a wrapper nonterminal each), so every item of them is a wait item
//! and its `state` is free to carry the set of counted members read so far (a bitset, one bit per
//! member that is not `*`). Completing `X` yields that set, the item's state plus its member's bit
//! ([`Lnf::param_pos`]). The recognizer advances `X ::= . X sep m_i` over a completed `X` only
//! when member `i` may occur again, and any other item only when every required member is in the
//! set; Leo items never pass through `X`. The language of `X` is therefore exactly the orders of
//! the members that respect their counts.

pub mod bnf;
pub mod lower;
pub mod normalize;

use std::fmt::Write;

use bnf::{AnyOrderSpec, Bnf, Sym};

use crate::kbnf::ast::MemberKind;

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

/// Most members of one `any_order!` that are counted (plain, `?` or `+`) with one bit each in
/// an Earley item's state; with more (or with counts), item states are interned member sets.
pub const MAX_ANY_ORDER_BITS: usize = 32;

/// The counted members of one `any_order!`, as bitsets over its member bits; or a `unique!`; or
/// an `any_order!` whose item states are interned member sets ([`MemberSets`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnyOrder {
    /// Members that must occur (plain and `+`).
    pub required: u32,
    /// Members that may occur at most once (plain and `?`).
    pub once: u32,
    /// `Some` for a `unique!` (then `required` and `once` are 0).
    pub unique: Option<Unique>,
    /// `Some` when item states are interned member sets (then `required` and `once` are 0).
    pub sets: Option<MemberSets>,
}

/// An `any_order!` with more than [`MAX_ANY_ORDER_BITS`] counted members, or with counts: the
/// [`ParamPos::bit`] of a position is the index of its production's member, whose kind is
/// `Lnf::member_kinds[kinds + index]`, and an item's state is the id of an interned set of the
/// counted members read plus the number of members read, capped at [`MemberSets::cap`]
/// (`earley::unique::Interner`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberSets {
    /// Least members read in all, every kind counted (0: no bound beyond one member).
    pub min: u32,
    /// Most members read in all (`u32::MAX`: unbounded).
    pub max: u32,
    /// Offset of the members' kinds in `Lnf::member_kinds`.
    pub kinds: u32,
    /// Number of members.
    pub members: u32,
    /// Number of required members (plain and `+`).
    pub required: u32,
    /// Whether some member may occur more than once (`*` and `+`).
    pub repeatable: bool,
}

impl MemberSets {
    /// Where the count of members read stops growing: past it, the bounds decide nothing more.
    #[inline]
    pub fn cap(&self) -> u32 {
        match self.max {
            u32::MAX => self.min,
            max => max,
        }
    }

    /// Whether members read so far can still end the `any_order!`, after member `index` of
    /// kind `kind` is read: `count` members read in all (capped, see [`MemberSets::cap`]),
    /// `len` of them in the set, `required` of those required, `has` whether the set holds
    /// `index` already. The required members left fit under the most, and enough can be read.
    pub fn completable_after(
        &self,
        (count, len, required): (u32, u32, u32),
        kind: MemberKind,
        has: bool,
    ) -> bool {
        let count = (count + 1).min(self.cap());
        let (len, required) = match kind {
            MemberKind::Many => (len, required),
            _ if has => (len, required),
            MemberKind::Optional => (len + 1, required),
            MemberKind::Once | MemberKind::Some => (len + 1, required + 1),
        };
        let need = self.required - required;
        let fits = self.max == u32::MAX || count.saturating_add(need) <= self.max;
        let most = match self.repeatable {
            true => u32::MAX,
            false => count + (self.members - len),
        };
        fits && most >= self.min
    }
}

/// A `unique!(sep, m_0, ..., m_last, min, max)` nonterminal `X`: its productions are
/// `X ::= m_0` and `X ::= X sep m_j` for `j` in `1..=last` (`j = 0` when `last == 0`), each
/// position carrying `j` as its [`ParamPos::bit`]. Item states in them are ids of interned sets
/// of canonical JSON values (`earley::unique`); completing `X` yields the set of its items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unique {
    /// Least items, at least 1.
    pub min: u32,
    /// Most items, at least `min` (`u32::MAX`: unbounded).
    pub max: u32,
    /// Index of the last member, which matches every item from that index on.
    pub last: u32,
}

impl Unique {
    /// The member of the item that follows `n` items.
    #[inline]
    pub fn member_after(&self, n: u32) -> u32 {
        n.min(self.last)
    }
}

/// For a position inside a production of an `any_order!` nonterminal: that nonterminal and the
/// bit of the production's member (0 for a `*` member). In a `unique!` production, `bit` is the
/// index of the production's member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamPos {
    pub lhs: u32,
    pub bit: u32,
}

/// `lhs` of [`ParamPos`] for positions outside the productions of `any_order!` nonterminals.
pub const NOT_PARAMETRIC: u32 = u32::MAX;

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
    /// Per nonterminal: its index in `any_orders`, or [`NOT_PARAMETRIC`]. Empty when the
    /// grammar has no `any_order!` (the recognizer then skips every parametric check).
    pub nt_any_order: Vec<u32>,
    pub any_orders: Vec<AnyOrder>,
    /// Per position of `syms`: see [`ParamPos`]. Empty when `nt_any_order` is.
    pub param_pos: Vec<ParamPos>,
    /// The members' kinds of the `any_order!`s with [`MemberSets`].
    pub member_kinds: Vec<MemberKind>,
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

    /// The `any_order!` of nonterminal `nt`, if it is one.
    #[inline]
    pub fn any_order(&self, nt: u32) -> Option<AnyOrder> {
        match self.nt_any_order.get(nt as usize) {
            Some(&k) if k != NOT_PARAMETRIC => Some(self.any_orders[k as usize]),
            _ => None,
        }
    }

    /// The `unique!` of nonterminal `nt`, if it is one.
    #[inline]
    pub fn unique(&self, nt: u32) -> Option<Unique> {
        self.any_order(nt).and_then(|a| a.unique)
    }

    /// Whether the grammar has a `unique!` (its recognizers keep their input).
    pub fn has_unique(&self) -> bool {
        self.any_orders.iter().any(|a| a.unique.is_some())
    }

    /// Whether the grammar has an `any_order!` with [`MemberSets`] (its recognizers intern them).
    pub fn has_member_sets(&self) -> bool {
        self.any_orders.iter().any(|a| a.sets.is_some())
    }

    /// The kind of member `index` of an `any_order!` with member sets `m`.
    #[inline]
    pub fn member_kind(&self, m: MemberSets, index: u32) -> MemberKind {
        self.member_kinds[(m.kinds + index) as usize]
    }

    /// See [`ParamPos`]; `None` outside the productions of `any_order!` nonterminals.
    #[inline]
    pub fn param_pos(&self, pos: u32) -> Option<ParamPos> {
        self.param_pos
            .get(pos as usize)
            .copied()
            .filter(|p| p.lhs != NOT_PARAMETRIC)
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
            nt_any_order: Vec::new(),
            any_orders: Vec::new(),
            member_kinds: Vec::new(),
            param_pos: Vec::new(),
        };
        let mut flat = Flatten {
            lit_map: vec![u32::MAX; bnf.literals.len()],
            rx_map: vec![u32::MAX; bnf.regexes.len()],
            ex_map: vec![u32::MAX; bnf.excepts.len()],
            id,
            wrappers: Vec::new(),
            first_wrapper: order.len() as u32,
            param_of: Vec::new(),
            positions: Vec::new(),
        };
        let mut spec_of = vec![u32::MAX; bnf.rules.len()];
        for (k, a) in bnf.any_orders.iter().enumerate() {
            spec_of[a.nt as usize] = k as u32;
        }
        let parametric = bnf
            .any_orders
            .iter()
            .any(|a| flat.id[a.nt as usize] != u32::MAX);
        for &nt in &order {
            lnf.names.push(bnf.names[nt as usize].clone());
            if spec_of[nt as usize] != u32::MAX {
                let spec = bnf.any_orders[spec_of[nt as usize] as usize].clone();
                let alt = bnf.rules[nt as usize][0].clone();
                flat.any_order_productions(&mut lnf, nt, &spec, &alt);
                lnf.nt_prods.push(lnf.prod_starts.len() as u32);
                continue;
            }
            for alt in bnf.rules[nt as usize].clone() {
                lnf.prod_starts.push(lnf.syms.len() as u32);
                for s in alt {
                    let (sym, init) = flat.sym(&mut bnf, &mut lnf, s);
                    lnf.syms.push(sym);
                    lnf.init_state.push(init);
                }
                lnf.syms.push(LSym::End(flat.id[nt as usize]));
                lnf.init_state.push(0);
            }
            lnf.nt_prods.push(lnf.prod_starts.len() as u32);
        }
        // Wrappers of terminal members and separators, numbered after the others.
        let mut k = 0;
        while k < flat.wrappers.len() {
            let s = flat.wrappers[k];
            let wrapper = flat.first_wrapper + k as u32;
            lnf.names.push(format!("any_order_part#{k}"));
            lnf.prod_starts.push(lnf.syms.len() as u32);
            let (sym, init) = flat.sym(&mut bnf, &mut lnf, s);
            lnf.syms.push(sym);
            lnf.init_state.push(init);
            lnf.syms.push(LSym::End(wrapper));
            lnf.init_state.push(0);
            lnf.nt_prods.push(lnf.prod_starts.len() as u32);
            k += 1;
        }
        if parametric {
            lnf.nt_any_order.resize(lnf.nt_count(), NOT_PARAMETRIC);
            lnf.param_pos.resize(
                lnf.syms.len(),
                ParamPos {
                    lhs: NOT_PARAMETRIC,
                    bit: 0,
                },
            );
            for (nt, k) in flat.param_of {
                lnf.nt_any_order[nt as usize] = k;
            }
            for (pos, p) in flat.positions {
                lnf.param_pos[pos as usize] = p;
            }
        } else {
            lnf.any_orders.clear();
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

/// The renumbering of [`Lnf::from_bnf`]: nonterminals (`id`), terminals taken on first use, and
/// the wrapper nonterminals of terminals that `any_order!` productions refer to.
struct Flatten {
    lit_map: Vec<u32>,
    rx_map: Vec<u32>,
    ex_map: Vec<u32>,
    id: Vec<u32>,
    /// The terminal of wrapper `first_wrapper + k` is `wrappers[k]`.
    wrappers: Vec<Sym>,
    first_wrapper: u32,
    /// LNF nonterminal → index in `Lnf::any_orders`.
    param_of: Vec<(u32, u32)>,
    /// Positions of parametric productions.
    positions: Vec<(u32, ParamPos)>,
}

impl Flatten {
    /// The LNF symbol of `s` and the initial state of its terminal (0 for nonterminals).
    fn sym(&mut self, bnf: &mut Bnf, lnf: &mut Lnf, s: Sym) -> (LSym, u32) {
        match s {
            Sym::Nt(m) => (LSym::Nt(self.id[m as usize]), 0),
            Sym::Lit(l) => {
                if self.lit_map[l as usize] == u32::MAX {
                    self.lit_map[l as usize] = (lnf.lit_offsets.len() - 1) as u32;
                    lnf.lit_bytes.extend_from_slice(&bnf.literals[l as usize]);
                    lnf.lit_offsets.push(lnf.lit_bytes.len() as u32);
                }
                (LSym::Lit(self.lit_map[l as usize]), 0)
            }
            Sym::Regex(r) => {
                if self.rx_map[r as usize] == u32::MAX {
                    self.rx_map[r as usize] = lnf.dfas.len() as u32;
                    // Moved, not cloned: each used DFA is taken once.
                    let dfa = &mut bnf.regexes[r as usize].dfa;
                    lnf.dfas.push(std::mem::replace(dfa, Dfa::empty()));
                }
                let d = self.rx_map[r as usize];
                (LSym::Regex(d), lnf.dfas[d as usize].start())
            }
            Sym::Except(e) => {
                if self.ex_map[e as usize] == u32::MAX {
                    self.ex_map[e as usize] = lnf.excepts.len() as u32;
                    let t = &mut bnf.excepts[e as usize];
                    lnf.excepts.push(ExceptInfo {
                        dfa: lnf.dfas.len() as u32,
                        max: t.max.unwrap_or(u32::MAX),
                    });
                    lnf.dfas.push(std::mem::replace(&mut t.dfa, Dfa::empty()));
                }
                let x = self.ex_map[e as usize];
                let d = lnf.excepts[x as usize].dfa;
                (LSym::Except(x), lnf.dfas[d as usize].start())
            }
        }
    }

    /// The LNF nonterminal standing for `s` in an `any_order!` production.
    fn wrapped(&mut self, s: Sym) -> u32 {
        match s {
            Sym::Nt(m) => self.id[m as usize],
            t => {
                let k = match self.wrappers.iter().position(|&w| w == t) {
                    Some(k) => k,
                    None => {
                        self.wrappers.push(t);
                        self.wrappers.len() - 1
                    }
                };
                self.first_wrapper + k as u32
            }
        }
    }

    /// The productions of `any_order!` nonterminal `nt` (placeholder `alt`, see the module
    /// documentation): `X ::= m_i` for every member, `X ::= X sep m_i` for every member that can
    /// follow another (all of them unless a lone member occurs at most once).
    fn any_order_productions(&mut self, lnf: &mut Lnf, nt: u32, spec: &AnyOrderSpec, alt: &[Sym]) {
        let x = self.id[nt as usize];
        let (sep, members) = match spec.sep {
            true => (Some(self.wrapped(alt[0])), &alt[1..]),
            false => (None, alt),
        };
        let members: Vec<u32> = members.iter().map(|&m| self.wrapped(m)).collect();
        if let Some(counts) = spec.unique {
            self.unique_productions(lnf, x, sep, &members, counts);
            return;
        }
        let mut info = AnyOrder {
            required: 0,
            once: 0,
            unique: None,
            sets: None,
        };
        let counted = spec
            .kinds
            .iter()
            .filter(|&&k| k != MemberKind::Many)
            .count();
        let counts = spec.counts.filter(|c| c.min > 1 || c.max != u32::MAX);
        let mut bits = Vec::with_capacity(members.len());
        if counted > MAX_ANY_ORDER_BITS || counts.is_some() {
            info.sets = Some(MemberSets {
                min: counts.map_or(0, |c| c.min),
                max: counts.map_or(u32::MAX, |c| c.max),
                kinds: lnf.member_kinds.len() as u32,
                members: members.len() as u32,
                required: spec
                    .kinds
                    .iter()
                    .filter(|&&k| matches!(k, MemberKind::Once | MemberKind::Some))
                    .count() as u32,
                repeatable: spec
                    .kinds
                    .iter()
                    .any(|&k| matches!(k, MemberKind::Many | MemberKind::Some)),
            });
            lnf.member_kinds.extend_from_slice(&spec.kinds);
            bits.extend(0..members.len() as u32);
        } else {
            let mut next = 0u32;
            for &kind in &spec.kinds {
                let bit = match kind {
                    MemberKind::Many => 0,
                    _ => {
                        next += 1;
                        1u32 << (next - 1)
                    }
                };
                if matches!(kind, MemberKind::Once | MemberKind::Some) {
                    info.required |= bit;
                }
                if matches!(kind, MemberKind::Once | MemberKind::Optional) {
                    info.once |= bit;
                }
                bits.push(bit);
            }
        }
        self.param_of.push((x, lnf.any_orders.len() as u32));
        lnf.any_orders.push(info);
        let lone_once =
            members.len() == 1 && matches!(spec.kinds[0], MemberKind::Once | MemberKind::Optional);
        for ((&m, &bit), &kind) in members.iter().zip(&bits).zip(&spec.kinds) {
            // (with counts, a member that cannot come first leaves the others no way to end)
            if info
                .sets
                .is_none_or(|s| s.completable_after((0, 0, 0), kind, false))
            {
                self.param_production(lnf, x, &[m], bit);
            }
        }
        if !lone_once {
            for (&m, &bit) in members.iter().zip(&bits) {
                let step: Vec<u32> = std::iter::once(x).chain(sep).chain([m]).collect();
                self.param_production(lnf, x, &step, bit);
            }
        }
    }

    /// The productions of `unique!` nonterminal `x` (see [`Unique`]).
    fn unique_productions(
        &mut self,
        lnf: &mut Lnf,
        x: u32,
        sep: Option<u32>,
        members: &[u32],
        counts: bnf::UniqueCounts,
    ) {
        let last = members.len() as u32 - 1;
        self.param_of.push((x, lnf.any_orders.len() as u32));
        lnf.any_orders.push(AnyOrder {
            required: 0,
            once: 0,
            sets: None,
            unique: Some(Unique {
                min: counts.min,
                max: counts.max,
                last,
            }),
        });
        self.param_production(lnf, x, &[members[0]], 0);
        if counts.max > 1 {
            // (the member of a second or later item: from 1 on, or the only one)
            for j in last.min(1)..=last {
                let step: Vec<u32> = std::iter::once(x)
                    .chain(sep)
                    .chain([members[j as usize]])
                    .collect();
                self.param_production(lnf, x, &step, j);
            }
        }
    }

    /// Appends the production `x ::= syms` of a parametric nonterminal, every position tagged
    /// with `bit` (see [`ParamPos`]).
    fn param_production(&mut self, lnf: &mut Lnf, x: u32, syms: &[u32], bit: u32) {
        lnf.prod_starts.push(lnf.syms.len() as u32);
        for &s in syms.iter() {
            self.positions
                .push((lnf.syms.len() as u32, ParamPos { lhs: x, bit }));
            lnf.syms.push(LSym::Nt(s));
            lnf.init_state.push(0);
        }
        self.positions
            .push((lnf.syms.len() as u32, ParamPos { lhs: x, bit }));
        lnf.syms.push(LSym::End(x));
        lnf.init_state.push(0);
    }
}
