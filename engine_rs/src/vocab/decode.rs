//! Decoding of tokenizer token strings into the exact bytes a token produces.
//!
//! Three spellings are supported:
//! - byte-level BPE (GPT-2, Llama 3, Qwen 2 `tokenizer.json`): every byte is spelled by one
//!   printable code point of the `bytes_to_unicode` alphabet (`Ġ` = space, `Ċ` = newline, ...);
//! - SentencePiece (Llama 2, Mistral, Gemma): `▁` (U+2581) stands for a space and, with byte
//!   fallback, a piece `<0xNN>` stands for the single byte `0xNN`; all other characters are
//!   their own UTF-8;
//! - raw: the token string is the text itself (its UTF-8 bytes).
//!
//! tiktoken rank files spell tokens in standard base64; see [`decode_base64`].

use std::fmt;

/// How the token strings of a tokenizer spell the bytes they produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenEncoding {
    /// GPT-2 byte-level alphabet (`bytes_to_unicode`): one code point per byte.
    ByteLevel,
    /// SentencePiece: `▁` is a space; with `byte_fallback`, `<0xNN>` is the byte `0xNN`.
    SentencePiece {
        /// Whether `<0xNN>` pieces are byte-fallback tokens (HF `ByteFallback` decoder).
        byte_fallback: bool,
    },
    /// The token string is the literal text.
    Raw,
}

impl fmt::Display for TokenEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenEncoding::ByteLevel => f.write_str("byte-level BPE"),
            TokenEncoding::SentencePiece {
                byte_fallback: true,
            } => f.write_str("SentencePiece with byte fallback"),
            TokenEncoding::SentencePiece {
                byte_fallback: false,
            } => f.write_str("SentencePiece"),
            TokenEncoding::Raw => f.write_str("raw text"),
        }
    }
}

/// Marker in [`BYTE_LEVEL_DECODE`] for a code point outside the byte-level alphabet.
const NOT_IN_ALPHABET: u16 = u16::MAX;

/// Number of code points the byte-level alphabet spans (`0..324`): the 188 printable bytes map
/// to themselves, the other 68 to `256..324`.
const BYTE_LEVEL_SPAN: usize = 324;

/// Inverse of GPT-2's `bytes_to_unicode`: code point (< 324) → byte, or [`NOT_IN_ALPHABET`].
static BYTE_LEVEL_DECODE: [u16; BYTE_LEVEL_SPAN] = build_byte_level_decode();

/// Whether byte `b` is spelled by the code point with the same value in GPT-2's alphabet.
const fn byte_is_printable(b: usize) -> bool {
    (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
}

const fn build_byte_level_decode() -> [u16; BYTE_LEVEL_SPAN] {
    let mut table = [NOT_IN_ALPHABET; BYTE_LEVEL_SPAN];
    let mut next = 256usize;
    let mut b = 0usize;
    while b < 256 {
        if byte_is_printable(b) {
            table[b] = b as u16;
        } else {
            table[next] = b as u16;
            next += 1;
        }
        b += 1;
    }
    table
}

/// GPT-2's `bytes_to_unicode`: the code point that spells byte `b` in a byte-level vocabulary.
pub fn byte_level_char(b: u8) -> char {
    if byte_is_printable(b as usize) {
        return b as char;
    }
    // The non-printable bytes get 256, 257, ... in increasing byte order.
    let rank = (0..b as usize).filter(|&x| !byte_is_printable(x)).count();
    char::from_u32(256 + rank as u32).expect("256..324 are valid code points")
}

/// Encode bytes in GPT-2's byte-level alphabet (the inverse of [`decode_token`] with
/// [`TokenEncoding::ByteLevel`]); used by tests and tools that write vocabularies.
pub fn byte_level_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_level_char(b)).collect()
}

/// Append the bytes spelled by token string `token` in `encoding` to `out`.
///
/// On error `out` may hold a partial result and the message says which character is wrong.
pub fn decode_token(encoding: TokenEncoding, token: &str, out: &mut Vec<u8>) -> Result<(), String> {
    match encoding {
        TokenEncoding::ByteLevel => decode_byte_level(token, out),
        TokenEncoding::SentencePiece { byte_fallback } => {
            if byte_fallback {
                if let Some(b) = parse_byte_fallback(token) {
                    out.push(b);
                    return Ok(());
                }
            }
            decode_sentencepiece(token, out);
            Ok(())
        }
        TokenEncoding::Raw => {
            out.extend_from_slice(token.as_bytes());
            Ok(())
        }
    }
}

fn decode_byte_level(token: &str, out: &mut Vec<u8>) -> Result<(), String> {
    for (pos, c) in token.char_indices() {
        let cp = c as usize;
        let b = if cp < BYTE_LEVEL_SPAN {
            BYTE_LEVEL_DECODE[cp]
        } else {
            NOT_IN_ALPHABET
        };
        if b == NOT_IN_ALPHABET {
            return Err(format!(
                "character {c:?} (U+{cp:04X}) at byte offset {pos} is not in the byte-level BPE \
                 alphabet (GPT-2 bytes_to_unicode)"
            ));
        }
        out.push(b as u8);
    }
    Ok(())
}

/// SentencePiece's meta symbol for a space.
const SP_SPACE: char = '\u{2581}';

fn decode_sentencepiece(token: &str, out: &mut Vec<u8>) {
    let mut rest = token;
    while let Some(pos) = rest.find(SP_SPACE) {
        out.extend_from_slice(&rest.as_bytes()[..pos]);
        out.push(b' ');
        rest = &rest[pos + SP_SPACE.len_utf8()..];
    }
    out.extend_from_slice(rest.as_bytes());
}

/// `<0xNN>` (two hex digits, either case, as HF's `ByteFallback` decoder accepts) → `NN`.
pub fn parse_byte_fallback(token: &str) -> Option<u8> {
    let t = token.as_bytes();
    if t.len() != 6 || &t[..3] != b"<0x" || t[5] != b'>' {
        return None;
    }
    Some(hex_digit(t[3])? << 4 | hex_digit(t[4])?)
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

const B64_INVALID: u8 = 0xFF;

static BASE64_DECODE: [u8; 256] = {
    let mut t = [B64_INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// Decode standard base64 (RFC 4648 alphabet, `=` padding optional) and append to `out`.
pub fn decode_base64(text: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let mut body = text;
    while let [rest @ .., b'='] = body {
        body = rest;
    }
    if text.len() - body.len() > 2 {
        return Err("more than two '=' padding characters".to_string());
    }
    if body.len() % 4 == 1 {
        return Err(format!("invalid length {} for base64 data", text.len()));
    }
    let mut acc: u32 = 0;
    let mut nbits = 0u32;
    for (pos, &c) in body.iter().enumerate() {
        let v = BASE64_DECODE[c as usize];
        if v == B64_INVALID {
            return Err(format!(
                "invalid base64 character {:?} at offset {pos}",
                c as char
            ));
        }
        acc = (acc << 6) | v as u32;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
            acc &= (1 << nbits) - 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(enc: TokenEncoding, s: &str) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        decode_token(enc, s, &mut out).map(|_| out)
    }

    /// Straight transcription of GPT-2's `bytes_to_unicode` (Python) for cross-checking.
    fn gpt2_bytes_to_unicode() -> Vec<(u8, char)> {
        let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
            .chain(0xA1..=0xAC)
            .chain(0xAE..=0xFF)
            .collect();
        let mut cs = bs.clone();
        let mut n = 0;
        for b in 0..256u32 {
            if !bs.contains(&b) {
                bs.push(b);
                cs.push(256 + n);
                n += 1;
            }
        }
        bs.iter()
            .zip(&cs)
            .map(|(&b, &c)| (b as u8, char::from_u32(c).unwrap()))
            .collect()
    }

    #[test]
    fn byte_level_alphabet_matches_gpt2() {
        let pairs = gpt2_bytes_to_unicode();
        assert_eq!(pairs.len(), 256);
        for (b, c) in pairs {
            assert_eq!(byte_level_char(b), c, "byte {b}");
            assert_eq!(
                dec(TokenEncoding::ByteLevel, &c.to_string()).unwrap(),
                vec![b]
            );
        }
        assert_eq!(byte_level_char(b' '), 'Ġ');
        assert_eq!(byte_level_char(b'\n'), 'Ċ');
    }

    #[test]
    fn byte_level_tokens() {
        let bl = TokenEncoding::ByteLevel;
        assert_eq!(dec(bl, "Ġhello").unwrap(), b" hello");
        assert_eq!(dec(bl, "ĊĊ").unwrap(), b"\n\n");
        // "é" is 0xC3 0xA9, spelled "Ã©" in the alphabet.
        assert_eq!(dec(bl, "Ã©").unwrap(), "é".as_bytes());
        // A lone continuation byte (partial UTF-8) is a valid token.
        assert_eq!(dec(bl, "©").unwrap(), vec![0xA9]);
        assert_eq!(dec(bl, "").unwrap(), b"");
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(dec(bl, &byte_level_encode(&all)).unwrap(), all);
    }

    #[test]
    fn byte_level_rejects_foreign_characters() {
        let err = dec(TokenEncoding::ByteLevel, "ab中").unwrap_err();
        assert!(err.contains("U+4E2D"), "{err}");
        assert!(err.contains("offset 2"), "{err}");
        // A raw space is not part of the alphabet (it is spelled Ġ).
        assert!(dec(TokenEncoding::ByteLevel, " a").is_err());
        // Neither is U+00AD (soft hyphen), which maps to 256+n.
        assert!(dec(TokenEncoding::ByteLevel, "\u{AD}").is_err());
    }

    #[test]
    fn sentencepiece_tokens() {
        let sp = TokenEncoding::SentencePiece {
            byte_fallback: true,
        };
        assert_eq!(dec(sp, "▁hello").unwrap(), b" hello");
        assert_eq!(dec(sp, "▁▁").unwrap(), b"  ");
        assert_eq!(dec(sp, "a▁b▁").unwrap(), b"a b ");
        assert_eq!(dec(sp, "日本").unwrap(), "日本".as_bytes());
        assert_eq!(dec(sp, "<0x0A>").unwrap(), b"\n");
        assert_eq!(dec(sp, "<0xE6>").unwrap(), vec![0xE6]);
        assert_eq!(dec(sp, "<0xff>").unwrap(), vec![0xFF]);
        // Not byte-fallback spellings: literal text.
        assert_eq!(dec(sp, "<0x0G>").unwrap(), b"<0x0G>");
        assert_eq!(dec(sp, "<0x0A>>").unwrap(), b"<0x0A>>");
        assert_eq!(dec(sp, "<s>").unwrap(), b"<s>");
        let no_fb = TokenEncoding::SentencePiece {
            byte_fallback: false,
        };
        assert_eq!(dec(no_fb, "<0x0A>").unwrap(), b"<0x0A>");
    }

    #[test]
    fn raw_tokens() {
        assert_eq!(dec(TokenEncoding::Raw, "▁Ġx").unwrap(), "▁Ġx".as_bytes());
    }

    #[test]
    fn base64() {
        let cases: &[(&str, &[u8])] = &[
            ("", b""),
            ("IQ==", b"!"),
            ("IQ", b"!"),
            ("aGk=", b"hi"),
            ("aGVsbG8=", b"hello"),
            ("IGZvbw==", b" foo"),
            ("/w==", &[0xFF]),
            ("+/+/", &[0xFB, 0xFF, 0xBF]),
        ];
        for (text, want) in cases {
            let mut out = Vec::new();
            decode_base64(text.as_bytes(), &mut out).unwrap();
            assert_eq!(&out, want, "{text}");
        }
        let mut out = Vec::new();
        assert!(decode_base64(b"a*==", &mut out)
            .unwrap_err()
            .contains("'*'"));
        assert!(decode_base64(b"a", &mut out).is_err());
        assert!(decode_base64(b"a===", &mut out).is_err());
    }
}
