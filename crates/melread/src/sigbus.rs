//! What a process that maps datasets can do about SIGBUS: a mapped file that another
//! process truncates (`cp` or `rsync --inplace` over a split while a trainer reads it)
//! raises SIGBUS on the next read of a page past the new end, which kills the process with
//! no word ("Bus error", exit 135). [`exit_on_sigbus`], called once from `main`, turns that
//! into a one-line message and an exit code.
//!
//! A library (the Python package) cannot exit for its caller: [`recover_mapped_faults`]
//! installs a handler that acts only on faults inside melread's own maps. It puts a page
//! of zeros where the file's page was and marks the map (`MapGuard::faulted`), so the
//! interrupted copy completes; the reader then refuses what it read ("changed while it was
//! read"), and every later read of that split. Any other SIGBUS goes to the handler that
//! was there before (the default kills the process, as before).

use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

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

/// Maps guarded at once, at most; a map beyond them is read unguarded.
const SLOTS: usize = 256;

/// One guarded map: its address range and whether a fault was repaired in it.
struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    faulted: AtomicBool,
    used: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)] // the initialiser of each slot
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    faulted: AtomicBool::new(false),
    used: AtomicBool::new(false),
};

static GUARDED: [Slot; SLOTS] = [FREE; SLOTS];

/// Whether [`recover_mapped_faults`] installed its handler.
static RECOVERING: AtomicBool = AtomicBool::new(false);

/// The SIGBUS action before ours, called for faults outside melread's maps.
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());

/// A map registered with the guard while it lives: faults inside it are repaired and
/// recorded instead of killing the process (when [`recover_mapped_faults`] is on).
#[derive(Debug)]
pub(crate) struct MapGuard {
    slot: Option<usize>,
}

impl MapGuard {
    /// Guards `[start, start + len)`; unguarded when every slot is taken.
    pub(crate) fn new(start: *const u8, len: usize) -> MapGuard {
        let slot = (0..SLOTS).find(|&i| {
            GUARDED[i]
                .used
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        if let Some(i) = slot {
            let s = &GUARDED[i];
            s.faulted.store(false, Ordering::SeqCst);
            s.len.store(len, Ordering::SeqCst);
            s.start.store(start as usize, Ordering::SeqCst);
        }
        MapGuard { slot }
    }

    /// Whether a read of the map faulted (its file was truncated under it): what was read
    /// from it since may hold zeros instead of the file's bytes.
    pub(crate) fn faulted(&self) -> bool {
        self.slot
            .is_some_and(|i| GUARDED[i].faulted.load(Ordering::SeqCst))
    }
}

impl Drop for MapGuard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let s = &GUARDED[i];
            s.start.store(0, Ordering::SeqCst);
            s.len.store(0, Ordering::SeqCst);
            s.used.store(false, Ordering::SeqCst);
        }
    }
}

/// Whether faults in melread's maps are being recovered (see the module documentation).
pub fn recovering() -> bool {
    RECOVERING.load(Ordering::SeqCst)
}

/// Installs, once per process, the SIGBUS handler that repairs faults inside melread's
/// own maps and passes every other one to the handler installed before it (see the module
/// documentation). For a library whose caller owns the process (the Python package): a
/// truncated split then raises an error naming it instead of killing the interpreter. A
/// handler installed later by someone else replaces it.
pub fn recover_mapped_faults() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        extern "C" fn handler(
            sig: libc::c_int,
            info: *mut libc::siginfo_t,
            ctx: *mut libc::c_void,
        ) {
            // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
            let addr = unsafe { (*info).si_addr() } as usize;
            for s in &GUARDED {
                let (start, len) = (s.start.load(Ordering::SeqCst), s.len.load(Ordering::SeqCst));
                if start != 0 && addr >= start && addr < start + len {
                    // SAFETY: sysconf and mmap are plain system calls; the page replaced
                    // lies inside a private, read-only map this crate owns (the slot is
                    // registered only while its map lives), so nothing else is overwritten.
                    let ok = unsafe {
                        let page = libc::sysconf(libc::_SC_PAGESIZE).max(4096) as usize;
                        let at = addr - addr % page;
                        libc::mmap(
                            at as *mut libc::c_void,
                            page,
                            libc::PROT_READ,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                            -1,
                            0,
                        ) != libc::MAP_FAILED
                    };
                    if ok {
                        s.faulted.store(true, Ordering::SeqCst);
                        return; // the read is retried, and reads zeros
                    }
                }
            }
            pass_on(sig, info, ctx);
        }
        /// The fault is not ours: the previous action takes it.
        fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
            let prev = PREVIOUS.load(Ordering::SeqCst);
            // SAFETY: `prev` is null or the leaked action saved before ours was installed;
            // sigaction, signal and the previous handler are what a handler may call.
            unsafe {
                let h = if prev.is_null() {
                    libc::SIG_DFL
                } else {
                    (*prev).sa_sigaction
                };
                if h == libc::SIG_IGN {
                    return;
                }
                if h == libc::SIG_DFL {
                    // Back to the default and return: the fault recurs and ends the
                    // process, as it would have without us.
                    libc::signal(sig, libc::SIG_DFL);
                    return;
                }
                if (*prev).sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(h);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
                    f(sig);
                }
            }
        }
        // SAFETY: sigaction with a zeroed struct filled for an SA_SIGINFO handler that
        // calls only async-signal-safe functions; the previous action is leaked so the
        // handler can read it for the life of the process.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut act.sa_mask);
            let prev: *mut libc::sigaction = Box::into_raw(Box::new(std::mem::zeroed()));
            if libc::sigaction(libc::SIGBUS, &act, prev) == 0 {
                PREVIOUS.store(prev, Ordering::SeqCst);
                RECOVERING.store(true, Ordering::SeqCst);
            }
        }
    });
}
