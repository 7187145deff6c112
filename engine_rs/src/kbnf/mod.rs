//! The KBNF grammar language: syntax tree and parser.

pub mod ast;
pub mod parser;
pub mod share;
