//! Column buffers of the Arrow reads, reused across calls.
//!
//! A read batch's buffers move into Arrow (and on to Python) without a copy; when Python drops
//! the batch, each buffer comes back here instead of going to the allocator. The next read
//! takes it again with its pages already mapped: fresh heap memory would be faulted in and
//! zeroed by the kernel page by page (with glibc, any block above its mmap threshold, at most
//! 32 MiB, is a new mapping on every call), which cost a third of a read at 100 B per message.
//!
//! Invariants: a pool holds at most [`POOL_BUFFERS`] buffers and [`POOL_BYTES`] bytes of
//! capacity per element type (u8, i32, i64), so at most ~3 x 64 MiB of freed read buffers
//! stay resident; a buffer taken is empty (`len() == 0`); the buffers handed to Arrow are
//! plain `Vec`s owned through [`bytes::Bytes::from_owner`] (no `unsafe`). The lock is only
//! ever tried, never waited on for long ([`LOCK_TRIES`]): a child forked while another thread
//! held it would otherwise block on it forever (it then allocates as without a pool), and a
//! child forked while it was free has a working copy of the pool. No `getpid` per call: a
//! split read takes and gives ~1,000 buffers per batch, and a `getpid` costs ~0.2 us on a VM.

use std::sync::{Mutex, MutexGuard, TryLockError};

use arrow_buffer::{ArrowNativeType, Buffer, ScalarBuffer, ToByteSlice};

/// Buffers kept per element type.
const POOL_BUFFERS: usize = 96;

/// Bytes of capacity kept per element type.
const POOL_BYTES: usize = 64 << 20;

/// Tries of a pool's lock before doing without the pool: half spinning (the lock is held for
/// a scan of at most [`POOL_BUFFERS`] entries), half yielding the core (its holder may have
/// been preempted).
const LOCK_TRIES: usize = 128;

/// Freed buffers of one element type.
#[derive(Debug)]
pub struct Pool<T> {
    free: Mutex<Vec<Vec<T>>>,
}

/// Byte buffers (string data, validity bitmaps).
pub static BYTES: Pool<u8> = Pool::new();
/// 32-bit buffers (offsets, int32 columns).
pub static I32S: Pool<i32> = Pool::new();
/// 64-bit buffers (int64 and timestamp columns).
pub static I64S: Pool<i64> = Pool::new();

impl<T: ArrowNativeType> Pool<T> {
    const fn new() -> Self {
        Pool {
            free: Mutex::new(Vec::new()),
        }
    }

    /// The free list, if its lock is free now or within [`LOCK_TRIES`] tries (held a
    /// while by another thread, or forever by a thread a forked child does not have: the
    /// caller then does without the pool); `None` too if the lock is poisoned.
    fn free_list(&self) -> Option<MutexGuard<'_, Vec<Vec<T>>>> {
        for round in 0..LOCK_TRIES {
            match self.free.try_lock() {
                Ok(free) => return Some(free),
                Err(TryLockError::Poisoned(_)) => return None,
                Err(TryLockError::WouldBlock) if round < LOCK_TRIES / 2 => {
                    std::hint::spin_loop();
                }
                Err(TryLockError::WouldBlock) => std::thread::yield_now(),
            }
        }
        None
    }

    /// An empty vector with room for at least `cap` values: the smallest pooled one that fits,
    /// else a new allocation (a pooled vector that is too small is left for smaller requests).
    pub fn take(&'static self, cap: usize) -> Vec<T> {
        if cap > 0 {
            if let Some(mut free) = self.free_list() {
                let best = free
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.capacity() >= cap)
                    .min_by_key(|(_, v)| v.capacity())
                    .map(|(i, _)| i);
                if let Some(i) = best {
                    return free.swap_remove(i);
                }
            }
        }
        Vec::with_capacity(cap)
    }

    /// Keeps `v` for a later [`Pool::take`] if the pool has room, else frees it.
    pub fn give(&self, mut v: Vec<T>) {
        let bytes = v.capacity() * std::mem::size_of::<T>();
        if bytes == 0 || bytes > POOL_BYTES {
            return;
        }
        v.clear();
        let Some(mut free) = self.free_list() else {
            return;
        };
        let held: usize = free
            .iter()
            .map(|b| b.capacity() * std::mem::size_of::<T>())
            .sum();
        if free.len() < POOL_BUFFERS && held + bytes <= POOL_BYTES {
            free.push(v);
        } else if let Some((i, _)) = free
            .iter()
            .enumerate()
            .min_by_key(|(_, b)| b.capacity())
            .filter(|(_, b)| b.capacity() < v.capacity())
        {
            // Full: keep the larger buffer (large ones are the ones that fault when fresh).
            let small = free.swap_remove(i).capacity() * std::mem::size_of::<T>();
            if held - small + bytes <= POOL_BYTES {
                free.push(v);
            }
        }
    }

    /// `v` as an Arrow buffer that returns to this pool when Arrow (or Python) drops it.
    pub fn buffer(&'static self, v: Vec<T>) -> Buffer {
        Buffer::from(bytes::Bytes::from_owner(Pooled { v, pool: self }))
    }

    /// `v` as a typed Arrow buffer (see [`Pool::buffer`]).
    pub fn scalars(&'static self, v: Vec<T>) -> ScalarBuffer<T> {
        let len = v.len();
        ScalarBuffer::new(self.buffer(v), 0, len)
    }
}

/// A vector lent to Arrow; given back to its pool on drop.
struct Pooled<T: ArrowNativeType> {
    v: Vec<T>,
    pool: &'static Pool<T>,
}

impl<T: ArrowNativeType> AsRef<[u8]> for Pooled<T> {
    fn as_ref(&self) -> &[u8] {
        self.v.as_slice().to_byte_slice()
    }
}

impl<T: ArrowNativeType> Drop for Pooled<T> {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static P: Pool<i32> = Pool::new();

    #[test]
    fn buffers_come_back_and_are_reused() {
        let mut v = P.take(1000);
        v.extend(0..1000);
        let ptr = v.as_ptr();
        let b = P.scalars(v);
        assert_eq!(b.len(), 1000);
        assert_eq!(b[999], 999);
        drop(b);
        let again = P.take(500);
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), ptr);
        // Too small a pooled buffer is not handed out for a larger request.
        P.give(again);
        let bigger = P.take(5000);
        assert!(bigger.capacity() >= 5000);
        assert_ne!(bigger.as_ptr(), ptr);
    }

    static HELD: Pool<u8> = Pool::new();

    #[test]
    fn a_held_lock_is_not_waited_on() {
        // As in a child forked while another thread held the lock: it is never released.
        let guard = HELD.free.lock().unwrap();
        let v = HELD.take(64);
        assert!(v.capacity() >= 64);
        HELD.give(v);
        drop(guard);
        assert!(HELD.free.lock().unwrap().is_empty());
    }
}
