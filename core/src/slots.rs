//! The storage of the tables (sessions, pending requests, obligations): up
//! to `N` slots, and a fixed index of `N` entries.
//!
//! Without an allocator both are arrays in place, so a table can be a
//! `static` built by a `const fn`. With the `alloc` feature the slots live
//! on the heap and are made as they are first needed (a free slot is
//! reused before a new one is made; never more than `N`), and a fixed
//! index is written in place on the heap: a host's tables at full capacity
//! are megabytes, and building them by value would need a stack that large
//! and would touch all of that memory before the first session opens.

/// Up to `N` slots of `T`.
#[cfg(not(feature = "alloc"))]
pub(crate) type Slots<T, const N: usize> = [T; N];

/// Up to `N` slots of `T`, made as needed.
#[cfg(feature = "alloc")]
pub(crate) type Slots<T, const N: usize> = alloc::vec::Vec<T>;

/// `N` entries of `T`, all present from the start.
#[cfg(not(feature = "alloc"))]
pub(crate) type Fixed<T, const N: usize> = [T; N];

/// `N` entries of `T`, all present from the start, on the heap.
#[cfg(feature = "alloc")]
pub(crate) type Fixed<T, const N: usize> = alloc::boxed::Box<[T; N]>;

/// Empty slots: `N` of `free` in place, or (with `alloc`) none made yet.
macro_rules! slots {
    ($free:expr; $n:expr) => {{
        #[cfg(not(feature = "alloc"))]
        let slots = [$free; $n];
        #[cfg(feature = "alloc")]
        let slots = alloc::vec::Vec::new();
        slots
    }};
}
pub(crate) use slots;

/// `N` entries, each `value` (evaluated once per entry, as in an array
/// repeat expression with a `const` item). Only the tables' non-`const`
/// constructors use it.
#[cfg(any(loom, feature = "alloc"))]
macro_rules! fixed {
    ($value:expr; $n:expr) => {{
        #[cfg(not(feature = "alloc"))]
        let fixed = [$value; $n];
        #[cfg(feature = "alloc")]
        let fixed = $crate::slots::on_heap(|| $value);
        fixed
    }};
}
#[cfg(any(loom, feature = "alloc"))]
pub(crate) use fixed;

/// `N` entries made by `make`, written in place on the heap.
#[cfg(feature = "alloc")]
pub(crate) fn on_heap<T, const N: usize>(make: impl FnMut() -> T) -> Fixed<T, N> {
    // An iterator of known length fills one allocation of exactly N entries.
    let slice: alloc::boxed::Box<[T]> = core::iter::repeat_with(make).take(N).collect();
    match slice.try_into() {
        Ok(array) => array,
        Err(_) => unreachable!("the iterator yields exactly N entries"),
    }
}

/// The index of a free slot: the first `is_free` accepts, looking from
/// `start` round the slots made so far; else (with `alloc`, fewer than `N`
/// made) a new one made by `free`. `None` when all `N` are in use.
#[cfg_attr(not(feature = "alloc"), allow(unused_variables))]
pub(crate) fn claim<T, const N: usize>(
    slots: &mut Slots<T, N>,
    start: usize,
    mut is_free: impl FnMut(&T) -> bool,
    free: impl FnOnce() -> T,
) -> Option<usize> {
    let made = slots.len();
    let found = (0..made).map(|k| (start + k) % made).find(|&i| is_free(&slots[i]));
    #[cfg(feature = "alloc")]
    if found.is_none() && made < N {
        if made == slots.capacity() {
            // Grow by doubling, but never past N slots.
            slots.reserve_exact(made.max(4).min(N - made));
        }
        slots.push(free());
        return Some(made);
    }
    found
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;

    #[test]
    fn slots_are_made_as_needed_reused_first_and_never_more_than_n() {
        let mut slots: Slots<Option<u8>, 5> = slots![None; 5];
        assert_eq!(slots.len(), 0, "nothing is made before it is used");
        for i in 0..5 {
            assert_eq!(claim::<_, 5>(&mut slots, 0, Option::is_none, || None), Some(i));
            slots[i] = Some(i as u8);
        }
        assert_eq!(claim::<_, 5>(&mut slots, 0, Option::is_none, || None), None, "full at N");
        slots[3] = None;
        assert_eq!(claim::<_, 5>(&mut slots, 1, Option::is_none, || None), Some(3), "a free slot is reused");
        assert_eq!((slots.len(), slots.capacity()), (5, 5));
    }
}
