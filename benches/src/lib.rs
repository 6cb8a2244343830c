//! Benchmarks of tagpool live in `benches/`.
