//! The `serde` feature on the secondary maps: a map is a sequence of
//! `(key, value)` pairs, each key its 64 bits (one `u64`), and back; a key
//! of generation 0, two pairs at one index, and anything but a sequence of
//! pairs are errors. Run with
//! `cargo test --features serde --test serde_secondary`.

#![cfg(feature = "serde")]

use serde_test::{assert_de_tokens, assert_de_tokens_error, assert_tokens, Token};
use tagpool::{Handle, HandlePool, Key, SecondaryMap, SparseSecondaryMap};

tagpool::new_key_type! {
    struct UnitKey;
}

/// The key of `index` under `generation` (at least 1).
fn key(index: u64, generation: u64) -> Handle {
    Handle::from_bits(generation << 24 | index).expect("generation 1 or above")
}

/// The tokens of one `(key, value)` pair with a `u32` value.
fn pair(key: Handle, value: u32) -> [Token; 4] {
    [
        Token::Tuple { len: 2 },
        Token::U64(key.to_bits()),
        Token::U32(value),
        Token::TupleEnd,
    ]
}

/// The tokens of a sequence of `pairs`.
fn seq(pairs: &[(Handle, u32)]) -> Vec<Token> {
    let mut tokens = vec![Token::Seq {
        len: Some(pairs.len()),
    }];
    for &(k, v) in pairs {
        tokens.extend(pair(k, v));
    }
    tokens.push(Token::SeqEnd);
    tokens
}

#[test]
fn a_dense_map_is_its_pairs_in_index_order() {
    let mut map = SecondaryMap::<Handle, u32>::new();
    map.insert(key(5, 2), 50);
    map.insert(key(1, 7), 10);
    assert_tokens(&map, &seq(&[(key(1, 7), 10), (key(5, 2), 50)]));
    assert_tokens(&SecondaryMap::<Handle, u32>::new(), &seq(&[]));
}

#[test]
fn a_sparse_map_is_its_pairs() {
    let mut map = SparseSecondaryMap::<Handle, u32>::new();
    map.insert(key(3, 4), 30);
    assert_tokens(&map, &seq(&[(key(3, 4), 30)]));
    // Several pairs, in any order, deserialize to the same map.
    map.insert(key(0, 1), 0);
    map.insert(key(9, 9), 90);
    assert_de_tokens(
        &map,
        &seq(&[(key(9, 9), 90), (key(0, 1), 0), (key(3, 4), 30)]),
    );
    assert_de_tokens(
        &map,
        &seq(&[(key(0, 1), 0), (key(3, 4), 30), (key(9, 9), 90)]),
    );
}

#[test]
fn a_map_of_typed_keys_and_strings_round_trips() {
    let units: HandlePool<(), UnitKey> = HandlePool::with_key(4);
    let archer = units.insert(()).unwrap();
    let mut names = SecondaryMap::new();
    names.insert(archer, String::from("archer"));
    let tokens = [
        Token::Seq { len: Some(1) },
        Token::Tuple { len: 2 },
        Token::U64(archer.to_bits()),
        Token::Str("archer"),
        Token::TupleEnd,
        Token::SeqEnd,
    ];
    assert_tokens(&names, &tokens);
    let sparse: SparseSecondaryMap<UnitKey, String> =
        names.iter().map(|(k, v)| (k, v.clone())).collect();
    assert_tokens(&sparse, &tokens);
}

#[test]
fn pairs_out_of_index_order_make_the_same_dense_map() {
    let map: SecondaryMap<Handle, u32> = [(key(1, 1), 1), (key(8, 3), 8)].into_iter().collect();
    // `assert_de_tokens` compares by `PartialEq`, which compares the
    // lengths too: the deserialized map counted its pairs.
    assert_de_tokens(&map, &seq(&[(key(8, 3), 8), (key(1, 1), 1)]));
}

#[test]
fn a_key_of_generation_0_is_an_error() {
    let expected = "the bits of a handle (generation 1 or above)";
    for bits in [0, 5] {
        let tokens = [
            Token::Seq { len: Some(1) },
            Token::Tuple { len: 2 },
            Token::U64(bits),
            // serde_test stops at the error: no tokens after it.
        ];
        let message = format!("invalid value: integer `{bits}`, expected {expected}");
        assert_de_tokens_error::<SecondaryMap<Handle, u32>>(&tokens, &message);
        assert_de_tokens_error::<SparseSecondaryMap<UnitKey, u32>>(&tokens, &message);
    }
}

#[test]
fn two_pairs_at_one_index_are_an_error() {
    for second in [key(3, 1), key(3, 2)] {
        let mut tokens = seq(&[(key(3, 1), 1), (second, 2)]);
        tokens.truncate(9); // up to the second pair's end: serde_test stops at the error
        let message = "two pairs at index 3 of a secondary map";
        assert_de_tokens_error::<SecondaryMap<Handle, u32>>(&tokens, message);
        assert_de_tokens_error::<SparseSecondaryMap<Handle, u32>>(&tokens, message);
    }
}

#[test]
fn anything_but_a_sequence_of_pairs_is_an_error() {
    assert_de_tokens_error::<SecondaryMap<Handle, u32>>(
        &[Token::U64(1 << 24)],
        "invalid type: integer `16777216`, expected a sequence of (key, value) pairs",
    );
    assert_de_tokens_error::<SparseSecondaryMap<Handle, u32>>(
        &[Token::Map { len: Some(0) }],
        "invalid type: map, expected a sequence of (key, value) pairs",
    );
    assert_de_tokens_error::<SecondaryMap<Handle, u32>>(
        &[
            Token::Seq { len: Some(1) },
            Token::Tuple { len: 1 },
            Token::U64(1 << 24),
            Token::TupleEnd,
        ],
        "invalid length 1, expected a tuple of size 2",
    );
    assert_de_tokens_error::<SparseSecondaryMap<Handle, u32>>(
        &[Token::Seq { len: Some(1) }, Token::Str("0v1")],
        "invalid type: string \"0v1\", expected a tuple of size 2",
    );
}
