//! A TCP echo server on tokio whose frame buffers come from a `tagpool`
//! pool smaller than its number of connections, with a load generator in
//! the same program.
//!
//! What it shows:
//!
//! - **Async acquire under backpressure.** Each connection task reads a
//!   frame's header, then waits for a pooled buffer with
//!   `acquire_owned_async` (a `Send + 'static` future) and holds it while it
//!   reads the payload and writes the reply. With `--capacity` below
//!   `--connections`, tasks really wait: the pool bounds the memory in
//!   flight, and a waiting task blocks no thread. Between reading a frame
//!   and echoing it, a task yields to the runtime `--yields` times (as a
//!   real handler awaits a database or another service), so more tasks
//!   want a buffer at once than there are worker threads.
//! - **Replies as `bytes::Bytes`, without a copy.** The handler reads the
//!   frame into its pooled buffer behind the echoed header, turns the
//!   owned guard into a `Bytes` (`Bytes::from_owner`) and hands it to the
//!   connection's writer task, as servers pass `Bytes` to codecs and
//!   writers. The buffer goes back to the pool (reset, on the writer's
//!   thread) when the last `Bytes` sharing it is dropped, after the write;
//!   the handler meanwhile reads the next header holding no buffer.
//! - **Bad input.** A length prefix above `--max-frame` gets an error reply
//!   and the connection is closed; a client that disconnects mid-frame ends
//!   its task, whose guard returns the buffer. Other clients go on.
//! - **Graceful shutdown.** When the load is done, the server stops
//!   accepting, closes the pool (a task still waiting for a buffer would
//!   get `AcquireError::Closed` and answer with an error), waits for its
//!   tasks, and checks that every buffer came back, and was reset once
//!   for each time it was acquired.
//!
//! Protocol (all integers big-endian):
//!
//! - request: `len: u32`, then `len` bytes;
//! - reply: the same frame, echoed;
//! - error reply: `u32::MAX`, then `n: u32` and `n` bytes of UTF-8 text;
//!   the server then closes the connection.
//!
//! The load generator opens `--connections` clients that each send
//! `--frames` frames of random sizes (1 to `--max-frame` bytes of random
//! content), one at a time, and check every reply byte for byte; and
//! `--bad-clients` more, alternately sending an oversized length prefix
//! (they must get the error reply, then end of stream) or disconnecting in
//! the middle of a frame. It binds 127.0.0.1 only.
//!
//! It prints requests per second, latency percentiles (a request's send to
//! its whole reply) and the pool's statistics, and exits with status 1
//! unless every reply was right, every bad client was handled, every echo
//! went out as a `Bytes` of a pooled buffer, and the pool ends with every
//! buffer back (`in_use == 0`, `available == capacity`) and reset as often
//! as buffers were acquired.
//!
//! ```sh
//! cargo run --release --example echo_server                 # 64 connections, 8 buffers
//! cargo run --release --example echo_server -- --capacity 64 # plentiful
//! cargo run --release --example echo_server -- --capacity 1 --fair
//! ```

use std::io;
use std::net::SocketAddr;
use std::process;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tagpool::{AcquireError, Pool, Stats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The length field of an error reply.
const ERROR: u32 = u32::MAX;

/// How long the whole load may take before the run fails.
const LOAD_LIMIT: Duration = Duration::from_secs(60);

/// Replies a connection's handler may queue for its writer task. A client
/// sends its next frame only after the whole reply, so one is in flight.
const QUEUED_REPLIES: usize = 2;

const USAGE: &str = "\
usage: echo_server [--connections N] [--frames M] [--capacity C]
                   [--max-frame BYTES] [--bad-clients B] [--yields Y]
                   [--workers W] [--fair]

  --connections N   good clients, each on its own connection (default 64)
  --frames M        frames each good client sends (default 200)
  --capacity C      pooled buffers (default 8)
  --max-frame BYTES largest frame (default 16384); a buffer holds 4 + BYTES
  --bad-clients B   clients sending bad input (default 4)
  --yields Y        times a handler yields while it holds a buffer (default 1)
  --workers W       tokio worker threads (default 2)
  --fair            serve waiting tasks strictly in arrival order";

/// The command line.
#[derive(Clone, Copy, Debug)]
struct Args {
    connections: usize,
    frames: usize,
    capacity: usize,
    max_frame: usize,
    bad_clients: usize,
    yields: usize,
    workers: usize,
    fair: bool,
}

impl Args {
    /// Parses the arguments; prints the usage and exits on a bad one.
    fn parse() -> Self {
        let mut args = Args {
            connections: 64,
            frames: 200,
            capacity: 8,
            max_frame: 16 * 1024,
            bad_clients: 4,
            yields: 1,
            workers: 2,
            fair: false,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let slot = match flag.as_str() {
                "--connections" => &mut args.connections,
                "--frames" => &mut args.frames,
                "--capacity" => &mut args.capacity,
                "--max-frame" => &mut args.max_frame,
                "--bad-clients" => &mut args.bad_clients,
                "--yields" => &mut args.yields,
                "--workers" => &mut args.workers,
                "--fair" => {
                    args.fair = true;
                    continue;
                }
                "--help" | "-h" => {
                    println!("{USAGE}");
                    process::exit(0);
                }
                _ => usage(&format!("unknown argument {flag}")),
            };
            *slot = match it.next().map(|v| v.parse()) {
                Some(Ok(v)) => v,
                _ => usage(&format!("{flag} needs a number")),
            };
        }
        if args.max_frame == 0 || args.max_frame >= ERROR as usize {
            usage("--max-frame must be between 1 and 2^32 - 2");
        }
        if args.workers == 0 {
            usage("--workers must be at least 1");
        }
        args
    }
}

fn usage(problem: &str) -> ! {
    eprintln!("echo_server: {problem}\n{USAGE}");
    process::exit(2)
}

/// A small, fast, deterministic random number generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `1..=max`.
    fn size(&mut self, max: usize) -> usize {
        1 + (self.next() % max as u64) as usize
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// What the server did, counted by its connection tasks and the pool's
/// reset closure.
#[derive(Default)]
struct ServerCounts {
    connections: AtomicU64,
    /// Echoes written: each a `Bytes` of a pooled buffer.
    frames: AtomicU64,
    oversized: AtomicU64,
    cut_off: AtomicU64,
    refused_closed: AtomicU64,
    /// Buffers taken from the pool.
    acquired: AtomicU64,
    /// Echoes handed to a writer as a `Bytes` of a pooled buffer.
    bytes_replies: AtomicU64,
    /// Runs of the reset closure: one per buffer back in the pool.
    resets: AtomicU64,
}

/// What a connection's handler gives its writer task.
enum Reply {
    /// An echoed frame, header and payload in one pooled buffer: the
    /// `Bytes` owns the buffer's guard.
    Echo(Bytes),
    /// An error frame (not pooled); the connection ends after it.
    Error(Bytes),
}

/// The connection tasks the server spawned, awaited at shutdown.
type Tasks = Arc<Mutex<Vec<JoinHandle<()>>>>;

/// The server's accept loop, one task per connection, until the caller
/// aborts it.
async fn serve(
    listener: TcpListener,
    pool: Arc<Pool<Vec<u8>>>,
    args: Args,
    counts: Arc<ServerCounts>,
    tasks: Tasks,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(err) => {
                eprintln!("echo_server: accept failed: {err}");
                continue;
            }
        };
        counts.connections.fetch_add(1, Ordering::Relaxed);
        let (pool, counts) = (Arc::clone(&pool), Arc::clone(&counts));
        let task = tokio::spawn(async move {
            if let Err(err) = connection(stream, pool, args, Arc::clone(&counts)).await {
                // A client that disconnects mid-frame ends here.
                if err.kind() == io::ErrorKind::UnexpectedEof {
                    counts.cut_off.fetch_add(1, Ordering::Relaxed);
                } else {
                    eprintln!("echo_server: connection failed: {err}");
                }
            }
        });
        tasks.lock().expect("no panic holds the lock").push(task);
    }
}

/// Serves one connection until the client closes it (`Ok`) or breaks the
/// protocol: this task reads frames, and a writer task of its own sends the
/// replies it queues.
async fn connection(
    stream: TcpStream,
    pool: Arc<Pool<Vec<u8>>>,
    args: Args,
    counts: Arc<ServerCounts>,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (mut reader, writer) = stream.into_split();
    let (replies, queue) = mpsc::channel(QUEUED_REPLIES);
    let writer = tokio::spawn(write_replies(writer, queue, Arc::clone(&counts)));
    let read = read_frames(&mut reader, &pool, args, &counts, &replies).await;
    // The writer sends what is queued, then ends: dropping its half of the
    // stream ends the replies (FIN) after the last one.
    drop(replies);
    let written = match writer.await {
        Ok(written) => written,
        Err(err) => Err(io::Error::new(io::ErrorKind::Other, err)),
    };
    read.and(written)
}

/// Reads frames and queues their echoes until the client ends (`Ok`),
/// breaks the protocol, or the writer is gone.
async fn read_frames(
    reader: &mut OwnedReadHalf,
    pool: &Arc<Pool<Vec<u8>>>,
    args: Args,
    counts: &ServerCounts,
    replies: &mpsc::Sender<Reply>,
) -> io::Result<()> {
    let max_frame = args.max_frame;
    loop {
        let mut header = [0u8; 4];
        match reader.read_exact(&mut header).await {
            Ok(_) => {}
            // A clean end between frames.
            Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(err) => return Err(err),
        }
        let len = u32::from_be_bytes(header) as usize;
        if len > max_frame {
            counts.oversized.fetch_add(1, Ordering::Relaxed);
            let message = format!("frame of {len} bytes is above the limit of {max_frame}");
            let _ = replies.send(Reply::Error(error_frame(&message))).await;
            return Ok(());
        }
        // Backpressure: wait for a buffer only now, holding none meanwhile.
        let mut buf = match pool.acquire_owned_async().await {
            Ok(buf) => buf,
            Err(AcquireError::Closed) => {
                counts.refused_closed.fetch_add(1, Ordering::Relaxed);
                let _ = replies
                    .send(Reply::Error(error_frame("server shutting down")))
                    .await;
                return Ok(());
            }
            Err(err) => return Err(io::Error::new(io::ErrorKind::Other, err)),
        };
        counts.acquired.fetch_add(1, Ordering::Relaxed);
        // The reset closure cleared it; its capacity is `4 + max_frame`: the
        // reply is the header, then the payload read in place.
        buf.extend_from_slice(&header);
        buf.resize(4 + len, 0);
        // If the client goes away here, `buf` is dropped with the error:
        // the buffer returns to the pool.
        reader.read_exact(&mut buf[4..]).await?;
        // The handler's own awaits, buffer in hand.
        for _ in 0..args.yields {
            tokio::task::yield_now().await;
        }
        // No copy: the `Bytes` owns the guard, and its last drop (in the
        // writer, once the reply is written) gives the buffer back.
        let reply = Bytes::from_owner(buf);
        counts.bytes_replies.fetch_add(1, Ordering::Relaxed);
        if replies.send(Reply::Echo(reply)).await.is_err() {
            // The writer failed (its error is the connection's); the reply
            // was dropped with the channel's message, and its buffer is back.
            return Ok(());
        }
    }
}

/// The connection's writer: sends each queued reply, dropping its `Bytes`
/// (and so giving its buffer back) once written. Ends when the handler is
/// done, or after an error reply.
async fn write_replies(
    mut writer: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Reply>,
    counts: Arc<ServerCounts>,
) -> io::Result<()> {
    while let Some(reply) = queue.recv().await {
        match reply {
            Reply::Echo(frame) => {
                writer.write_all(&frame).await?;
                counts.frames.fetch_add(1, Ordering::Relaxed);
                // The last `Bytes` of this buffer: it goes back to the pool
                // here, reset on this thread.
                drop(frame);
            }
            Reply::Error(frame) => {
                writer.write_all(&frame).await?;
                return writer.shutdown().await;
            }
        }
    }
    Ok(())
}

/// An error reply; the connection is closed after it.
fn error_frame(message: &str) -> Bytes {
    let mut frame = Vec::with_capacity(8 + message.len());
    frame.extend_from_slice(&ERROR.to_be_bytes());
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message.as_bytes());
    Bytes::from(frame)
}

/// What a good client saw.
#[derive(Default)]
struct ClientReport {
    latencies: Vec<Duration>,
    wrong: usize,
}

/// A good client: `frames` random frames, each reply checked byte for byte.
async fn good_client(
    addr: SocketAddr,
    id: u64,
    frames: usize,
    max_frame: usize,
) -> io::Result<ClientReport> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut rng = Rng::new(id + 1);
    let mut report = ClientReport {
        latencies: Vec::with_capacity(frames),
        wrong: 0,
    };
    let mut request = Vec::with_capacity(4 + max_frame);
    let mut reply = vec![0u8; max_frame];
    for _ in 0..frames {
        let len = rng.size(max_frame);
        request.clear();
        request.extend_from_slice(&(len as u32).to_be_bytes());
        request.resize(4 + len, 0);
        rng.fill(&mut request[4..]);
        let start = Instant::now();
        stream.write_all(&request).await?;
        let mut header = [0u8; 4];
        stream.read_exact(&mut header).await?;
        let got = u32::from_be_bytes(header);
        if got as usize != len {
            report.wrong += 1;
            eprintln!("client {id}: a reply of {got} bytes to a frame of {len}");
            return Ok(report);
        }
        stream.read_exact(&mut reply[..len]).await?;
        report.latencies.push(start.elapsed());
        if reply[..len] != request[4..] {
            report.wrong += 1;
            eprintln!("client {id}: a reply whose bytes differ from its frame's");
        }
    }
    stream.shutdown().await?;
    Ok(report)
}

/// A bad client; returns whether the server treated it as it should.
async fn bad_client(addr: SocketAddr, id: usize, max_frame: usize) -> io::Result<bool> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    if id % 2 == 0 {
        // An oversized length prefix: an error reply, then end of stream.
        stream
            .write_all(&((max_frame + 1) as u32).to_be_bytes())
            .await?;
        let mut header = [0u8; 8];
        stream.read_exact(&mut header).await?;
        let (kind, n) = header.split_at(4);
        let n = u32::from_be_bytes(n.try_into().expect("4 bytes")) as usize;
        let mut message = vec![0u8; n];
        stream.read_exact(&mut message).await?;
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await?;
        let message = String::from_utf8_lossy(&message);
        Ok(kind == ERROR.to_be_bytes() && message.contains("above the limit") && rest.is_empty())
    } else {
        // Announce a frame, send part of it, hang up.
        let len = max_frame.min(1000);
        stream.write_all(&(len as u32).to_be_bytes()).await?;
        stream.write_all(&vec![7u8; len / 2]).await?;
        stream.shutdown().await?;
        // The server gives up on the frame: end of stream, no reply.
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await?;
        Ok(rest.is_empty())
    }
}

/// The `q`-quantile of sorted `samples`.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The whole run: returns the failures found.
async fn run(args: Args) -> io::Result<Vec<String>> {
    let max_frame = args.max_frame;
    let counts = Arc::new(ServerCounts::default());
    let resets = Arc::clone(&counts);
    // A buffer holds a whole reply: the 4-byte header and the frame.
    let mut builder = Pool::builder(move || Vec::with_capacity(4 + max_frame))
        .capacity(args.capacity)
        .lazy()
        .reset(move |buf: &mut Vec<u8>| {
            buf.clear();
            resets.resets.fetch_add(1, Ordering::Relaxed);
        });
    if args.fair {
        builder = builder.fair();
    }
    let pool = match builder.build() {
        Ok(pool) => Arc::new(pool),
        Err(err) => usage(&format!("bad --capacity: {err}")),
    };
    // Loopback only.
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let tasks = Tasks::default();
    let server = tokio::spawn(serve(
        listener,
        Arc::clone(&pool),
        args,
        Arc::clone(&counts),
        Arc::clone(&tasks),
    ));

    let start = Instant::now();
    let good: Vec<_> = (0..args.connections)
        .map(|id| tokio::spawn(good_client(addr, id as u64, args.frames, max_frame)))
        .collect();
    let bad: Vec<_> = (0..args.bad_clients)
        .map(|id| tokio::spawn(bad_client(addr, id, max_frame)))
        .collect();
    let mut failures = Vec::new();
    let mut latencies = Vec::with_capacity(args.connections * args.frames);
    let load = async {
        for client in good {
            match client.await.expect("a client task panicked") {
                Ok(report) => {
                    if report.wrong > 0 {
                        failures.push(format!("{} wrong replies", report.wrong));
                    }
                    latencies.extend(report.latencies);
                }
                Err(err) => failures.push(format!("a good client failed: {err}")),
            }
        }
        for (id, client) in bad.into_iter().enumerate() {
            match client.await.expect("a client task panicked") {
                Ok(true) => {}
                Ok(false) => failures.push(format!("bad client {id} was not handled as expected")),
                Err(err) => failures.push(format!("bad client {id} failed: {err}")),
            }
        }
    };
    if tokio::time::timeout(LOAD_LIMIT, load).await.is_err() {
        failures.push(format!("the load did not finish within {LOAD_LIMIT:?}"));
    }
    let elapsed = start.elapsed();

    // Graceful shutdown: stop accepting, close the pool (a task waiting for
    // a buffer returns `Closed`), then wait for the connection tasks.
    server.abort();
    let _ = server.await; // cancelled
    pool.close();
    let tasks = std::mem::take(&mut *tasks.lock().expect("no panic holds the lock"));
    for task in tasks {
        if tokio::time::timeout(LOAD_LIMIT, task).await.is_err() {
            failures.push("a connection task did not end".to_string());
        }
    }

    latencies.sort_unstable();
    let requests = latencies.len();
    let expected = args.connections * args.frames;
    if requests != expected {
        failures.push(format!("{requests} replies checked, {expected} expected"));
    }
    let stats = pool.stats();
    report(&args, &counts, &latencies, elapsed, &stats);
    if stats.in_use != 0 || stats.available != stats.capacity {
        failures.push(format!(
            "buffers not all back: in_use {}, available {} of {}",
            stats.in_use, stats.available, stats.capacity
        ));
    }
    if counts.oversized.load(Ordering::Relaxed) as usize != (args.bad_clients + 1) / 2 {
        failures.push("not every oversized frame was refused".to_string());
    }
    let [frames, bytes_replies, acquired, resets] = [
        &counts.frames,
        &counts.bytes_replies,
        &counts.acquired,
        &counts.resets,
    ]
    .map(|count| count.load(Ordering::Relaxed));
    if frames as usize != requests || bytes_replies != frames {
        failures.push(format!(
            "{frames} echoes written, {bytes_replies} sent as Bytes, {requests} checked"
        ));
    }
    if resets != acquired {
        failures.push(format!(
            "{acquired} buffers acquired but {resets} reset: a Bytes kept its buffer"
        ));
    }
    Ok(failures)
}

fn report(
    args: &Args,
    counts: &ServerCounts,
    sorted: &[Duration],
    elapsed: Duration,
    stats: &Stats,
) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "echo_server: {} connections x {} frames (1..={} bytes), {} bad clients, \
         {} buffers{}, {} yields per frame, {} workers",
        args.connections,
        args.frames,
        args.max_frame,
        args.bad_clients,
        args.capacity,
        if args.fair { " (fair)" } else { "" },
        args.yields,
        args.workers
    );
    println!(
        "requests: {} in {:.3} s = {:.0} requests/s",
        sorted.len(),
        elapsed.as_secs_f64(),
        sorted.len() as f64 / elapsed.as_secs_f64()
    );
    println!(
        "latency (send to whole reply): p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us, max {:.0} us",
        us(quantile(sorted, 0.50)),
        us(quantile(sorted, 0.99)),
        us(quantile(sorted, 0.999)),
        us(sorted.last().copied().unwrap_or_default())
    );
    println!(
        "server: {} connections, {} frames echoed, {} oversized refused, {} cut off mid-frame, {} refused at shutdown",
        counts.connections.load(Ordering::Relaxed),
        counts.frames.load(Ordering::Relaxed),
        counts.oversized.load(Ordering::Relaxed),
        counts.cut_off.load(Ordering::Relaxed),
        counts.refused_closed.load(Ordering::Relaxed),
    );
    println!(
        "bytes: {} echoes sent as Bytes of pooled buffers (no copy); buffers: {} acquired, {} reset on their way back (an echo's after its last Bytes dropped)",
        counts.bytes_replies.load(Ordering::Relaxed),
        counts.acquired.load(Ordering::Relaxed),
        counts.resets.load(Ordering::Relaxed),
    );
    println!(
        "pool: capacity {}, in_use {}, available {}, peak_in_use {}, async_waits {}, \
         cancelled_waits {}, waiting_tasks {}, closed {}",
        stats.capacity,
        stats.in_use,
        stats.available,
        stats.peak_in_use,
        stats.async_waits,
        stats.cancelled_waits,
        stats.waiting_tasks,
        stats.closed
    );
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match runtime.block_on(run(args)) {
        Ok(failures) if failures.is_empty() => println!("result: OK"),
        Ok(failures) => {
            for failure in failures {
                eprintln!("FAILED: {failure}");
            }
            process::exit(1);
        }
        Err(err) => {
            eprintln!("FAILED: {err}");
            process::exit(1);
        }
    }
}
