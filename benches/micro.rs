//! Micro benchmarks (criterion): written next.
fn main() {}
