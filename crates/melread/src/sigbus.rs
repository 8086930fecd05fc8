//! What a process that maps datasets can do about SIGBUS: a mapped file that another
//! process truncates (`cp` or `rsync --inplace` over a split while a trainer reads it)
//! raises SIGBUS on the next read of a page past the new end, which kills the process with
//! no word ("Bus error", exit 135). [`exit_on_sigbus`], called once from `main`, turns that
//! into a one-line message and an exit code. A library cannot do this by itself: a signal
//! handler belongs to the whole process.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

static MESSAGE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static MESSAGE_LEN: AtomicUsize = AtomicUsize::new(0);
static CODE: AtomicUsize = AtomicUsize::new(74);

/// The message [`exit_on_sigbus`] prints when no other is given.
pub const DEFAULT_MESSAGE: &str = "error: a memory-mapped dataset changed while it was read (a split was truncated or replaced by another process, or its disk failed); read it again once it is complete";

/// Installs a SIGBUS handler that writes `message` (and a newline) to stderr and exits with
/// `code`, for the whole process.
pub fn exit_on_sigbus(message: &'static str, code: u8) {
    MESSAGE_LEN.store(message.len(), Ordering::SeqCst);
    MESSAGE.store(message.as_ptr().cast_mut(), Ordering::SeqCst);
    CODE.store(code as usize, Ordering::SeqCst);
    extern "C" fn handler(_: libc::c_int) {
        let (ptr, len) = (
            MESSAGE.load(Ordering::SeqCst),
            MESSAGE_LEN.load(Ordering::SeqCst),
        );
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the message is a static
        // string stored before the handler was installed.
        unsafe {
            libc::write(2, b"\n".as_ptr().cast(), 1);
            libc::write(2, ptr.cast(), len);
            libc::write(2, b"\n".as_ptr().cast(), 1);
            libc::_exit(CODE.load(Ordering::SeqCst) as libc::c_int);
        }
    }
    // SAFETY: installs a handler that only calls async-signal-safe functions.
    unsafe {
        libc::signal(
            libc::SIGBUS,
            handler as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}
