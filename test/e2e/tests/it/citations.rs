//! The repository stands on its own: no file cites a document that is not in
//! it. Proxmox behaviour is cited from `docs/proxmox-semantics.md`, field
//! cases from `docs/field-cases.md`, the CAPI contract by its sections.
//!
//! The reference data beside the repository (`../shared`) may be named only
//! by the conformance suite's own code (`*/tests/conformance/`) and by the
//! lines of the README, the docs and the Makefile that explain that suite
//! (a line naming it must say "conformance"). The documents it holds
//! (the names in [`FORBIDDEN`] after the first) are named nowhere.

use std::path::{Path, PathBuf};

/// Names of things outside the repository.
const FORBIDDEN: [&str; 10] = [
    "../shared",
    "SEMANTICS.md",
    "FIELD-CASES.md",
    "STYLE.md",
    "CAPI-CONTRACT.md",
    "ARCHITECTURE.md",
    "DEPENDENCIES.md",
    "PVE-SIM.md",
    "TESTING.md",
    "API.md",
];

/// This file names them all.
const SELF: &str = "test/e2e/tests/it/citations.rs";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Every file of the repository, relative to its root with `/`, without
/// `.git`, build output (`target`, `out`, any folder holding a cargo
/// `CACHEDIR.TAG`) and editor swap files.
fn files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            if matches!(name.as_str(), ".git" | "target" | "out")
                || path.join("CACHEDIR.TAG").exists()
            {
                continue;
            }
            files(root, &path, out);
        } else if !name.ends_with(".swp") {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push(rel);
        }
    }
}

/// The forbidden names `line` contains: each as a whole name (`API.md` but
/// not `OPENAPI.md`).
fn named_in(line: &str) -> Vec<&'static str> {
    FORBIDDEN
        .iter()
        .filter(|name| {
            line.match_indices(**name).any(|(i, _)| {
                name.starts_with('.')
                    || line[..i]
                        .chars()
                        .next_back()
                        .is_none_or(|c| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
            })
        })
        .copied()
        .collect()
}

/// Whether `file` explains the conformance suite in prose (README, docs,
/// Makefile): there a line may name `../shared` when it says "conformance".
fn explains_conformance(file: &str) -> bool {
    file == "Makefile" || file.ends_with("README.md") || file.starts_with("docs/")
}

fn citations(file: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for name in named_in(line) {
            let allowed = name == "../shared"
                && explains_conformance(file)
                && line.to_lowercase().contains("conformance");
            if !allowed {
                found.push(format!("{file}:{}: {name}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn no_file_cites_a_document_outside_the_repository() {
    let root = root();
    let mut all = Vec::new();
    files(&root, &root, &mut all);
    all.sort();
    assert!(
        all.iter().any(|f| f == "Cargo.toml"),
        "walked {}",
        root.display()
    );
    let mut found = Vec::new();
    for file in &all {
        if file == SELF || file.contains("/tests/conformance/") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue; // not text
        };
        found.extend(citations(file, &text));
    }
    assert!(
        found.is_empty(),
        "cite docs/proxmox-semantics.md §N, docs/field-cases.md Bnn, an API path or a CAPI contract section instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn whole_names_are_found_and_explained_lines_pass() {
    assert_eq!(named_in("see STYLE.md 4"), ["STYLE.md"]);
    assert_eq!(named_in("(SEMANTICS.md §6)"), ["SEMANTICS.md"]);
    assert!(named_in("see OPENAPI.md and docs/proxmox-semantics.md").is_empty());
    assert_eq!(named_in("`../shared/capi-crds`"), ["../shared"]);
    assert!(citations("README.md", "make conformance reads ../shared/pve-api").is_empty());
    assert_eq!(citations("README.md", "reads ../shared/pve-api").len(), 1);
    assert_eq!(
        citations("src/x.rs", "// conformance: ../shared/pve-api").len(),
        1,
        "code outside the conformance suite may not name it"
    );
    assert_eq!(
        citations("docs/a.md", "conformance, see FIELD-CASES.md").len(),
        1
    );
}

/// The numbers cited after `marker` in `text` (`B15`, `§6`, and lists such
/// as `B01, B03`).
fn cited_numbers(text: &str, marker: &str, prefix: char) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices(marker) {
        let rest = &text[i + marker.len()..];
        let mut words = rest.split([' ', ',', ')', '\n', '/', ';', '.', '`']);
        for w in words.by_ref().filter(|w| !w.is_empty()) {
            match w.strip_prefix(prefix) {
                Some(n) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
                    out.push(w.to_string());
                }
                _ => break,
            }
        }
    }
    out
}

#[test]
fn cited_sections_and_cases_exist() {
    let root = root();
    let semantics = std::fs::read_to_string(root.join("docs/proxmox-semantics.md")).unwrap();
    let cases = std::fs::read_to_string(root.join("docs/field-cases.md")).unwrap();
    let mut all = Vec::new();
    files(&root, &root, &mut all);
    let mut missing = Vec::new();
    for file in &all {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        for s in cited_numbers(&text, "proxmox-semantics.md ", '§') {
            let heading = format!("\n## {}. ", &s['§'.len_utf8()..]);
            if !semantics.contains(&heading) {
                missing.push(format!("{file}: docs/proxmox-semantics.md {s}"));
            }
        }
        for b in cited_numbers(&text, "field-cases.md ", 'B') {
            if !cases.contains(&format!("\n## {b} ")) {
                missing.push(format!("{file}: docs/field-cases.md {b}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited but not there:\n{}",
        missing.join("\n")
    );
    assert_eq!(
        cited_numbers("docs/field-cases.md B01, B03) and", "field-cases.md ", 'B'),
        ["B01", "B03"]
    );
    assert_eq!(
        cited_numbers(
            "(docs/proxmox-semantics.md §6; x",
            "proxmox-semantics.md ",
            '§'
        ),
        ["§6"]
    );
}
