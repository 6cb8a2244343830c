//! Secondary maps: [`SecondaryMap`] (dense, a `Vec` by index) and
//! [`SparseSecondaryMap`] (a `HashMap` by index), which keep values of
//! your own beside the values of a [`HandlePool`](crate::HandlePool),
//! keyed by its handles, after slotmap's maps of the same names.
//!
//! The files: `dense.rs` and `sparse.rs` (the maps and their methods),
//! `entry.rs` (the [`Entry`] API, one for both maps), `iter.rs` (the
//! iterators, one set for both maps), `traits.rs` (the std traits),
//! `serialize.rs` (the `serde` feature), and `generations.md` (the rules
//! below, shown on [`SecondaryMap`] too).
//!
//! No `unsafe`: the maps are std containers of `(K, V)` pairs, so they are
//! `Send` and `Sync` exactly when their keys and values are.
//!
#![doc = include_str!("generations.md")]

mod dense;
mod entry;
mod iter;
#[cfg(feature = "serde")]
mod serialize;
mod sparse;
mod traits;

pub use self::dense::SecondaryMap;
pub use self::entry::{Entry, OccupiedEntry, VacantEntry};
pub use self::iter::{
    SecondaryDrain, SecondaryIntoIter, SecondaryIter, SecondaryIterMut, SecondaryKeys,
    SecondaryValues, SecondaryValuesMut,
};
pub use self::sparse::SparseSecondaryMap;

use crate::handle::Key;

/// The positions of `keys` (`0..N`) sorted by the keys' indices, or `None`
/// if two keys have one index: the plan of both maps' `get_disjoint_mut`,
/// which takes the values in index order so that each `&mut` comes from a
/// part of the storage that no other one borrows.
fn disjoint_order<K: Key, const N: usize>(keys: &[K; N]) -> Option<[usize; N]> {
    let mut order: [usize; N] = core::array::from_fn(|position| position);
    order.sort_unstable_by_key(|&position| keys[position].index());
    let shared = order
        .windows(2)
        .any(|pair| keys[pair[0]].index() == keys[pair[1]].index());
    if shared {
        None
    } else {
        Some(order)
    }
}

/// The panic of `map[key]` for a key the map has no value of.
#[cold]
#[inline(never)]
#[track_caller]
fn absent<K: Key>(key: K) -> ! {
    panic!(
        "tagpool: no value for {:?} in the secondary map (never inserted, removed, \
         or stored under another generation)",
        key
    )
}
