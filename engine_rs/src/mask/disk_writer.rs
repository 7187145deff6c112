//! Background disk writes: one native thread per process writes cache entries (compiled
//! grammars, and the files the Python side's caches hand it) in submission order, after the
//! call that produced them has returned, without the Python interpreter's lock.
//!
//! Invariants:
//! - `submitted - done` jobs are pending, at most [`MAX_PENDING`]: a submitter waits for room, so
//!   the grammars queued jobs hold bound the memory.
//! - A job's outcome goes to the [`Tally`] it was submitted with; a panic inside a job is a failed
//!   write, never the end of the thread.
//! - [`pause`] returns once no job is running, and none starts until [`resume`]: a fork in
//!   between copies no lock that a job holds (the grammar cache's counters).
//! - A process forked from another (a new pid) starts its own queue and thread at its first
//!   submission, without the parent's jobs (those are the parent's to write); it never touches the
//!   parent's queue, whose lock the fork may have copied held.
//! - A submission that cannot start the thread (a process shutting down) runs its job in the
//!   caller, so nothing is lost.
//! - The thread runs at the lowest priority (Linux: nice 19): woken by a submission it would
//!   otherwise often preempt the submitter on its own core, and a server's request would wait
//!   for the write it just queued (about 0.3 ms per new schema measured on a busy 2-core machine).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{grammar_cache, CompiledGrammar};

/// Most jobs waiting or running before a submitter waits for room.
pub const MAX_PENDING: u64 = 256;

/// What to write.
pub enum Job {
    /// `data` to `path`, atomically (see [`grammar_cache::write_atomic`]).
    File {
        /// Where.
        path: PathBuf,
        /// The file's bytes.
        data: Vec<u8>,
    },
    /// A compiled grammar into the disk layer under `dir` (see [`grammar_cache::store`], which
    /// counts it in the grammar cache's statistics).
    Grammar {
        /// The disk layer's directory.
        dir: PathBuf,
        /// The grammar text it was compiled from.
        text: String,
        /// The compiled grammar.
        grammar: Arc<CompiledGrammar>,
    },
    /// Holds the writer until the barrier opens (tests of ordering and bounds).
    #[cfg(test)]
    Wait(Arc<std::sync::Barrier>),
}

/// The outcomes of the jobs submitted with it: entries written, writes that failed, and the first
/// failure's message until someone takes it.
#[derive(Default)]
pub struct Tally {
    written: AtomicU64,
    failed: AtomicU64,
    error: Mutex<Option<String>>,
}

impl Tally {
    /// Entries written.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Writes that failed.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// The first failure's message not taken yet.
    pub fn take_error(&self) -> Option<String> {
        lock(&self.error).take()
    }

    fn record(&self, outcome: Result<bool, String>) {
        match outcome {
            Ok(true) => {
                self.written.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(message) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                lock(&self.error).get_or_insert(message);
            }
        }
    }
}

struct Entry {
    job: Job,
    /// Skip the job when this directory no longer exists (a write must not bring back a cache
    /// directory that its owner removed meanwhile).
    unless_removed: Option<PathBuf>,
    tally: Option<Arc<Tally>>,
}

impl Entry {
    fn run(self) {
        let Entry {
            job,
            unless_removed,
            tally,
        } = self;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if unless_removed.is_some_and(|dir| !dir.is_dir()) {
                return Ok(false);
            }
            match job {
                Job::File { path, data } => grammar_cache::write_atomic(&path, &data)
                    .map(|()| true)
                    .map_err(|e| format!("cannot write {}: {e}", path.display())),
                Job::Grammar { dir, text, grammar } => {
                    if grammar_cache::store(&dir, &text, &grammar) {
                        Ok(true)
                    } else {
                        Err(format!(
                            "cannot write a compiled grammar under {}",
                            dir.display()
                        ))
                    }
                }
                #[cfg(test)]
                Job::Wait(barrier) => {
                    barrier.wait();
                    Ok(false)
                }
            }
        }))
        .unwrap_or_else(|_| Err("a disk write panicked".to_owned()));
        if let Some(tally) = tally {
            tally.record(outcome);
        }
    }
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Entry>,
    submitted: u64,
    done: u64,
    running: bool,
    /// Pauses not yet resumed (a fork while a caller holds the writer nests).
    paused: u32,
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    changed: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lowers the calling thread's scheduling priority to the lowest (Linux, where `who = 0` names
/// the calling thread; elsewhere it would name the whole process, so nothing is done).
fn lower_own_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: setpriority only reads its integer arguments; a failure (a sandbox that forbids
    // it) leaves the priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 19);
    }
}

impl Queue {
    fn work(self: Arc<Self>) {
        lower_own_priority();
        loop {
            let entry = {
                let mut s = lock(&self.state);
                while s.paused > 0 || s.jobs.is_empty() {
                    s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                s.running = true;
                s.jobs.pop_front()
            };
            if let Some(entry) = entry {
                entry.run();
            }
            let mut s = lock(&self.state);
            s.running = false;
            s.done += 1;
            drop(s);
            self.changed.notify_all();
        }
    }

    fn wait_until(
        &self,
        timeout: Option<Duration>,
        mut ready: impl FnMut(&State) -> bool,
    ) -> (MutexGuard<'_, State>, bool) {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = lock(&self.state);
        loop {
            if ready(&s) {
                return (s, true);
            }
            s = match deadline {
                None => self.changed.wait(s).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return (s, false);
                    }
                    self.changed
                        .wait_timeout(s, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }
}

static QUEUE: Mutex<Option<(u32, Arc<Queue>)>> = Mutex::new(None);

/// This process's writer: a handle on its queue, whose thread is started at the first call in a
/// process (`None` when it cannot be started). Callers from Python take it with the interpreter
/// lock held (only then is `QUEUE` locked, so a fork, which holds that lock, never copies it held)
/// and may then release that lock to submit or wait.
pub fn writer() -> Option<Writer> {
    let pid = std::process::id();
    let mut slot = lock(&QUEUE);
    if let Some((owner, q)) = slot.as_ref() {
        if *owner == pid {
            return Some(Writer(q.clone()));
        }
    }
    let q = Arc::new(Queue::default());
    let worker = q.clone();
    std::thread::Builder::new()
        .name("structout-disk-writer".to_owned())
        .spawn(move || worker.work())
        .ok()?;
    *slot = Some((pid, q.clone()));
    Some(Writer(q))
}

/// This process's writer if it has started one (flushing or pausing a writer that never ran
/// starts nothing).
pub fn current() -> Option<Writer> {
    let slot = lock(&QUEUE);
    match slot.as_ref() {
        Some((owner, q)) if *owner == std::process::id() => Some(Writer(q.clone())),
        _ => None,
    }
}

/// Runs `job` in the caller, as the writer would.
pub fn run_now(job: Job, unless_removed: Option<PathBuf>, tally: Option<Arc<Tally>>) {
    Entry {
        job,
        unless_removed,
        tally,
    }
    .run();
}

/// A handle on a process's writer queue.
pub struct Writer(Arc<Queue>);

impl Writer {
    /// Queues `job` (run after the jobs submitted before it); waits while [`MAX_PENDING`] are
    /// pending. `unless_removed`: skip it if that directory is gone by then. Its outcome goes to
    /// `tally`.
    pub fn submit(&self, job: Job, unless_removed: Option<PathBuf>, tally: Option<Arc<Tally>>) {
        let q = &self.0;
        let (mut s, _) = q.wait_until(None, |s| s.submitted - s.done < MAX_PENDING);
        s.jobs.push_back(Entry {
            job,
            unless_removed,
            tally,
        });
        s.submitted += 1;
        drop(s);
        q.changed.notify_all();
    }

    /// Waits until the jobs submitted so far (not those submitted meanwhile) are done; false when
    /// `timeout` passed first (or the writer is paused with jobs left).
    pub fn flush(&self, timeout: Option<Duration>) -> bool {
        let target = lock(&self.0.state).submitted;
        self.0.wait_until(timeout, |s| s.done >= target).1
    }

    /// Holds the writer between jobs: returns once no job is running (true) or after `timeout`
    /// (false; the running job goes on, none starts after it), until as many
    /// [`Writer::resume`]s as pauses.
    pub fn pause(&self, timeout: Option<Duration>) -> bool {
        lock(&self.0.state).paused += 1;
        self.0.wait_until(timeout, |s| !s.running).1
    }

    /// Ends one [`Writer::pause`] (the writer goes on after the last).
    pub fn resume(&self) {
        let mut s = lock(&self.0.state);
        s.paused = s.paused.saturating_sub(1);
        drop(s);
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests share the process's writer: one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn writes_in_order_and_counts() {
        let _serial = lock(&SERIAL);
        let dir = std::env::temp_dir().join(format!("structout-writer-{}", std::process::id()));
        let tally = Arc::new(Tally::default());
        let w = writer().unwrap();
        assert!(w.pause(Some(Duration::from_secs(30))));
        for i in 0..3u8 {
            let path = dir.join("a").join("entry");
            w.submit(
                Job::File {
                    path,
                    data: vec![i],
                },
                None,
                Some(tally.clone()),
            );
        }
        assert!(
            !w.flush(Some(Duration::from_millis(20))),
            "paused: nothing written"
        );
        assert_eq!(tally.written(), 0);
        w.resume();
        assert!(w.flush(Some(Duration::from_secs(30))));
        assert_eq!(tally.written(), 3);
        assert_eq!(std::fs::read(dir.join("a").join("entry")).unwrap(), vec![2]);
        // A job under a removed directory is skipped; one that fails is counted with its message.
        let gone = dir.join("gone");
        w.submit(
            Job::File {
                path: gone.join("x"),
                data: vec![1],
            },
            Some(gone.clone()),
            Some(tally.clone()),
        );
        let blocker = dir.join("file");
        std::fs::write(&blocker, b"not a directory").unwrap();
        w.submit(
            Job::File {
                path: blocker.join("x"),
                data: vec![1],
            },
            None,
            Some(tally.clone()),
        );
        assert!(w.flush(None));
        assert!(!gone.exists());
        assert_eq!((tally.written(), tally.failed()), (3, 1));
        assert!(tally.take_error().unwrap().contains("cannot write"));
        assert!(tally.take_error().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn flush_waits_for_earlier_jobs_only_and_the_queue_is_bounded() {
        use std::sync::Barrier;
        let _serial = lock(&SERIAL);
        let w = writer().unwrap();
        let first = Arc::new(Barrier::new(2));
        let second = Arc::new(Barrier::new(2));
        w.submit(Job::Wait(first.clone()), None, None);
        let flusher = std::thread::spawn(|| current().unwrap().flush(None));
        std::thread::sleep(Duration::from_millis(50));
        w.submit(Job::Wait(second.clone()), None, None); // after the flush began
        first.wait();
        assert!(
            flusher.join().unwrap(),
            "the flush did not wait for the later job"
        );
        // The writer now waits in `second`: fill the queue to the bound, then one more waits.
        for _ in 1..MAX_PENDING {
            w.submit(Job::Wait(Arc::new(Barrier::new(1))), None, None);
        }
        let extra = std::thread::spawn(|| {
            current()
                .unwrap()
                .submit(Job::Wait(Arc::new(Barrier::new(1))), None, None)
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !extra.is_finished(),
            "a submission beyond the bound did not wait"
        );
        second.wait();
        extra.join().unwrap();
        assert!(w.flush(Some(Duration::from_secs(30))));
    }
}
