//! Loom models of tagpool live in `tests/`; run them with `run.sh`.
