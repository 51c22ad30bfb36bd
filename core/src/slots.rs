//! The storage of the tables (sessions, pending requests, obligations): up
//! to `N` slots, and a fixed index of `N` entries.
//!
//! Without an allocator both are arrays in place, so a table can be a
//! `static` built by a `const fn`. With the `alloc` feature the slots live
//! on the heap, in room for `N` reserved once (never written, so never
//! resident, before it is used) and made as they are first needed (a free
//! slot is reused before a new one is made); a fixed index is written in
//! place on the heap. A host's tables at full capacity are megabytes:
//! building them by value would need a stack that large and would touch
//! all of that memory before the first session opens. Reserving the room
//! up front keeps growth out of the code (the WebAssembly module is
//! downloaded by every page that uses it).

/// Up to `N` slots of `T`.
#[cfg(not(feature = "alloc"))]
pub(crate) type Slots<T, const N: usize> = [T; N];

/// Up to `N` slots of `T`, made as needed.
#[cfg(feature = "alloc")]
pub(crate) type Slots<T, const N: usize> = alloc::vec::Vec<T>;

/// `N` entries of `T`, all present from the start.
#[cfg(not(feature = "alloc"))]
pub(crate) type Fixed<T, const N: usize> = [T; N];

/// `N` entries of `T`, all present from the start, on the heap (a vector
/// rather than a boxed array: made without a boxed slice's shrinking code).
#[cfg(feature = "alloc")]
pub(crate) type Fixed<T, const N: usize> = alloc::vec::Vec<T>;

/// Empty slots: `N` of `free` in place, or (with `alloc`) room for `N` with
/// none made yet.
macro_rules! slots {
    ($free:expr; $n:expr) => {{
        #[cfg(not(feature = "alloc"))]
        let slots = [$free; $n];
        #[cfg(feature = "alloc")]
        let slots = alloc::vec::Vec::with_capacity($n);
        slots
    }};
}
pub(crate) use slots;

/// `N` entries, each `value` (`Copy`). Only the tables' non-`const`
/// constructors use it.
#[cfg(any(loom, feature = "alloc"))]
macro_rules! fixed {
    ($value:expr; $n:expr) => {{
        #[cfg(not(feature = "alloc"))]
        let fixed = [$value; $n];
        #[cfg(feature = "alloc")]
        let fixed = alloc::vec![$value; $n];
        fixed
    }};
}
#[cfg(any(loom, feature = "alloc"))]
pub(crate) use fixed;

/// A free slot and its index: the first `is_free` accepts, looking from
/// `start` round the slots made so far; else (with `alloc`, fewer than `N`
/// made) a new one made by `free`. `None` when all `N` are in use.
#[cfg_attr(not(feature = "alloc"), allow(unused_variables))]
pub(crate) fn claim<T, const N: usize>(
    slots: &mut Slots<T, N>,
    start: usize,
    mut is_free: impl FnMut(&T) -> bool,
    free: impl FnOnce() -> T,
) -> Option<(usize, &mut T)> {
    // Two plain scans (from `start` to the end, then from the first slot)
    // rather than one with a modulo: smaller code, no division.
    let made = slots.len();
    let start = if start < made { start } else { 0 };
    let (before, after) = slots.split_at(start);
    let found = match after.iter().position(&mut is_free) {
        Some(i) => Some(start + i),
        None => before.iter().position(is_free),
    };
    #[cfg(feature = "alloc")]
    let found = match found {
        None if made < N => {
            // Room for N was reserved when the table was made: no growth.
            slots.push(free());
            Some(made)
        }
        found => found,
    };
    // Neither index is out of range: `get_mut` only spares a panic path.
    let index = found?;
    slots.get_mut(index).map(|slot| (index, slot))
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;

    #[test]
    fn slots_are_made_as_needed_reused_first_and_never_more_than_n() {
        let mut slots: Slots<Option<u8>, 5> = slots![None; 5];
        assert_eq!(slots.len(), 0, "nothing is made before it is used");
        for i in 0..5 {
            let (index, slot) = claim::<_, 5>(&mut slots, 0, Option::is_none, || None).unwrap();
            assert_eq!(index, i);
            *slot = Some(i as u8);
        }
        assert!(claim::<_, 5>(&mut slots, 0, Option::is_none, || None).is_none(), "full at N");
        slots[3] = None;
        assert_eq!(
            claim::<_, 5>(&mut slots, 1, Option::is_none, || None).map(|(i, _)| i),
            Some(3),
            "a free slot is reused"
        );
        assert_eq!((slots.len(), slots.capacity()), (5, 5));
    }
}
