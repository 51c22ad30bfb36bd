//! The fixed storage of the tables (sessions, pending requests,
//! obligations): `N` slots, all present from the start.
//!
//! Without an allocator it is an array in place, so a table can be a
//! `static` built by a `const fn`. With the `alloc` feature it is the same
//! array on the heap, written there slot by slot: a host's tables are
//! megabytes, and building them by value first would need a stack that
//! large (and would leave that much stack touched for good).

/// `N` slots of `T`.
#[cfg(not(feature = "alloc"))]
pub(crate) type Slots<T, const N: usize> = [T; N];

/// `N` slots of `T`, on the heap.
#[cfg(feature = "alloc")]
pub(crate) type Slots<T, const N: usize> = alloc::boxed::Box<[T; N]>;

/// `N` slots, each `value` (an expression evaluated once per slot, as in
/// an array repeat expression with a `const` item).
macro_rules! slots {
    ($value:expr; $n:expr) => {{
        #[cfg(not(feature = "alloc"))]
        let slots = [$value; $n];
        #[cfg(feature = "alloc")]
        let slots = $crate::slots::on_heap(|| $value);
        slots
    }};
}
pub(crate) use slots;

/// `N` slots made by `make`, written in place on the heap.
#[cfg(feature = "alloc")]
pub(crate) fn on_heap<T, const N: usize>(make: impl FnMut() -> T) -> Slots<T, N> {
    // An iterator of known length fills one allocation of exactly N slots.
    let slice: alloc::boxed::Box<[T]> = core::iter::repeat_with(make).take(N).collect();
    match slice.try_into() {
        Ok(array) => array,
        Err(_) => unreachable!("the iterator yields exactly N slots"),
    }
}
