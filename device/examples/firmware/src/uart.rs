//! The CMSDK APB UART of the MPS2 boards (QEMU's `cmsdk-apb-uart`) as a
//! blocking `embedded_io` transport, polled: one byte of buffer each way,
//! no interrupts.

use core::ptr::{read_volatile, write_volatile};

/// The data register: read takes the received byte, write sends one.
const DATA: usize = 0x00;
/// Status: TX full (bit 0), RX full (bit 1), TX and RX overrun (bits 2, 3).
const STATE: usize = 0x04;
/// Control: TX enable (bit 0), RX enable (bit 1).
const CTRL: usize = 0x08;
/// The baud rate divider (at least 16, or the UART stays off).
const BAUDDIV: usize = 0x10;

const TX_FULL: u32 = 1 << 0;
const RX_FULL: u32 = 1 << 1;
const RX_OVERRUN: u32 = 1 << 3;

/// UART0 of the MPS2 AN385/AN386 images: QEMU's first `-serial`.
pub const UART0: usize = 0x4000_4000;

/// A byte was lost: the UART received one before the last was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overrun;

impl core::fmt::Display for Overrun {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("UART receive overrun")
    }
}

impl core::error::Error for Overrun {}

impl embedded_io::Error for Overrun {
    fn kind(&self) -> embedded_io::ErrorKind {
        embedded_io::ErrorKind::Other
    }
}

/// One CMSDK UART, owned.
pub struct Uart {
    base: usize,
}

impl Uart {
    /// Sets the UART at `base` up: 115200 baud at 25 MHz, TX and RX on.
    ///
    /// `base` must be the address of a CMSDK APB UART that nothing else
    /// uses.
    pub fn new(base: usize) -> Uart {
        let uart = Uart { base };
        uart.write_reg(BAUDDIV, 25_000_000 / 115_200);
        uart.write_reg(CTRL, 0b11);
        uart
    }

    fn read_reg(&self, offset: usize) -> u32 {
        // SAFETY: `base` is a CMSDK UART's register block (see `new`), and
        // these registers are read with 32-bit volatile loads.
        unsafe { read_volatile((self.base + offset) as *const u32) }
    }

    fn write_reg(&self, offset: usize, value: u32) {
        // SAFETY: as for `read_reg`.
        unsafe { write_volatile((self.base + offset) as *mut u32, value) }
    }
}

impl embedded_io::ErrorType for Uart {
    type Error = Overrun;
}

impl embedded_io::ReadReady for Uart {
    fn read_ready(&mut self) -> Result<bool, Overrun> {
        Ok(self.read_reg(STATE) & RX_FULL != 0)
    }
}

impl embedded_io::Read for Uart {
    /// Waits for one byte, then takes what else has arrived. A UART never
    /// ends, so this never returns 0 (for a non-empty `buf`).
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Overrun> {
        let mut n = 0;
        while n < buf.len() {
            let state = self.read_reg(STATE);
            if state & RX_OVERRUN != 0 {
                self.write_reg(STATE, RX_OVERRUN);
                return Err(Overrun);
            }
            if state & RX_FULL != 0 {
                buf[n] = self.read_reg(DATA) as u8;
                n += 1;
            } else if n > 0 {
                break;
            }
        }
        Ok(n)
    }
}

impl embedded_io::Write for Uart {
    fn write(&mut self, bytes: &[u8]) -> Result<usize, Overrun> {
        for &b in bytes {
            while self.read_reg(STATE) & TX_FULL != 0 {}
            self.write_reg(DATA, u32::from(b));
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> Result<(), Overrun> {
        while self.read_reg(STATE) & TX_FULL != 0 {}
        Ok(())
    }
}
