//! The per-context caches of compiled kernels: each value built once (NVRTC, module load), by
//! the first thread that needs it, while threads needing other kernels compile theirs at the
//! same time and a build may itself use the cache for other keys.
//!
//! Two locks: the map's, held only to find a key's slot, and each slot's, held by the one thread
//! building it (the others wanting that key wait for its result instead of compiling it again:
//! a GPU test's threads, or a conversion's, all start with the same few pairs). The map's guard
//! must not live across a build. `match cache.lock()?.get(k) { None => ... }` keeps it for the
//! whole `match` (a scrutinee's temporaries live to the end of the statement), and the second
//! lock in the `None` arm then waited for ever: the scaled kernels hung on their first use on the
//! first GPU they met. One type holds the rule, for every cache.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::TensorError;

/// A key's value, once built.
type Slot<V> = Arc<Mutex<Option<V>>>;

/// Values built once per key (compiled functions or modules), shared by every thread.
pub(super) struct Compiled<K, V> {
    map: Mutex<HashMap<K, Slot<V>>>,
}

fn poisoned<T>(_: T) -> TensorError {
    TensorError::Cuda("kernel cache poisoned".to_owned())
}

impl<K: Eq + Hash, V: Clone> Compiled<K, V> {
    pub(super) fn new() -> Self {
        Compiled {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> Result<MutexGuard<'_, HashMap<K, Slot<V>>>, TensorError> {
        self.map.lock().map_err(poisoned)
    }

    /// Whether `key`'s value is built (one being built is not: this does not wait for it).
    pub(super) fn contains(&self, key: &K) -> bool {
        let slot = self.map().ok().and_then(|m| m.get(key).cloned());
        slot.is_some_and(|s| s.try_lock().is_ok_and(|v| v.is_some()))
    }

    /// The value for `key`, built by `build` on first use. A thread asking for a key that another
    /// is building waits for that build and gets its value; a failed build stores nothing (the
    /// next request builds again).
    pub(super) fn get_or_build(
        &self,
        key: K,
        build: impl FnOnce() -> Result<V, TensorError>,
    ) -> Result<V, TensorError> {
        // A statement of its own, so that the map's guard is gone before the slot is locked.
        let slot = Arc::clone(self.map()?.entry(key).or_default());
        let mut value = slot.lock().map_err(poisoned)?;
        if let Some(v) = value.as_ref() {
            return Ok(v.clone());
        }
        let built = build()?;
        *value = Some(built.clone());
        Ok(built)
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
        assert!(cache.contains(&"a") && cache.contains(&"b") && !cache.contains(&"c"));
        assert_eq!(cache.get_or_build("b", || Ok(0)).unwrap(), 2);
        assert_eq!(builds, 1);
    }

    #[test]
    fn a_failed_build_is_not_cached() {
        let cache: Compiled<u8, u8> = Compiled::new();
        let e = cache.get_or_build(1, || Err(TensorError::Cuda("nvrtc said no".to_owned())));
        assert!(e.unwrap_err().to_string().contains("nvrtc said no"));
        assert!(!cache.contains(&1));
        let v = cache.get_or_build(1, || {
            assert_unlocked(&cache);
            Ok(7)
        });
        assert_eq!(v.unwrap(), 7);
    }

    #[test]
    fn a_key_being_built_is_waited_for_not_built_again() {
        let cache: Compiled<u8, u32> = Compiled::new();
        let builds = std::sync::atomic::AtomicUsize::new(0);
        let (started, began) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let first = scope.spawn(|| {
                cache.get_or_build(1, || {
                    builds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    // Other keys stay available while this one is built, and it is not built
                    // yet (asking does not wait for it).
                    assert_unlocked(&cache);
                    assert!(!cache.contains(&1));
                    started.send(()).unwrap();
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Ok(5)
                })
            });
            // The second request comes while the first build runs: it waits for its value.
            began.recv().unwrap();
            let second = cache.get_or_build(1, || {
                builds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(6)
            });
            assert_eq!(second.unwrap(), 5);
            assert_eq!(first.join().unwrap().unwrap(), 5);
        });
        assert_eq!(builds.into_inner(), 1);
    }
}
