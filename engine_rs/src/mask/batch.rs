//! One call for a whole batch: every matcher fills its own bitmask row, on the calling thread
//! and the helpers of a persistent worker pool.
//!
//! Rows are handed out one at a time from an atomic next-row index, so a row that costs a
//! thousand times another (a fresh grammar state against a cached mask) does not leave the other
//! threads idle as fixed chunks would, and a helper that wakes late just takes fewer rows. The
//! calling thread works too, so a batch never waits for a helper to start. The helpers are
//! spawned once (grown to the largest count asked for) and sleep on a condition variable between
//! batches, after spinning briefly ([`SPIN`]) for the next one: a decoding loop's steps come back
//! to back when the forward pass is short, and a sleeping helper would join a step tens of
//! microseconds late (most of a step of a few rows). A small batch is the caller's alone for its
//! first [`LAZY_WAKE`]: a step of a few cheap rows is done before a helper could help. The hot
//! path takes no lock. A batch is withdrawn before the call returns: helpers that did not join
//! by then never see it, the others are waited for, so the borrowed rows never outlive the call.
//! A panic in any thread is re-raised in the caller (where the bindings' `guard` turns it into
//! an exception). Concurrent batches from several caller threads do not queue: a
//! batch that finds the pool busy runs on its caller alone.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

use super::Matcher;
use crate::error::EngineError;

/// Most helper threads the pool spawns, whatever the caller asks.
const MAX_HELPERS: usize = 255;

/// How long a helper that found no batch to join keeps looking (yielding its core between
/// looks) before it sleeps on the condition variable. Between the steps of a server with a
/// forward pass of milliseconds it sleeps after this; steps closer together find it awake.
const SPIN: std::time::Duration = std::time::Duration::from_micros(100);

/// Batches of at least this many rows wake the helpers at once (the early steps of a server,
/// when every request meets its grammar fresh); smaller ones only once the caller has spent
/// [`LAZY_WAKE`] on them.
const EAGER_ROWS: usize = 8;

/// How long the caller works alone on a small batch before helpers may join (and sleeping ones
/// are woken). A sleeping helper joins tens of microseconds after its wake-up (more on a virtual
/// machine's idle core), and one joining a step of a few cached or cheap rows slows it (on the
/// 2-core development machine the median cached step of about 5 rows took 21-27 us on two
/// threads against 12-13 on one).
const LAZY_WAKE: std::time::Duration = std::time::Duration::from_micros(20);

/// Fills `out` of each `(matcher, out)` pair, with up to `threads` threads (the caller's
/// included). The first error stops the rows not yet started and is returned.
pub fn fill_next_token_bitmasks(
    jobs: &mut [(&mut Matcher, &mut [u32])],
    threads: usize,
) -> Result<(), EngineError> {
    let helpers = threads.min(jobs.len()).saturating_sub(1);
    if helpers == 0 {
        return jobs
            .iter_mut()
            .try_for_each(|(m, out)| m.fill_next_token_bitmask(out));
    }
    let rows = Rows {
        base: jobs.as_mut_ptr(),
        len: jobs.len(),
        next: AtomicUsize::new(0),
    };
    let stop = AtomicBool::new(false);
    let error: OnceLock<EngineError> = OnceLock::new();
    let pool = Pool::get();
    let eager = jobs.len() >= EAGER_ROWS;
    let woken = AtomicBool::new(eager);
    let start = std::time::Instant::now();
    let work = || {
        while !stop.load(Ordering::Relaxed) {
            let Some((m, out)) = rows.claim() else { break };
            if let Err(e) = m.fill_next_token_bitmask(out) {
                stop.store(true, Ordering::Relaxed);
                let _ = error.set(e);
            }
            if !woken.load(Ordering::Relaxed)
                && rows.left()
                && start.elapsed() >= LAZY_WAKE
                && !woken.swap(true, Ordering::Relaxed)
            {
                pool.wake(helpers);
            }
        }
    };
    let delay = match eager {
        true => std::time::Duration::ZERO,
        false => LAZY_WAKE,
    };
    pool.run(&work, helpers, delay);
    error.into_inner().map_or(Ok(()), Err)
}

/// The rows of one batch, each handed out once.
struct Rows<'a, 'b> {
    base: *mut (&'a mut Matcher, &'b mut [u32]),
    len: usize,
    next: AtomicUsize,
}

// SAFETY: `claim` hands each index to exactly one thread (the atomic counter), so no two threads
// ever hold the same pair; the pairs themselves are `Send` (a matcher and a row of its own).
unsafe impl Sync for Rows<'_, '_> {}

impl<'a, 'b> Rows<'a, 'b> {
    #[allow(clippy::mut_from_ref)] // each index is handed out once (see the `Sync` impl)
    fn claim(&self) -> Option<&mut (&'a mut Matcher, &'b mut [u32])> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `i < len` is in bounds and no other thread got `i`.
        (i < self.len).then(|| unsafe { &mut *self.base.add(i) })
    }

    /// Whether rows are left to claim.
    fn left(&self) -> bool {
        self.next.load(Ordering::Relaxed) < self.len
    }
}

/// The batch the helpers may join: the work closure with its lifetime erased (it lives until
/// [`Pool::run`] has withdrawn it and every helper that joined has left).
struct Batch {
    work: *const (dyn Fn() + Sync),
    /// Helpers join no earlier than this (see [`Pool::run`]).
    join_after: std::time::Instant,
    /// Helpers that may still join.
    open: usize,
    /// Helpers that joined and have not finished.
    running: usize,
    panic: Option<Box<dyn Any + Send>>,
}

// SAFETY: the pointer is only dereferenced by helpers between joining and finishing, while
// `Pool::run` keeps the closure alive (it waits for `running == 0`); the closure is `Sync`.
unsafe impl Send for Batch {}

#[derive(Default)]
struct State {
    batch: Option<Batch>,
    /// Bumped per batch, so a helper joins each batch at most once.
    epoch: u64,
    helpers: usize,
}

struct Pool {
    /// The process that spawned the helpers (a forked child has none and makes its own pool).
    pid: u32,
    /// Held by the caller for its whole batch: one batch at a time.
    busy: Mutex<()>,
    state: Mutex<State>,
    /// `state.epoch`, readable without the lock: what a spinning helper watches.
    epoch: AtomicU64,
    wake: Condvar,
    done: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic is never raised while these locks are held, but poisoning must not wedge the pool.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pool {
    /// This process's pool (leaked: helpers outlive every caller).
    fn get() -> &'static Pool {
        static POOL: AtomicPtr<Pool> = AtomicPtr::new(std::ptr::null_mut());
        let pid = std::process::id();
        let current = POOL.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::leak` below and is never freed.
        if let Some(pool) = unsafe { current.as_ref() } {
            if pool.pid == pid {
                return pool;
            }
        }
        let fresh: &'static Pool = Box::leak(Box::new(Pool {
            pid,
            busy: Mutex::new(()),
            state: Mutex::new(State::default()),
            epoch: AtomicU64::new(0),
            wake: Condvar::new(),
            done: Condvar::new(),
        }));
        match POOL.compare_exchange(
            current,
            fresh as *const Pool as *mut Pool,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            // Another thread installed one first (the leaked spare has no helpers: harmless).
            // SAFETY: as above.
            Err(other) => unsafe { &*other },
        }
    }

    /// Runs `work` on the caller and on up to `helpers` helpers at once; returns after every
    /// thread that ran it has returned; re-raises the first panic. Helpers join `delay` after
    /// the start at the earliest: with a delay, sleeping ones are woken only when `work` calls
    /// [`Pool::wake`], and awake ones wait it out, so a batch the caller finishes sooner runs on
    /// the caller alone (a helper joining a few cheap rows costs more than it saves: the rows'
    /// state moves between cores, and the caller waits for the helper's last row).
    fn run(&'static self, work: &(dyn Fn() + Sync), helpers: usize, delay: std::time::Duration) {
        let Ok(_busy) = self.busy.try_lock() else {
            return work();
        };
        let helpers = helpers.min(MAX_HELPERS);
        {
            let mut st = lock(&self.state);
            while st.helpers < helpers {
                let spawned = std::thread::Builder::new()
                    .name("structout-mask".into())
                    .spawn(move || self.serve());
                if spawned.is_err() {
                    break; // fewer helpers; the caller does the rest
                }
                st.helpers += 1;
            }
            // SAFETY (lifetime erased): withdrawn below before `work` goes out of scope.
            let work: *const (dyn Fn() + Sync + '_) = work;
            #[allow(clippy::missing_transmute_annotations)]
            let work = unsafe { std::mem::transmute(work) };
            st.epoch += 1;
            self.epoch.store(st.epoch, Ordering::Release);
            st.batch = Some(Batch {
                work,
                join_after: std::time::Instant::now() + delay,
                open: helpers,
                running: 0,
                panic: None,
            });
        }
        if delay.is_zero() {
            self.wake(helpers);
        }
        let own = catch_unwind(AssertUnwindSafe(work));
        let mut st = lock(&self.state);
        if let Some(b) = st.batch.as_mut() {
            b.open = 0;
        }
        while st.batch.as_ref().is_some_and(|b| b.running > 0) {
            st = self.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        let helper_panic = st.batch.take().and_then(|b| b.panic);
        drop(st);
        if let Err(p) = own {
            resume_unwind(p);
        }
        if let Some(p) = helper_panic {
            resume_unwind(p);
        }
    }

    /// Wakes up to `helpers` sleeping helpers for the batch being run: only as many as may join
    /// (the pool may have grown larger for another caller); the others sleep on.
    fn wake(&self, helpers: usize) {
        for _ in 0..helpers {
            self.wake.notify_one();
        }
    }

    /// A helper's life: wait for a batch it has not joined, run it, report, repeat.
    fn serve(&'static self) {
        let mut seen = 0u64;
        let mut st = lock(&self.state);
        loop {
            let joinable = st.epoch != seen && st.batch.as_ref().is_some_and(|b| b.open > 0);
            if !joinable {
                // Look for the next batch a little before sleeping (the check above, made under
                // the lock, is repeated after the spin, so no wake-up is lost).
                let current = st.epoch;
                drop(st);
                let start = std::time::Instant::now();
                while self.epoch.load(Ordering::Acquire) == current && start.elapsed() < SPIN {
                    std::thread::yield_now();
                }
                st = lock(&self.state);
                let joinable = st.epoch != seen && st.batch.as_ref().is_some_and(|b| b.open > 0);
                if !joinable {
                    st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                continue;
            }
            let join_after = st.batch.as_ref().expect("checked joinable").join_after;
            if std::time::Instant::now() < join_after {
                // Too early: wait it out without the lock, then look again (the caller may
                // have finished meanwhile).
                drop(st);
                while std::time::Instant::now() < join_after {
                    std::hint::spin_loop();
                }
                st = lock(&self.state);
                continue;
            }
            seen = st.epoch;
            let b = st.batch.as_mut().expect("checked joinable");
            b.open -= 1;
            b.running += 1;
            let work = b.work;
            drop(st);
            // SAFETY: the batch is not withdrawn while `running > 0`, so the closure is alive.
            let outcome = catch_unwind(AssertUnwindSafe(|| unsafe { (*work)() }));
            st = lock(&self.state);
            let b = st
                .batch
                .as_mut()
                .expect("a joined batch stays until its helpers leave");
            b.running -= 1;
            if let Err(p) = outcome {
                b.panic.get_or_insert(p);
            }
            if b.running == 0 {
                self.done.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_runs_once_across_threads_and_panics_reach_the_caller() {
        for threads in [2, 3, 8] {
            let hits: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
            let next = AtomicUsize::new(0);
            let work = || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= hits.len() {
                    break;
                }
                hits[i].fetch_add(1, Ordering::Relaxed);
            };
            Pool::get().run(&work, threads - 1, std::time::Duration::ZERO);
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
        let calls = AtomicUsize::new(0);
        let boom = || {
            calls.fetch_add(1, Ordering::Relaxed);
            panic!("boom");
        };
        let caught = catch_unwind(AssertUnwindSafe(|| {
            Pool::get().run(&boom, 3, std::time::Duration::ZERO)
        }));
        assert!(caught.is_err());
        assert!(calls.load(Ordering::Relaxed) >= 1);
        // The pool still works after a panic.
        let after = AtomicUsize::new(0);
        Pool::get().run(
            &|| {
                after.fetch_add(1, Ordering::Relaxed);
            },
            3,
            std::time::Duration::from_micros(20),
        );
        assert!(after.load(Ordering::Relaxed) >= 1);
    }

    #[test]
    fn a_delayed_batch_runs_every_item_once_and_helpers_join_slow_ones() {
        // Items of 1 ms each: once the delay is over the caller wakes a helper, which takes
        // some of them. The pool is process-wide: a run that finds it busy (another test) is the
        // caller's alone, so the test tries a few times.
        let delay = std::time::Duration::from_micros(20);
        for _ in 0..20 {
            let hits: Vec<AtomicUsize> = (0..6).map(|_| AtomicUsize::new(0)).collect();
            let next = AtomicUsize::new(0);
            let caller = std::thread::current().id();
            let by_helpers = AtomicUsize::new(0);
            let work = || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= hits.len() {
                    break;
                }
                if i > 0 && std::thread::current().id() != caller {
                    by_helpers.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
                hits[i].fetch_add(1, Ordering::Relaxed);
                Pool::get().wake(1);
            };
            Pool::get().run(&work, 1, delay);
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            if by_helpers.load(Ordering::Relaxed) > 0 {
                return;
            }
        }
        panic!("no helper joined a batch of slow items after its delay");
    }
}
