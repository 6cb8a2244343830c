//! A server-style pool of response buffers shared by handler threads.
//!
//! Handler threads serve fake requests (no network): each one "parses" its
//! request, takes a `Vec<u8>` buffer from the pool, writes a response into
//! it, holds it while the response is "sent", then drops it. The pool's
//! reset closure clears a buffer as it comes back, keeping its capacity, so
//! a handler never allocates a buffer and every acquired buffer is checked to
//! still have its full capacity.
//!
//! The pool has fewer buffers than there are threads, as a server's would
//! under load, so handlers regularly find it empty. They then wait with
//! `acquire_timeout`; a request that gets no buffer in time is rejected (a
//! server would answer 503) and counted. The scoped threads borrow the pool,
//! so plain `PoolGuard`s do: no `Arc` needed.
//!
//! At the end it prints requests served and rejected, how often handlers
//! waited, and the pool's statistics, and checks them against the handlers'
//! own counters, together with buffer capacity, that no response changed
//! while it was being sent (two handlers never share a buffer) and that the
//! pool is empty. It exits with status 1 if any check fails.
//!
//! ```text
//! cargo run --release --example buffers
//! cargo run --release --example buffers -- --requests 2000 --threads 4
//! cargo run --release --example buffers -- --seconds 0.5 --threads 16 --capacity 4
//! ```

use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tagpool::Pool;

/// Every buffer is made with this capacity; no response is longer.
const BUFFER_CAPACITY: usize = 64 * 1024;

const USAGE: &str = "\
usage: buffers [--seconds S | --requests N] [--threads T] [--capacity C] [--timeout-ms M]

  --seconds S      serve requests for S seconds (default 2)
  --requests N     serve exactly N requests instead
  --threads T      handler threads (default 8)
  --capacity C     buffers in the pool, fewer than threads (default 3)
  --timeout-ms M   how long a handler waits for a buffer (default 2)";

/// When to stop taking requests.
#[derive(Clone, Copy)]
enum Limit {
    Seconds(f64),
    Requests(u64),
}

struct Args {
    limit: Limit,
    threads: usize,
    capacity: usize,
    timeout: Duration,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut args = Args {
            limit: Limit::Seconds(2.0),
            threads: 8,
            capacity: 3,
            timeout: Duration::from_millis(2),
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--seconds" => {
                    let seconds: f64 = value(&mut it, &flag)?;
                    if !(seconds > 0.0 && seconds < 3600.0) {
                        return Err("--seconds must be above 0 and below 3600".into());
                    }
                    args.limit = Limit::Seconds(seconds);
                }
                "--requests" => args.limit = Limit::Requests(value(&mut it, &flag)?),
                "--threads" => args.threads = value(&mut it, &flag)?,
                "--capacity" => args.capacity = value(&mut it, &flag)?,
                "--timeout-ms" => args.timeout = Duration::from_millis(value(&mut it, &flag)?),
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        if args.threads == 0 || args.capacity == 0 {
            return Err("--threads and --capacity must be at least 1".into());
        }
        Ok(args)
    }
}

/// Parses the value that follows `flag`.
fn value<T>(it: &mut impl Iterator<Item = String>, flag: &str) -> Result<T, String>
where
    T: FromStr,
    T::Err: Display,
{
    let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
    raw.parse().map_err(|err| format!("{flag} {raw}: {err}"))
}

/// xorshift64: a tiny deterministic generator.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A fake request: how big its response is and how long it takes.
struct Request {
    id: u64,
    body_len: usize,
    /// Work before a buffer is needed.
    parse: Duration,
    /// How long the buffer is held while the response goes out.
    send: Duration,
}

impl Request {
    fn fake(id: u64) -> Self {
        let mut state = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = |n: u64| xorshift(&mut state) % n;
        Request {
            id,
            body_len: 1024 + next(48 * 1024) as usize,
            parse: Duration::from_micros(next(400)),
            send: Duration::from_micros(200 + next(1000)),
        }
    }

    /// Writes the response into an empty buffer.
    fn respond(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: ");
        buf.extend_from_slice(self.body_len.to_string().as_bytes());
        buf.extend_from_slice(b"\r\n\r\n");
        let mut state = self.id | 1;
        let body_end = buf.len() + self.body_len;
        while buf.len() < body_end {
            let word = xorshift(&mut state).to_le_bytes();
            let take = (body_end - buf.len()).min(word.len());
            buf.extend_from_slice(&word[..take]);
        }
    }
}

/// One handler thread's counters.
#[derive(Default)]
struct Handled {
    served: u64,
    /// Requests rejected: no buffer within the timeout.
    rejected: u64,
    /// Requests that found the pool empty and had to wait.
    waited: u64,
    bytes: u64,
    /// Buffers acquired not empty or with less than their capacity.
    bad_buffers: u64,
    /// Responses that changed while being sent.
    corrupted: u64,
}

/// Hands out request ids until the limit.
struct Requests {
    next: AtomicU64,
    limit: Limit,
    start: Instant,
}

impl Requests {
    fn next(&self) -> Option<u64> {
        match self.limit {
            Limit::Requests(n) => {
                // Relaxed: only the ids' uniqueness matters.
                let id = self.next.fetch_add(1, Ordering::Relaxed);
                (id < n).then_some(id)
            }
            Limit::Seconds(seconds) => (self.start.elapsed().as_secs_f64() < seconds)
                .then(|| self.next.fetch_add(1, Ordering::Relaxed)),
        }
    }
}

fn handler(pool: &Pool<Vec<u8>>, requests: &Requests, timeout: Duration) -> Handled {
    let mut handled = Handled::default();
    while let Some(id) = requests.next() {
        let request = Request::fake(id);
        thread::sleep(request.parse);

        let buf = match pool.try_acquire() {
            Ok(buf) => Some(buf),
            Err(_) => {
                handled.waited += 1;
                pool.acquire_timeout(timeout).ok()
            }
        };
        let mut buf = match buf {
            Some(buf) => buf,
            None => {
                handled.rejected += 1; // 503 Service Unavailable
                continue;
            }
        };
        if !buf.is_empty() || buf.capacity() < BUFFER_CAPACITY {
            handled.bad_buffers += 1;
            buf.clear();
        }
        request.respond(&mut buf);
        let checksum = fnv1a(&buf);
        thread::sleep(request.send); // the response goes out
        if fnv1a(&buf) != checksum {
            handled.corrupted += 1;
        }
        handled.served += 1;
        handled.bytes += buf.len() as u64;
        // `buf` is dropped here: cleared, capacity kept, and back in the pool.
    }
    handled
}

/// Prints one check and remembers whether any failed.
#[derive(Default)]
struct Checks {
    failed: usize,
}

impl Checks {
    fn check(&mut self, ok: bool, what: impl Display) {
        println!("  {}  {what}", if ok { "ok    " } else { "FAILED" });
        if !ok {
            self.failed += 1;
        }
    }
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("buffers: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let pool = match Pool::builder(|| Vec::with_capacity(BUFFER_CAPACITY))
        .capacity(args.capacity)
        .reset(Vec::clear) // keeps the capacity
        .build()
    {
        Ok(pool) => pool,
        Err(err) => {
            eprintln!("buffers: {err}");
            return ExitCode::from(2);
        }
    };
    let requests = Requests {
        next: AtomicU64::new(0),
        limit: args.limit,
        start: Instant::now(),
    };

    let per_thread: Vec<Handled> = thread::scope(|scope| {
        let handles: Vec<_> = (0..args.threads)
            .map(|_| scope.spawn(|| handler(&pool, &requests, args.timeout)))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("a handler panicked"))
            .collect()
    });
    let elapsed = requests.start.elapsed().as_secs_f64();

    let mut total = Handled::default();
    for h in &per_thread {
        total.served += h.served;
        total.rejected += h.rejected;
        total.waited += h.waited;
        total.bytes += h.bytes;
        total.bad_buffers += h.bad_buffers;
        total.corrupted += h.corrupted;
    }
    let attempted = total.served + total.rejected;
    let stats = pool.stats();
    let limit = match args.limit {
        Limit::Seconds(seconds) => format!("for {seconds} s"),
        Limit::Requests(n) => format!("for {n} requests"),
    };
    let served: Vec<String> = per_thread.iter().map(|h| h.served.to_string()).collect();

    println!(
        "buffers: {} handler threads, a pool of {} buffers of {} KiB, timeout {:?}, {limit}",
        args.threads,
        stats.capacity,
        BUFFER_CAPACITY / 1024,
        args.timeout
    );
    if args.capacity >= args.threads {
        println!("  (the pool has a buffer for every thread: expect no waiting)");
    }
    println!(
        "  requests         {attempted} in {elapsed:.3} s: {} served, {} rejected (no buffer in time)",
        total.served, total.rejected
    );
    println!(
        "  throughput       {:.0} requests/s, {:.1} MiB/s of responses",
        total.served as f64 / elapsed,
        total.bytes as f64 / elapsed / (1024.0 * 1024.0)
    );
    println!("  served/thread    {}", served.join(", "));
    println!(
        "  waiting          {} requests found no free buffer, {} parked, {} timed out",
        total.waited, stats.waits, stats.timeouts
    );
    println!(
        "  pool             peak in use {} of {}, failed acquires {}, waits {}, timeouts {}",
        stats.peak_in_use, stats.capacity, stats.failed_acquires, stats.waits, stats.timeouts
    );

    println!("checks");
    let mut checks = Checks::default();
    if let Limit::Requests(n) = args.limit {
        checks.check(
            attempted == n,
            format_args!("every request served or rejected ({attempted} of {n})"),
        );
    }
    checks.check(
        total.bad_buffers == 0,
        format_args!(
            "every buffer came out of the pool empty with capacity >= {BUFFER_CAPACITY} \
             ({} did not)",
            total.bad_buffers
        ),
    );
    checks.check(
        total.corrupted == 0,
        format_args!(
            "no response changed while being sent ({} did)",
            total.corrupted
        ),
    );
    checks.check(
        stats.failed_acquires == total.waited,
        format_args!(
            "pool failed acquires == requests that waited ({} == {})",
            stats.failed_acquires, total.waited
        ),
    );
    checks.check(
        stats.timeouts == total.rejected && stats.timeouts <= stats.waits,
        format_args!(
            "pool timeouts == rejected requests <= pool waits ({} == {} <= {})",
            stats.timeouts, total.rejected, stats.waits
        ),
    );
    checks.check(
        stats.waits <= total.waited,
        format_args!(
            "pool waits <= requests that waited ({} <= {})",
            stats.waits, total.waited
        ),
    );
    checks.check(
        stats.peak_in_use <= stats.capacity,
        format_args!(
            "buffers in use never exceeded the pool (peak {} of {})",
            stats.peak_in_use, stats.capacity
        ),
    );
    checks.check(
        stats.in_use == 0 && stats.available == stats.capacity,
        format_args!(
            "pool empty at the end (in use {}, available {})",
            stats.in_use, stats.available
        ),
    );

    if checks.failed == 0 {
        ExitCode::SUCCESS
    } else {
        println!("{} check(s) failed", checks.failed);
        ExitCode::FAILURE
    }
}
