//! Buffers a thread reuses from one piece of work to the next (and from one call to the next):
//! rayon's `*_init` makes its state once per split of the work, and buffers of a piece's size
//! (above malloc's mmap threshold) would otherwise be mapped, faulted in and unmapped each time.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::thread::LocalKey;

/// A `T` taken from this thread's pool (or made), given back when dropped.
pub(crate) struct Pooled<T: 'static> {
    value: Option<T>,
    pool: &'static LocalKey<RefCell<Vec<T>>>,
}

impl<T: Default + 'static> Pooled<T> {
    /// A buffer from `pool` (this thread's), or a new one.
    pub(crate) fn take(pool: &'static LocalKey<RefCell<Vec<T>>>) -> Pooled<T> {
        let value = pool.with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop()));
        Pooled {
            value: Some(value.unwrap_or_default()),
            pool,
        }
    }
}

impl<T> Drop for Pooled<T> {
    fn drop(&mut self) {
        if let Some(v) = self.value.take() {
            // (A pool already torn down at thread exit keeps nothing.)
            let _ = self.pool.try_with(|p| {
                if let Ok(mut p) = p.try_borrow_mut() {
                    p.push(v);
                }
            });
        }
    }
}

impl<T> Deref for Pooled<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value.as_ref().expect("a pooled value until dropped")
    }
}

impl<T> DerefMut for Pooled<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_mut().expect("a pooled value until dropped")
    }
}
