//! The engine's parking storage in WebAssembly.

use alloc::vec::Vec;

/// The parking storage: its capacity, reserved up front, is the byte bound,
/// and it is written (so its memory touched) only as frames are parked.
/// WebAssembly memory is never given back: a zeroed buffer of the whole
/// bound would cost every client its size in resident memory.
pub(crate) struct ParkStorage {
    pub(crate) bytes: Vec<u8>,
    pub(crate) limit: usize,
}

impl copilot_core::FrameBuffer for ParkStorage {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    fn grow(&mut self, len: usize) -> bool {
        if len > self.limit {
            return false;
        }
        if len > self.bytes.len() {
            // Within the capacity reserved: no reallocation.
            self.bytes.resize(len, 0);
        }
        true
    }

    fn can_grow(&self, len: usize) -> bool {
        len <= self.limit
    }
}
