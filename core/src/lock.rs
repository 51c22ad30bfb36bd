//! The one lock type of the crate. Data behind it is reached only through
//! `with`, so no guard can leave the crate and no caller can forget the lock.
//!
//! Under `--cfg loom` it is loom's mutex, so loom can explore interleavings
//! (loom cannot see the atomics inside `spin`).

#[cfg(not(loom))]
pub(crate) struct Lock<T>(spin::Mutex<T>);

#[cfg(not(loom))]
impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Lock(spin::Mutex::new(value))
    }

    /// Runs `f` with the lock held. `f` must not call back into user code.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock())
    }
}

#[cfg(loom)]
pub(crate) struct Lock<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Lock<T> {
    pub(crate) fn new(value: T) -> Self {
        Lock(loom::sync::Mutex::new(value))
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock().unwrap())
    }
}
