//! A pool's [`Stats`] exported as Prometheus metrics: a `Collector` that
//! reads the snapshot at every scrape, so the pool's hot paths do nothing
//! for it (the counters are the pool's own).
//!
//! ```text
//! cargo run --release -p tagpool-benches --example prometheus
//! ```
//!
//! It builds a buffer pool with hold tracking on, makes some requests wait
//! (a burst larger than the pool) and leaks one guard, then prints the text
//! exposition and checks what it says: the wait histogram's buckets are
//! cumulative with `le` bounds in seconds, the sum is the total time
//! waited, and the leaked guard shows as a hold over the limit.
//!
//! The same snapshot feeds the `metrics` crate just as well: a gauge per
//! level (`in_use`, `available`, `oldest_hold`), `counter!(..).absolute(n)`
//! per count, and the histogram's buckets as one counter per `le` label.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Bucket, Counter, Gauge, Histogram, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, Registry, TextEncoder};
use tagpool::{Pool, Stats, WaitHistogram};

/// Exposes one pool's statistics under `prefix`, read at each scrape.
struct PoolCollector<T: Send + 'static> {
    pool: Arc<Pool<T>>,
    prefix: String,
    descs: Vec<Desc>,
}

/// The families the collector exposes: suffix, help, type.
const FAMILIES: &[(&str, &str, MetricType)] = &[
    ("capacity", "Slots in the pool.", MetricType::GAUGE),
    ("in_use", "Slots held by guards now.", MetricType::GAUGE),
    (
        "available",
        "Slots free now, cached ones included.",
        MetricType::GAUGE,
    ),
    (
        "waits_total",
        "Acquires that found the pool empty and waited.",
        MetricType::COUNTER,
    ),
    (
        "timeouts_total",
        "Waits that ended at their timeout.",
        MetricType::COUNTER,
    ),
    (
        "wait_seconds",
        "Time waiting acquires waited.",
        MetricType::HISTOGRAM,
    ),
    (
        "oldest_hold_seconds",
        "Age of the oldest guard held (hold tracking).",
        MetricType::GAUGE,
    ),
    (
        "holds_over_limit",
        "Guards held longer than the pool's hold limit.",
        MetricType::GAUGE,
    ),
];

impl<T: Send + 'static> PoolCollector<T> {
    fn new(pool: Arc<Pool<T>>, prefix: &str) -> Self {
        let descs = FAMILIES
            .iter()
            .map(|(suffix, help, _)| {
                Desc::new(
                    format!("{prefix}_{suffix}"),
                    (*help).to_owned(),
                    vec![],
                    HashMap::new(),
                )
                .expect("a valid name")
            })
            .collect();
        Self {
            pool,
            prefix: prefix.to_owned(),
            descs,
        }
    }
}

fn gauge(value: f64) -> Metric {
    let mut g = Gauge::default();
    g.set_value(value);
    let mut m = Metric::default();
    m.set_gauge(g);
    m
}

fn counter(value: u64) -> Metric {
    let mut c = Counter::default();
    c.set_value(value as f64);
    let mut m = Metric::default();
    m.set_counter(c);
    m
}

/// The wait histogram as a Prometheus histogram: cumulative counts under
/// each bucket's upper bound, in seconds (the last bucket is `+Inf`, which
/// the sample count stands for).
fn histogram(stats: &Stats) -> Metric {
    let mut buckets = Vec::new();
    let mut cumulative = 0;
    for (bound, count) in stats.wait_histogram.buckets() {
        cumulative += count;
        if let Some(bound) = bound {
            let mut b = Bucket::default();
            b.set_upper_bound(bound.as_secs_f64());
            b.set_cumulative_count(cumulative);
            buckets.push(b);
        }
    }
    let mut h = Histogram::default();
    h.set_sample_count(stats.wait_histogram.count());
    h.set_sample_sum(stats.wait_time.as_secs_f64());
    h.set_bucket(buckets);
    let mut m = Metric::default();
    m.set_histogram(h);
    m
}

impl<T: Send + 'static> Collector for PoolCollector<T> {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let stats = self.pool.stats();
        FAMILIES
            .iter()
            .map(|&(suffix, help, kind)| {
                let metric = match suffix {
                    "capacity" => gauge(stats.capacity as f64),
                    "in_use" => gauge(stats.in_use as f64),
                    "available" => gauge(stats.available as f64),
                    "waits_total" => counter(stats.waits + stats.async_waits),
                    "timeouts_total" => counter(stats.timeouts),
                    "wait_seconds" => histogram(&stats),
                    "oldest_hold_seconds" => {
                        gauge(stats.oldest_hold.map_or(0.0, |d| d.as_secs_f64()))
                    }
                    "holds_over_limit" => gauge(stats.holds_over_limit as f64),
                    other => unreachable!("{other}"),
                };
                let mut family = MetricFamily::default();
                family.set_name(format!("{}_{suffix}", self.prefix));
                family.set_help(help.to_owned());
                family.set_field_type(kind);
                family.set_metric(vec![metric]);
                family
            })
            .collect()
    }
}

fn main() {
    let pool = Arc::new(
        Pool::builder(|| Vec::<u8>::with_capacity(4096))
            .capacity(4)
            .reset(Vec::clear)
            .hold_limit(Duration::from_millis(50))
            .build()
            .expect("a valid pool"),
    );
    let registry = Registry::new();
    registry
        .register(Box::new(PoolCollector::new(Arc::clone(&pool), "buffers")))
        .expect("registered once");

    // A burst: every buffer busy for 20 ms while 4 more requests arrive,
    // and wait.
    let busy: Vec<_> = (0..4)
        .map(|_| pool.acquire().expect("not closed"))
        .collect();
    let requests: Vec<_> = (0..4)
        .map(|_| {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let mut buf = pool.acquire().expect("not closed");
                buf.extend_from_slice(b"request");
            })
        })
        .collect();
    while pool.stats().waiting_threads < 4 {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(20));
    drop(busy);
    for request in requests {
        request.join().expect("a request panicked");
    }
    // A leak: a guard forgotten, which hold tracking shows.
    std::mem::forget(pool.acquire().expect("not closed"));
    thread::sleep(Duration::from_millis(60));

    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .expect("text encoding");
    let text = String::from_utf8(text).expect("UTF-8");
    print!("{text}");

    // What a dashboard would read.
    let stats = pool.stats();
    let waited = stats.waits;
    assert_eq!(waited, 4, "the burst made 4 requests wait");
    assert!(stats.wait_time >= Duration::from_millis(4 * 20));
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in the exposition"))
            .to_owned()
    };
    assert_eq!(line("buffers_capacity"), "buffers_capacity 4");
    assert_eq!(
        line("buffers_in_use"),
        "buffers_in_use 1",
        "the leaked guard"
    );
    assert_eq!(
        line("buffers_wait_seconds_count"),
        format!("buffers_wait_seconds_count {waited}")
    );
    assert_eq!(
        line("buffers_wait_seconds_bucket{le=\"+Inf\"}"),
        format!("buffers_wait_seconds_bucket{{le=\"+Inf\"}} {waited}")
    );
    // Every bucket bound is a power of two microseconds, in seconds.
    let bounds = text
        .lines()
        .filter(|l| l.starts_with("buffers_wait_seconds_bucket{le=\"") && !l.contains("+Inf"))
        .count();
    assert_eq!(bounds, WaitHistogram::BUCKETS - 1);
    assert_eq!(
        line("buffers_holds_over_limit"),
        "buffers_holds_over_limit 1"
    );
    let oldest: f64 = line("buffers_oldest_hold_seconds")
        .rsplit(' ')
        .next()
        .and_then(|v| v.parse().ok())
        .expect("a number");
    assert!(oldest >= 0.05, "the leak is older than the limit: {oldest}");
    println!("# prometheus example: ok ({waited} waits exported, 1 leaked guard seen)");
}
