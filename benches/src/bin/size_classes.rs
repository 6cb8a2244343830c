//! Buffers of every size: tagpool's `BufferPool` against zeropool and a
//! hand-written tier of `Mutex<Vec<Vec<u8>>>` per power-of-two class (the
//! pool Rust servers write by hand), on a mixed-size workload, and each
//! one's resident memory after a spike of large frames.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin size_classes
//! cargo run --release -p tagpool-benches --bin size_classes -- benches/RESULTS.md   # and write it there
//! ```
//!
//! - **Throughput** (`mixed`): each operation takes a buffer for a length
//!   drawn log-uniformly from 64 B to 1 MiB (a power of two from 2^6 to
//!   2^20, then uniform below the next), writes its first and last byte,
//!   and gives it back. One and two threads, the three stores interleaved
//!   round by round in one process; ns per operation per thread, medians
//!   of the rounds, and tagpool / store as the median of the rounds'
//!   ratios. Each store is warmed up first (every class's buffers made).
//! - **Resident memory** (`spike`): in a fresh child process per store,
//!   64 frames of 1 MiB held at once and written whole (so their pages are
//!   resident), then all given back; the figure is the resident set
//!   (`/proc/self/statm`) after the spike, minus the one before. tagpool's
//!   1 MiB class holds 8 buffers: the spike's other frames are plain
//!   `Vec`s (a `try_acquire` that fails), freed when dropped, as a server
//!   that caps its pooled memory would write it. zeropool keeps its
//!   defaults; the mutex tiers keep every buffer given back.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use tagpool::BufferPool;
use tagpool_benches::median;

const USAGE: &str = "usage: size_classes [--rounds N] [--ms MS] [OUT.md]";
const MARKERS: (&str, &str) = ("<!-- size_classes:start -->", "<!-- size_classes:end -->");

/// The smallest and the largest class: 64 B and 1 MiB.
const MIN_SHIFT: u32 = 6;
const MAX_SHIFT: u32 = 20;
/// Buffers per class (tagpool's capacity, the mutex tiers' cap).
const PER_CLASS: usize = 64;
/// The spike: this many 1 MiB frames at once.
const SPIKE: usize = 64;
/// tagpool's 1 MiB class in the spike.
const SPIKE_CLASS: usize = 8;

/// A store of byte buffers by size.
trait Store: Send + Sync + 'static {
    const NAME: &'static str;
    /// Takes a buffer of at least `len`, writes its first and last byte,
    /// gives it back.
    fn cycle(&self, len: usize);
    /// The spike: `SPIKE` frames of 1 MiB at once, written whole, then
    /// given back.
    fn spike(&self);
}

impl Store for BufferPool<u8> {
    const NAME: &'static str = "tagpool";

    #[inline]
    fn cycle(&self, len: usize) {
        let mut buf = self.acquire(len).expect("never closed");
        let spare = buf.spare_capacity_mut();
        spare[0].write(1);
        spare[len.max(1) - 1].write(2);
        black_box(&buf);
    }

    fn spike(&self) {
        let frames: Vec<Vec<u8>> = Vec::new();
        let mut pooled = Vec::new();
        let mut plain = frames;
        for _ in 0..SPIKE {
            match self.try_acquire(1 << MAX_SHIFT) {
                Ok(mut buf) => {
                    buf.resize(1 << MAX_SHIFT, 7);
                    pooled.push(buf);
                }
                Err(_) => plain.push(vec![7u8; 1 << MAX_SHIFT]),
            }
        }
        black_box((&pooled, &plain));
    }
}

impl Store for zeropool::ZeroPool {
    const NAME: &'static str = "zeropool";

    #[inline]
    fn cycle(&self, len: usize) {
        let len = len.max(1);
        // Uninitialized, as the others: zeropool's `alloc` would zero the
        // `len` visible bytes first.
        let mut buf = self.alloc_uninit(len);
        let bytes = buf.as_uninit_mut();
        bytes[0].write(1);
        bytes[len - 1].write(2);
        black_box(&buf);
    }

    fn spike(&self) {
        let frames: Vec<_> = (0..SPIKE)
            .map(|_| {
                self.alloc_uninit(1 << MAX_SHIFT)
                    .write_from_slice(&[7u8; 1 << MAX_SHIFT])
            })
            .collect();
        black_box(&frames);
    }
}

/// A tier of mutex-guarded stacks, one per power-of-two class, each kept
/// to `PER_CLASS` buffers: what servers write by hand.
struct MutexTiers {
    classes: Vec<Mutex<Vec<Vec<u8>>>>,
}

impl MutexTiers {
    fn new() -> Self {
        Self {
            classes: (MIN_SHIFT..=MAX_SHIFT)
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
        }
    }

    fn class(len: usize) -> usize {
        (len.max(1)
            .next_power_of_two()
            .trailing_zeros()
            .max(MIN_SHIFT)
            - MIN_SHIFT) as usize
    }

    fn take(&self, len: usize) -> Vec<u8> {
        let k = Self::class(len);
        let popped = self.classes[k].lock().unwrap().pop();
        popped.unwrap_or_else(|| Vec::with_capacity(1 << (k as u32 + MIN_SHIFT)))
    }

    fn give(&self, mut buf: Vec<u8>, len: usize) {
        buf.clear();
        let mut class = self.classes[Self::class(len)].lock().unwrap();
        if class.len() < PER_CLASS {
            class.push(buf);
        }
    }
}

impl Store for MutexTiers {
    const NAME: &'static str = "mutex_tiers";

    #[inline]
    fn cycle(&self, len: usize) {
        let mut buf = self.take(len);
        let spare = buf.spare_capacity_mut();
        spare[0].write(1);
        spare[len.max(1) - 1].write(2);
        black_box(&buf);
        self.give(buf, len);
    }

    fn spike(&self) {
        let frames: Vec<Vec<u8>> = (0..SPIKE)
            .map(|_| {
                let mut buf = self.take(1 << MAX_SHIFT);
                buf.resize(1 << MAX_SHIFT, 7);
                buf
            })
            .collect();
        for buf in frames {
            self.give(buf, 1 << MAX_SHIFT);
        }
    }
}

fn tagpool_store(spike_class: Option<usize>) -> BufferPool<u8> {
    let mut builder = BufferPool::builder()
        .sizes(1 << MIN_SHIFT, 1 << MAX_SHIFT)
        .capacity(PER_CLASS);
    if let Some(n) = spike_class {
        builder = builder.class_capacity(1 << MAX_SHIFT, n);
    }
    builder.build().expect("valid sizes")
}

/// A thread's length generator: log-uniform from 64 B to 1 MiB.
struct Lengths(u64);

impl Lengths {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let shift = MIN_SHIFT + (self.0 % u64::from(MAX_SHIFT - MIN_SHIFT + 1)) as u32;
        let base = 1usize << shift;
        // Uniform in (base / 2, base]: the class of `base`.
        base / 2 + 1 + ((self.0 >> 20) as usize % (base / 2))
    }
}

/// One round of `threads` threads cycling buffers on `store`; ns per
/// operation per thread.
fn round<S: Store>(store: &Arc<S>, threads: usize, duration: Duration, seed: u64) -> f64 {
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let (start, ops, end) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, barrier, store) = (&stop, &barrier, Arc::clone(store));
                s.spawn(move || {
                    let mut lengths = Lengths(seed.wrapping_mul(31).wrapping_add(t as u64 + 1) | 1);
                    barrier.wait();
                    let mut ops = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            store.cycle(lengths.next());
                        }
                        ops += 64;
                    }
                    (ops, Instant::now())
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        let results: Vec<(u64, Instant)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let end = results.iter().map(|r| r.1).max().unwrap();
        (start, results.iter().map(|r| r.0).sum::<u64>(), end)
    });
    end.duration_since(start).as_nanos() as f64 * threads as f64 / ops as f64
}

/// Every class's buffers made, so that the rounds measure reuse.
fn warm<S: Store>(store: &Arc<S>) {
    let mut lengths = Lengths(7);
    for _ in 0..20_000 {
        store.cycle(lengths.next());
    }
}

/// The resident set of this process, in bytes.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The child's side of `spike`: prints the resident growth in bytes.
fn spike_child(name: &str) {
    let before;
    let after;
    match name {
        "tagpool" => {
            let store = tagpool_store(Some(SPIKE_CLASS));
            before = resident();
            store.spike();
            after = resident();
            black_box(&store);
        }
        "zeropool" => {
            let store = zeropool::ZeroPool::new();
            before = resident();
            store.spike();
            after = resident();
            black_box(&store);
        }
        "mutex_tiers" => {
            let store = MutexTiers::new();
            before = resident();
            store.spike();
            after = resident();
            black_box(&store);
        }
        other => panic!("no store {other}"),
    }
    println!("{}", after.saturating_sub(before));
}

/// Runs the spike in a fresh child process for `name`: MiB resident after.
fn spike(name: &str) -> f64 {
    let exe = std::env::current_exe().expect("the binary's path");
    let out = std::process::Command::new(exe)
        .args(["--spike-child", name])
        .output()
        .expect("the child ran");
    let text = String::from_utf8_lossy(&out.stdout);
    let bytes: f64 = text.trim().parse().unwrap_or(f64::NAN);
    bytes / (1 << 20) as f64
}

fn main() {
    let mut rounds = 9;
    let mut ms = 100u64;
    let mut out_file = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let number = |v: Option<String>| v.and_then(|v| v.parse::<u64>().ok()).filter(|n| *n > 0);
        match arg.as_str() {
            "--spike-child" => return spike_child(&args.next().expect(USAGE)),
            "--rounds" => rounds = number(args.next()).expect(USAGE) as usize,
            "--ms" => ms = number(args.next()).expect(USAGE),
            "-h" | "--help" => return println!("{USAGE}"),
            _ if arg.ends_with(".md") => out_file = Some(PathBuf::from(arg)),
            _ => panic!("{USAGE}"),
        }
    }
    let duration = Duration::from_millis(ms);
    let machine = tagpool_benches::Machine::current();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "`size_classes` binary, {} on {}, {} logical CPUs: median of {rounds} rounds of about \
         {ms} ms per store, the stores in rotating order; `mixed`: ns per operation per thread \
         (take a buffer of a length drawn log-uniformly from 64 B to 1 MiB, write its first and \
         last byte, give it back), tagpool / store as the median of the rounds' ratios; `spike`: \
         MiB resident after {SPIKE} frames of 1 MiB held at once, written and given back (a \
         fresh process per store; tagpool's 1 MiB class holds {SPIKE_CLASS}).\n",
        machine.date, machine.cpu, machine.cpus
    );
    out.push_str(
        "| row | threads | store | figure | tagpool / store |\n|---|---:|---|---:|---:|\n",
    );
    print!("{out}");
    let tagpool = Arc::new(tagpool_store(None));
    let zero = Arc::new(zeropool::ZeroPool::new());
    let tiers = Arc::new(MutexTiers::new());
    warm(&tagpool);
    warm(&zero);
    warm(&tiers);
    for threads in [1, 2] {
        let mut figures = [Vec::new(), Vec::new(), Vec::new()];
        for r in 0..rounds {
            let seed = r as u64 + 1;
            for k in 0..3 {
                let which = (r + k) % 3;
                let figure = match which {
                    0 => round(&tagpool, threads, duration, seed),
                    1 => round(&zero, threads, duration, seed),
                    _ => round(&tiers, threads, duration, seed),
                };
                figures[which].push(figure);
            }
        }
        let names = [
            <BufferPool<u8> as Store>::NAME,
            <zeropool::ZeroPool as Store>::NAME,
            <MutexTiers as Store>::NAME,
        ];
        for (k, name) in names.iter().enumerate() {
            let mut ratios: Vec<f64> = figures[0]
                .iter()
                .zip(&figures[k])
                .map(|(t, s)| t / s)
                .collect();
            let line = format!(
                "| mixed | {threads} | {name} | {:.1} ns | {:.2} |",
                median(&mut figures[k].clone()),
                median(&mut ratios)
            );
            println!("{line}");
            out.push_str(&line);
            out.push('\n');
        }
    }
    let spikes: Vec<(&str, f64)> = ["tagpool", "zeropool", "mutex_tiers"]
        .iter()
        .map(|&name| (name, spike(name)))
        .collect();
    for &(name, mib) in &spikes {
        let line = format!(
            "| spike | 1 | {name} | {mib:.1} MiB | {:.2} |",
            spikes[0].1 / mib
        );
        println!("{line}");
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(path) = out_file {
        tagpool_benches::write_table_or_exit("size_classes", &path, &out, MARKERS);
    }
}
