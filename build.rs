//! Loom fault injection for `loom-tests/run.sh`, and nothing else: the
//! names in `TAGPOOL_LOOM_FAULTS` (space-separated `tagpool_loom_*` cfgs,
//! each a planted bug that only a build with `--cfg loom` compiles in)
//! become cfgs of this crate alone. Set through the environment rather
//! than `RUSTFLAGS`, so that switching faults rebuilds this crate and its
//! loom models but none of their dependencies. Unset (every normal build),
//! it emits nothing.

fn main() {
    println!("cargo:rerun-if-env-changed=TAGPOOL_LOOM_FAULTS");
    println!("cargo:rerun-if-changed=build.rs");
    if let Ok(faults) = std::env::var("TAGPOOL_LOOM_FAULTS") {
        for fault in faults.split_whitespace() {
            assert!(
                fault.starts_with("tagpool_loom_"),
                "TAGPOOL_LOOM_FAULTS names loom faults only: {fault}"
            );
            println!("cargo:rustc-cfg={fault}");
        }
    }
}
