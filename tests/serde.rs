//! The `serde` feature: a handle and a typed key serialize as their 64
//! bits (one `u64` in serde's data model) and deserialize back to an equal
//! key that reaches the same value; bits that no pool hands out, and
//! anything but an unsigned integer, are refused. Run with
//! `cargo test --features serde --test serde` (CI's unit step does).

#![cfg(feature = "serde")]

use serde_test::{assert_de_tokens_error, assert_tokens, Token};
use tagpool::{Handle, HandlePool, Key};

tagpool::new_key_type! {
    struct VoiceKey;
}

#[test]
fn a_handle_is_its_bits_as_a_u64() {
    let pool = HandlePool::new(4);
    let first = pool.insert("a").unwrap();
    pool.remove(first);
    let h = pool.insert("b").unwrap();
    assert_eq!(h.generation(), 2);
    // Serializes to exactly one u64, and those tokens deserialize to `h`.
    assert_tokens(&h, &[Token::U64(h.to_bits())]);
    assert_tokens(&Some(h), &[Token::Some, Token::U64(h.to_bits())]);
}

#[test]
fn a_typed_key_is_its_handles_bits() {
    let voices: HandlePool<u32, VoiceKey> = HandlePool::with_key(2);
    let voice = voices.insert(70).unwrap();
    assert_tokens(&voice, &[Token::U64(voice.handle().to_bits())]);
    assert_tokens(&voice, &[Token::U64(1 << 24)]);
    // Other unsigned widths are accepted as a u64 is.
    let bits = voice.to_bits();
    serde_test::assert_de_tokens(&voice, &[Token::U32(bits as u32)]);
}

#[test]
fn bits_no_pool_hands_out_are_refused() {
    let expected = "the bits of a handle (generation 1 or above)";
    for bits in [0, 5, (1 << 24) - 1] {
        let message = format!("invalid value: integer `{bits}`, expected {expected}");
        assert_de_tokens_error::<Handle>(&[Token::U64(bits)], &message);
        assert_de_tokens_error::<VoiceKey>(&[Token::U64(bits)], &message);
    }
    assert_de_tokens_error::<Handle>(
        &[Token::Str("3v1")],
        "invalid type: string \"3v1\", expected u64",
    );
    assert_de_tokens_error::<VoiceKey>(
        &[Token::I64(-1)],
        "invalid value: integer `-1`, expected u64",
    );
}
