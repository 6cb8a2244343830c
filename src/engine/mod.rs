//! The engine: one pool's free slots, storage and waiting, used by every face
//! ([`Pool`](crate::Pool), [`IndexPool`](crate::IndexPool),
//! [`HandlePool`](crate::HandlePool)) and using none of them.
//!
//! From the bottom up:
//!
//! - [`segment`], [`slot`]: storage in segments that never move, and the
//!   value cells;
//! - [`free_list`]: the tagged Treiber stack of `u32` indices, the only
//!   module that knows about ABA;
//! - [`barrier`], [`unwind`]: the asymmetric barrier, and how a waker's
//!   panic is carried past a protocol step;
//! - [`fair`]: the FIFO ticket queue of fair pools;
//! - [`cache`] and [`wait`]: per-thread magazines, and waiting for a slot.
//!   These two import each other, because the protocol is a circle: a
//!   cache's flush wakes waiters, and waiters sweep the caches (see
//!   "With per-thread caches" in [`wait`]). No other circle exists here;
//! - [`shared`]: one pool's state, [`Shared`](shared::Shared), built on all of
//!   the above and split by concern.
//!
//! Below the engine sit only `sync` (the loom/std shim), `error` and `stats`
//! (public value types); above it the faces, `pool`, `index` and `handle`.

pub(crate) mod barrier;
pub(crate) mod cache;
pub(crate) mod fair;
pub(crate) mod free_list;
pub(crate) mod segment;
pub(crate) mod shared;
pub(crate) mod slot;
pub(crate) mod unwind;
pub(crate) mod wait;
