//! A read section kept in a thread-local whose destructor runs after the
//! thread's registration (its id) was dropped: the thread that gets the id
//! next must not take the record over while that section is open (its late
//! end would end the new owner's section). Alone in its test binary, so
//! that the freed id goes to the next thread.
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use tagpool::{Handle, HandlePool, ReadSection};

static DROPPED: AtomicUsize = AtomicUsize::new(0);

struct Noisy(u64);
impl Drop for Noisy {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

fn pool() -> &'static HandlePool<Noisy> {
    Box::leak(Box::new(HandlePool::new(64)))
}

struct Holder(RefCell<Option<ReadSection<'static, Noisy>>>);
impl Drop for Holder {
    fn drop(&mut self) {
        // Runs after this thread's Registration was dropped (registered
        // earlier, destroyed later). Let the adopter in first.
        REG_GONE.store(true, Ordering::SeqCst);
        while !ADOPTED.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Ends the section: writes depth/word of the record now owned by B.
        drop(self.0.borrow_mut().take());
        A_DONE.store(true, Ordering::SeqCst);
    }
}

static REG_GONE: AtomicBool = AtomicBool::new(false);
static ADOPTED: AtomicBool = AtomicBool::new(false);
static A_DONE: AtomicBool = AtomicBool::new(false);

thread_local! {
    static HOLDER: Holder = const { Holder(RefCell::new(None)) };
}

#[test]
#[cfg_attr(
    miri,
    ignore = "leaks its pool on purpose (a `'static` borrow for a thread-local section)"
)]
fn a_section_that_outlives_its_threads_id_keeps_its_record_from_the_next_thread() {
    let pool = pool();
    let key: Handle = pool.insert(Noisy(7)).unwrap();
    // Thread A: registers HOLDER before its id, opens a section, parks it
    // in HOLDER.
    let a = std::thread::spawn(move || {
        HOLDER.with(|_| {}); // destructor registered first: runs last
        let s = pool.read(); // allocates the thread id (Registration)
        HOLDER.with(|h| *h.0.borrow_mut() = Some(s));
    });
    while !REG_GONE.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Thread B: takes the freed id, hence A's record, opens a section and
    // reads the value.
    let (tx, rx) = mpsc::channel::<()>();
    let (tx2, rx2) = mpsc::channel::<()>();
    let b = std::thread::spawn(move || {
        let s = pool.read();
        let v: &Noisy = s.get(key).unwrap();
        ADOPTED.store(true, Ordering::SeqCst);
        tx.send(()).unwrap();
        rx2.recv().unwrap();
        // Still in B's section: the value must not have been dropped.
        let seen = v.0;
        drop(s);
        seen
    });
    rx.recv().unwrap();
    while !A_DONE.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    a.join().unwrap();
    assert!(pool.remove(key));
    let freed = pool.reclaim();
    let dropped = DROPPED.load(Ordering::SeqCst);
    tx2.send(()).unwrap();
    let _ = b.join();
    assert_eq!(
        (freed, dropped),
        (0, 0),
        "a grace period freed (and dropped) the value B's open section read"
    );
}
