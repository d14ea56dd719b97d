//! Rules of the controller's source that review alone would not keep:
//!
//! - **Proxmox meaning lives in pve-client.** No controller code outside
//!   tests holds a phrase of Proxmox's response text that pve-client's
//!   error classification matches on (`pve_client::error::MESSAGE_PHRASES`):
//!   code that acts on Proxmox's words must go through pve-client's error
//!   kinds.
//! - **Condition reasons are one enum.** No controller code outside
//!   `reasons.rs` writes a reason code (`Reason::code`) as a string literal.
//!
//! Test code (files under a `tests/` folder, `tests.rs` and
//! `proptests.rs` files, and everything after a file's `#[cfg(test)]`) is
//! exempt: tests build Proxmox-shaped answers.
//! The in-memory Proxmox `pve/fake/` is exempt from the first rule for
//! the same reason: it words answers as Proxmox does, it matches none.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "tests") {
                sources(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs")
            && !p
                .file_name()
                .is_some_and(|n| n == "tests.rs" || n == "proptests.rs")
        {
            out.push(p);
        }
    }
}

/// `(path relative to src/, code before any #[cfg(test)])` of every
/// non-test source file of the controller.
fn production_code() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(
        files.len() > 50,
        "found only {} files under {}",
        files.len(),
        src.display()
    );
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = match text.find("#[cfg(test)]") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            let rel = p.strip_prefix(&src).unwrap().display().to_string();
            (rel, code)
        })
        .collect()
}

/// A string literal and whether the code compares text with it: an
/// argument of `contains`, `starts_with`, `ends_with`, `find`, `matches`,
/// an operand of `==`/`!=`, or a `match` arm pattern.
#[derive(Debug, PartialEq)]
struct Literal {
    text: String,
    compared: bool,
}

const COMPARING_CALLS: &[&str] = &[
    "contains(",
    "starts_with(",
    "ends_with(",
    "find(",
    "matches(",
    "strip_prefix(",
    "strip_suffix(",
    "==",
    "!=",
];

fn compared(before: &str, after: &str) -> bool {
    let b = before.trim_end();
    let a = after.trim_start();
    COMPARING_CALLS.iter().any(|c| b.ends_with(c))
        || a.starts_with("=>")
        || a.starts_with("==")
        || a.starts_with("!=")
        || (a.starts_with('|') && !a.starts_with("||"))
}

/// The string literals of `code` (plain `"…"` literals; escapes kept).
fn literals(code: &str) -> Vec<String> {
    scan(code).into_iter().map(|l| l.text).collect()
}

/// The string literals of `code`, with how each is used.
fn scan(code: &str) -> Vec<Literal> {
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    let mut in_comment = false;
    let mut prev = '\0';
    while let Some((start, c)) = chars.next() {
        if in_comment {
            if c == '\n' {
                in_comment = false;
            }
            prev = c;
            continue;
        }
        if c == '/' && prev == '/' {
            in_comment = true;
            continue;
        }
        if c == '"' && prev != '\'' {
            let mut lit = String::new();
            let mut escaped = false;
            let opened = start;
            let mut closed = code.len();
            for (j, d) in chars.by_ref() {
                if escaped {
                    lit.push(d);
                    escaped = false;
                } else if d == '\\' {
                    escaped = true;
                    lit.push(d);
                } else if d == '"' {
                    closed = j + 1;
                    break;
                } else {
                    lit.push(d);
                }
            }
            let mut from = opened.saturating_sub(16);
            while !code.is_char_boundary(from) {
                from -= 1;
            }
            let mut to = (closed + 4).min(code.len());
            while !code.is_char_boundary(to) {
                to += 1;
            }
            let before = &code[from..opened];
            let after = &code[closed..to];
            out.push(Literal {
                compared: compared(before, after),
                text: lit,
            });
            prev = '"';
            continue;
        }
        prev = c;
    }
    out
}

#[test]
fn the_literal_scanner_finds_literals_and_skips_comments() {
    let code = "let a = \"one\"; // \"not this\"\nlet b = '\"'; f(\"two \\\" three\");";
    assert_eq!(literals(code), ["one", "two \\\" three"]);
    let code =
        "if msg.contains(\"got timeout\") {} match m { \"a\" | \"b\" => 1, _ => format!(\"c\") }";
    let found: Vec<(String, bool)> = scan(code)
        .into_iter()
        .map(|l| (l.text, l.compared))
        .collect();
    assert_eq!(
        found,
        [
            ("got timeout".into(), true),
            ("a".into(), true),
            ("b".into(), true),
            ("c".into(), false)
        ]
    );
}

#[test]
fn no_controller_code_matches_proxmox_response_text() {
    let phrases: Vec<String> = pve_client::error::MESSAGE_PHRASES
        .iter()
        .map(|(p, _)| p.to_ascii_lowercase())
        .collect();
    assert!(phrases.len() >= 5, "the phrase table is empty?");
    let mut found = Vec::new();
    for (file, code) in production_code() {
        if file.starts_with("pve/fake") {
            continue;
        }
        for lit in scan(&code).into_iter().filter(|l| l.compared) {
            let lit = lit.text;
            let lower = lit.to_ascii_lowercase();
            for p in &phrases {
                if lower.contains(p.as_str()) {
                    found.push(format!("{file}: \"{lit}\" holds Proxmox's \"{p}\""));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Proxmox response text outside pve-client (decide it there, as an error kind):\n{}",
        found.join("\n")
    );
}

/// Every reason code, read from `Reason::code` in `reasons.rs`.
fn reason_codes() -> Vec<String> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/reasons.rs"))
            .unwrap();
    let start = text.find("pub fn code(&self)").expect("Reason::code");
    let body = &text[start..];
    let end = body.find("\n    }\n").expect("end of Reason::code");
    let codes: Vec<String> = body[..end]
        .lines()
        .filter_map(|l| l.split("=> \"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect();
    assert!(codes.len() > 30, "read only {} reason codes", codes.len());
    codes
}

/// The condition types (`pub const …: &str` in `conditions.rs`). Some
/// are also reason codes (`Ready`, `Paused`): as types they may be written
/// where conditions are read and in CRD printer columns.
fn condition_types() -> Vec<String> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/conditions.rs"))
            .unwrap();
    let types: Vec<String> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("pub const ") && l.contains(": &str = \""))
        .filter_map(|l| l.split('"').nth(1))
        .map(str::to_string)
        .collect();
    assert!(types.len() > 3, "read only {} condition types", types.len());
    types
}

/// Words that are reason codes and also something else, where they are
/// that something else.
const ALSO_NOT_REASONS: &[(&str, &str)] = &[
    // The CRD printer columns `PROVISIONED`.
    ("api/cluster.rs", "Provisioned"),
    ("api/machine.rs", "Provisioned"),
    // The machine phase label of the cluster metrics.
    ("cluster/reconcile.rs", "Deleting"),
    ("cluster/reconcile.rs", "Provisioned"),
];

#[test]
fn no_controller_code_writes_a_reason_code_outside_the_enum() {
    let types = condition_types();
    let codes: Vec<String> = reason_codes()
        .into_iter()
        .filter(|c| !types.contains(c))
        .collect();
    let mut found = Vec::new();
    for (file, code) in production_code() {
        if file == "reasons.rs" {
            continue;
        }
        for lit in literals(&code) {
            if ALSO_NOT_REASONS.contains(&(file.as_str(), lit.as_str())) {
                continue;
            }
            if codes.contains(&lit) {
                found.push(format!("{file}: \"{lit}\""));
            }
        }
    }
    assert!(
        found.is_empty(),
        "condition reason codes written outside reasons.rs (use a Reason variant):\n{}",
        found.join("\n")
    );
}
