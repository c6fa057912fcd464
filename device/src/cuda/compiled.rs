//! The per-context caches of compiled kernels: looked up under a lock, built (NVRTC, module load)
//! with the lock released, so that threads needing other kernels compile at the same time and a
//! build may itself use the cache.
//!
//! The lock's guard must not live across the build. `match cache.lock()?.get(k) { None => ... }`
//! keeps it for the whole `match` (a scrutinee's temporaries live to the end of the statement),
//! and the second lock in the `None` arm then waited for ever: the scaled kernels hung on their
//! first use on the first GPU they met. One type holds the rule, for every cache.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

use crate::error::TensorError;

/// Values built once per key (compiled functions or modules), shared by every thread.
pub(super) struct Compiled<K, V> {
    map: Mutex<HashMap<K, V>>,
}

impl<K: Eq + Hash, V: Clone> Compiled<K, V> {
    pub(super) fn new() -> Self {
        Compiled {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> Result<MutexGuard<'_, HashMap<K, V>>, TensorError> {
        self.map
            .lock()
            .map_err(|_| TensorError::Cuda("kernel cache poisoned".to_owned()))
    }

    /// The value for `key`, built by `build` on first use. Two threads building the same key
    /// both succeed and the first result stored is kept (and returned to both).
    pub(super) fn get_or_build(
        &self,
        key: K,
        build: impl FnOnce() -> Result<V, TensorError>,
    ) -> Result<V, TensorError> {
        // A statement of its own, so that the guard is gone before `build` runs.
        let cached = self.map()?.get(&key).cloned();
        if let Some(v) = cached {
            return Ok(v);
        }
        let built = build()?;
        Ok(self.map()?.entry(key).or_insert(built).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails (rather than hangs) where a build runs with the lock held.
    fn assert_unlocked<K, V>(cache: &Compiled<K, V>) {
        assert!(
            cache.map.try_lock().is_ok(),
            "the lock is held during a build"
        );
    }

    #[test]
    fn builds_once_without_holding_the_lock() {
        let cache: Compiled<&str, u32> = Compiled::new();
        let mut builds = 0;
        let v = cache
            .get_or_build("a", || {
                builds += 1;
                // The lock is free while building: a build may use the cache itself.
                assert_unlocked(&cache);
                let inner = cache.get_or_build("b", || Ok(2))?;
                Ok(40 + inner)
            })
            .unwrap();
        assert_eq!(v, 42);
        assert_eq!(cache.get_or_build("a", || Ok(0)).unwrap(), 42);
        assert_eq!(cache.get_or_build("b", || Ok(0)).unwrap(), 2);
        assert_eq!(builds, 1);
    }

    #[test]
    fn a_failed_build_is_not_cached() {
        let cache: Compiled<u8, u8> = Compiled::new();
        let e = cache.get_or_build(1, || Err(TensorError::Cuda("nvrtc said no".to_owned())));
        assert!(e.unwrap_err().to_string().contains("nvrtc said no"));
        let v = cache.get_or_build(1, || {
            assert_unlocked(&cache);
            Ok(7)
        });
        assert_eq!(v.unwrap(), 7);
    }
}
