//! Build script: names this build of the engine by a hash of its sources, so compiled grammars
//! kept on disk by one build are never read by another (`mask::disk`).

use std::fs;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "kbnf") {
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let mut files = Vec::new();
    collect(&root.join("src"), &mut files);
    collect(&root.join("../schemas"), &mut files);
    files.sort();
    // FNV-1a over each file's path (relative) and contents: stable across platforms and runs.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f);
        feed(rel.to_string_lossy().as_bytes());
        feed(&fs::read(f).unwrap_or_default());
    }
    feed(
        fs::read(root.join("Cargo.toml"))
            .unwrap_or_default()
            .as_slice(),
    );
    println!("cargo:rustc-env=STRUCTOUT_ENGINE_SOURCE_HASH={h:016x}");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=../schemas");
    println!("cargo:rerun-if-changed=Cargo.toml");
}
