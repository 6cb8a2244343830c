//! Single-thread acquire + touch + release on tagpool and a Mutex<Vec> pool.

use std::hint::black_box;
use std::sync::Mutex;

use criterion::{criterion_group, criterion_main, Criterion};

fn st(c: &mut Criterion) {
    let mut group = c.benchmark_group("st");
    let pool = tagpool::Pool::new(1024, || [0u64; 8]);
    group.bench_function("tagpool", |b| {
        b.iter(|| {
            let mut g = pool.try_acquire().unwrap();
            g[0] = black_box(1);
        })
    });
    let mutex = Mutex::new((0..1024).map(|_| [0u64; 8]).collect::<Vec<_>>());
    group.bench_function("mutex_vec", |b| {
        b.iter(|| {
            let mut v = mutex.lock().unwrap().pop().unwrap();
            v[0] = black_box(1);
            mutex.lock().unwrap().push(v);
        })
    });
    group.finish();
}

criterion_group!(benches, st);
criterion_main!(benches);
