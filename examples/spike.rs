//! Memory over a spike, and after a trim: an elastic buffer pool, measured.
//!
//! A server keeps a pool of large `Vec<u8>` buffers. It starts with storage
//! for a few (`Builder::initial`), and a burst of requests makes it grow:
//! handler threads take `--peak` buffers at once and write every page of
//! each, so the memory is really used. After the burst the buffers are idle
//! in the pool, still holding their memory, until `Pool::trim` drops all
//! but `--keep` of them and gives that memory back to the allocator. The
//! slots stay in the pool; the factory refills them if another burst comes.
//!
//! At each phase (built, burst held, burst over, trimmed) it prints the
//! process's resident set size (`VmRSS` from `/proc/self/status`, which
//! needs no page size; Linux only, "n/a" elsewhere) and the pool's
//! statistics, then checks that every held buffer kept its bytes, that the
//! pool is whole (nothing in use, every slot available), that the trim
//! dropped exactly the idle values beyond `--keep`, and that a second burst
//! gets every buffer again. On Linux, with buffers of 128 KiB or more, it
//! also checks the memory: the trim must give back at least half of what
//! the trimmed buffers held (with the defaults, 496 MiB of a 516 MiB peak).
//! Smaller buffers come from the allocator's heap, whose freed memory may
//! stay resident in its free lists: that is the allocator's choice, not the
//! pool's, so it is shown but not checked. It exits with status 1 if a
//! check fails, and with status 2 on a bad argument.
//!
//! ```text
//! cargo run --release --example spike
//! cargo run --release --example spike -- --buffer-size 262144 --capacity 256 --peak 64 --keep 8
//! ```

use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;
use std::thread;

use tagpool::{Pool, PoolGuard, Stats};

const USAGE: &str = "\
usage: spike [--buffer-size BYTES] [--capacity C] [--initial N] [--peak P]
             [--keep K] [--threads T]

  --buffer-size BYTES  each buffer's size, every page written (default 1048576)
  --capacity C         the pool's bound (default 1024)
  --initial N          slots allocated at build (default 16)
  --peak P             buffers held at once during the burst (default 512)
  --keep K             idle buffers kept by the trim (default 16)
  --threads T          threads taking the burst's buffers (default 2)";

struct Args {
    buffer_size: usize,
    capacity: usize,
    initial: usize,
    peak: usize,
    keep: usize,
    threads: usize,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut args = Args {
            buffer_size: 1 << 20,
            capacity: 1024,
            initial: 16,
            peak: 512,
            keep: 16,
            threads: 2,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--buffer-size" => args.buffer_size = value(&mut it, &flag)?,
                "--capacity" => args.capacity = value(&mut it, &flag)?,
                "--initial" => args.initial = value(&mut it, &flag)?,
                "--peak" => args.peak = value(&mut it, &flag)?,
                "--keep" => args.keep = value(&mut it, &flag)?,
                "--threads" => args.threads = value(&mut it, &flag)?,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        if args.buffer_size == 0 || args.capacity == 0 || args.peak == 0 || args.threads == 0 {
            return Err("--buffer-size, --capacity, --peak and --threads must not be 0".into());
        }
        if args.buffer_size.checked_mul(args.peak).is_none() {
            return Err("--buffer-size times --peak overflows the address space".into());
        }
        if args.peak > args.capacity {
            return Err("--peak must not exceed --capacity".into());
        }
        if args.keep > args.peak {
            return Err("--keep must not exceed --peak".into());
        }
        Ok(args)
    }
}

fn value<T: FromStr>(it: &mut impl Iterator<Item = String>, flag: &str) -> Result<T, String>
where
    T::Err: Display,
{
    let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
    raw.parse().map_err(|e| format!("{flag} {raw}: {e}"))
}

/// The resident set size in MiB, from `/proc/self/status` (`VmRSS`, in kB):
/// `None` where there is no such file.
fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn row(phase: &str, stats: &Stats) -> Option<f64> {
    let rss = rss_mib();
    let shown = rss.map_or_else(|| "n/a".to_string(), |mib| format!("{mib:.1}"));
    println!(
        "| {phase:<22} | {shown:>8} | {:>9} | {:>6} | {:>6} |",
        stats.allocated, stats.filled, stats.in_use
    );
    rss
}

/// Records a check's outcome, printing it; returns whether it held.
fn check(ok: bool, what: impl Display) -> bool {
    println!("{} {what}", if ok { "ok:  " } else { "FAIL:" });
    ok
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("spike: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let size = args.buffer_size;
    let pool = match Pool::builder(move || Vec::<u8>::with_capacity(size))
        .capacity(args.capacity)
        .initial(args.initial)
        .lazy()
        .reset(|buffer: &mut Vec<u8>| buffer.clear())
        .build()
    {
        Ok(pool) => pool,
        Err(e) => {
            eprintln!("spike: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    println!(
        "spike: {} buffers of {} bytes at the peak, capacity {}, initial {}, keep {}, {} threads",
        args.peak, args.buffer_size, args.capacity, args.initial, args.keep, args.threads
    );
    println!("| phase                  | RSS MiB  | allocated | filled | in_use |");
    println!("|------------------------|---------:|----------:|-------:|-------:|");
    let before = row("built", &pool.stats());

    // The burst: every thread takes its share and writes every byte, so
    // that the buffers' pages are resident.
    let (peak_rss, peak_stats, intact) = thread::scope(|s| {
        let shares: Vec<_> = (0..args.threads)
            .map(|t| {
                let share = args.peak / args.threads + usize::from(t < args.peak % args.threads);
                let pool = &pool;
                s.spawn(move || {
                    let mut held: Vec<PoolGuard<'_, Vec<u8>>> = Vec::with_capacity(share);
                    for i in 0..share {
                        let mut buffer = pool.try_acquire().expect("the pool grows to its bound");
                        buffer.resize(size, (i % 251) as u8 + 1);
                        held.push(buffer);
                    }
                    held
                })
            })
            .collect();
        let held: Vec<Vec<PoolGuard<'_, Vec<u8>>>> =
            shares.into_iter().map(|h| h.join().unwrap()).collect();
        let stats = pool.stats();
        let rss = row("burst: all held", &stats);
        let intact = held
            .iter()
            .flatten()
            .all(|b| b.len() == size && b[0] != 0 && b[size - 1] == b[0]);
        drop(held);
        (rss, stats, intact)
    });
    let idle = pool.stats();
    let idle_rss = row("burst over: idle", &idle);
    let trimmed = pool.trim(args.keep);
    let after = pool.stats();
    let after_rss = row(&format!("trim({})", args.keep), &after);
    println!("trim dropped {trimmed} buffers");

    let mut ok = true;
    ok &= check(
        peak_stats.in_use == args.peak
            && peak_stats.allocated >= args.peak
            && peak_stats.allocated <= args.capacity,
        format_args!(
            "the burst held {} buffers in {} allocated slots (capacity {})",
            peak_stats.in_use, peak_stats.allocated, args.capacity
        ),
    );
    ok &= check(intact, "every held buffer was written end to end");
    ok &= check(
        after.in_use == 0 && after.available == args.capacity,
        format_args!(
            "after the burst: in_use {} == 0, available {} == capacity {}",
            after.in_use, after.available, args.capacity
        ),
    );
    ok &= check(
        trimmed == idle.filled - args.keep && after.filled == args.keep,
        format_args!(
            "trim dropped {trimmed} == {} idle - {} kept; filled {} == keep",
            idle.filled, args.keep, after.filled
        ),
    );
    // What the trimmed buffers held, in MiB. The check compares it with
    // what the trim gave back, not with the peak alone: the process's own
    // memory (a few MiB) and the buffers kept would otherwise decide it
    // for a small burst.
    let trimmed_mib = (trimmed * size) as f64 / (1024.0 * 1024.0);
    match (before, peak_rss, idle_rss, after_rss) {
        (Some(before), Some(peak), Some(idle), Some(after)) if size >= 128 * 1024 => {
            ok &= check(
                idle - after >= trimmed_mib / 2.0,
                format_args!(
                    "the trim gave back {:.1} MiB, at least half of the {trimmed_mib:.1} MiB the trimmed buffers held \
                     (RSS built {before:.1}, peak {peak:.1}, after the trim {after:.1} MiB: {:.0}% of the peak)",
                    idle - after,
                    100.0 * after / peak
                ),
            );
        }
        (Some(_), Some(_), Some(idle), Some(after)) => println!(
            "RSS: the trim gave back {:.1} MiB of {trimmed_mib:.1}; not checked for buffers below 128 KiB (heap memory)",
            idle - after
        ),
        _ => println!("RSS: not available on this platform"),
    }
    // A second burst refills trimmed slots with the factory: the pool still
    // has every slot.
    let again: Vec<_> = (0..args.peak).map(|_| pool.try_acquire()).collect();
    ok &= check(
        again.iter().all(Result::is_ok),
        "a second burst gets every buffer again",
    );
    drop(again);
    let end = pool.stats();
    ok &= check(
        end.in_use == 0 && end.available == args.capacity && end.allocated <= args.capacity,
        format_args!(
            "at the end: in_use {} == 0, available {} == capacity, allocated {} <= capacity",
            end.in_use, end.available, end.allocated
        ),
    );
    if ok {
        println!("result: OK");
        ExitCode::SUCCESS
    } else {
        println!("result: FAILED");
        ExitCode::FAILURE
    }
}
