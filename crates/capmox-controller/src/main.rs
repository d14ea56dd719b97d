//! The capmox-controller manager binary (wired up by the manager issue).
fn main() {}
