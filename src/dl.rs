//! A library opened with `dlopen` (through `libloading`): provider plugins
//! (by path) and vendor runtimes (by soname, through the dynamic linker's
//! own search, so that libfi_xpu.so never links a vendor runtime).
//!
//! A thread that forks waits (`settle_for_fork`) until no thread of the
//! library is inside `dlopen`: glibc does not hold its loader's state
//! across `fork`, and a child forked in the middle of another thread's
//! `dlopen` fails an assertion in its own first one.
use crate::fork::{self, ForkLock, Held, Rank};
use libloading::os::unix::{Library as Lib, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW};
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Threads of the library inside `dlopen`, and whether this process was
/// forked while one of its parent's was (then it must not call `dlopen`).
struct Opening {
    inside: u32,
    forked_inside: bool,
}

static OPENING: Mutex<Opening> = Mutex::new(Opening {
    inside: 0,
    forked_inside: false,
});
static OPENED: Condvar = Condvar::new();

/// How long a forking thread waits for a `dlopen` to end. Bounded: the
/// library's constructors run inside it, and one may wait for something
/// the fork holds meanwhile (a lock another fork handler took).
const SETTLE: Duration = Duration::from_secs(1);

fn opening() -> MutexGuard<'static, Opening> {
    OPENING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `open` counted as a thread inside `dlopen`.
fn counted<T>(open: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    {
        let mut st = opening();
        if st.forked_inside {
            return Err(
                "dlopen refused: this process was forked while another thread of its \
                        parent was inside dlopen, and the dynamic loader's state is left \
                        inconsistent in it"
                    .into(),
            );
        }
        st.inside += 1;
    }
    struct Out;
    impl Drop for Out {
        fn drop(&mut self) {
            opening().inside -= 1;
            OPENED.notify_all();
        }
    }
    let _out = Out;
    open()
}

/// The count, held across `fork` (`crate::fork`, at the last rank).
struct Settle;

impl ForkLock for Settle {
    /// Waits, for `SETTLE` at most, until no thread of the library is
    /// inside `dlopen`, and holds the count across the fork, so that none
    /// starts one meanwhile.
    fn hold(&'static self) -> Option<Box<dyn Held>> {
        Some(Box::new(settle_for_fork()))
    }
}

impl Held for MutexGuard<'static, Opening> {
    fn in_child(&mut self) {
        forget_opening_in_child(self);
    }
}

fn register() {
    static SETTLE_FOR_FORK: Settle = Settle;
    fork::register(Rank::Dlopen, &SETTLE_FOR_FORK);
}
fork::at_load!(register);

fn settle_for_fork() -> MutexGuard<'static, Opening> {
    let deadline = Instant::now() + SETTLE;
    let mut st = opening();
    while st.inside > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        st = OPENED
            .wait_timeout(st, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    st
}

/// In a forked child, with the count held: the `dlopen` calls counted
/// were other threads', which the child does not have.
fn forget_opening_in_child(st: &mut Opening) {
    if st.inside > 0 {
        st.inside = 0;
        st.forked_inside = true;
    }
}

pub struct Library(Lib);

impl Library {
    /// Opens `path`: a path with a `/`, or a soname the dynamic linker
    /// searches for (`LD_LIBRARY_PATH`, the cache, the default directories).
    pub fn open(path: &Path) -> Result<Library, String> {
        counted(|| {
            // SAFETY: the library's constructors run here, which is the
            // trust the caller established (a checked plugin file, or the
            // system's vendor runtime).
            let lib = unsafe { Lib::open(Some(path), RTLD_NOW | RTLD_LOCAL) };
            lib.map(Library).map_err(|e| match e {
                libloading::Error::DlOpenUnknown => "dlopen failed: unknown error".into(),
                // dlerror's message
                e => format!("dlopen failed: {e}"),
            })
        })
    }

    /// `open` with `RTLD_GLOBAL`: the library's symbols resolve the
    /// libraries loaded after it (an MPI library's plugins).
    pub fn open_global(path: &Path) -> Result<Library, String> {
        counted(|| {
            // SAFETY: as in `open`.
            let lib = unsafe { Lib::open(Some(path), RTLD_NOW | RTLD_GLOBAL) };
            lib.map(Library).map_err(|e| match e {
                libloading::Error::DlOpenUnknown => String::new(),
                e => e.to_string(),
            })
        })
    }

    /// The function `name` as the pointer type `F`; `None` when the library
    /// has no such symbol or its value is NULL.
    ///
    /// # Safety
    /// `F` is an `unsafe extern "C" fn` type matching the symbol's real
    /// prototype.
    pub unsafe fn function<F: Copy>(&self, name: &str) -> Option<F> {
        // SAFETY: `Option<F>` of a function pointer type is one pointer with
        // NULL as `None` (the caller's contract); libloading checks the size.
        let sym = unsafe { self.0.get::<Option<F>>(name.as_bytes()) };
        sym.ok().and_then(|s| *s)
    }

    /// Keeps the library mapped for the rest of the process.
    pub fn keep(self) {
        std::mem::forget(self);
    }
}

/// A table of a library's entry points (`entry_points!`).
pub trait EntryPoints: Sized {
    /// Looks every entry point up by its symbol; the first one missing is
    /// the error.
    fn resolve(lib: &Library) -> std::result::Result<Self, &'static str>;
}

/// Declares a table of a library's entry points that all return `$ret`,
/// as `EntryPoints`.
macro_rules! entry_points {
    ($(#[$doc:meta])* $vis:vis struct $name:ident -> $ret:ty {
        $($field:ident = $sym:literal : fn($($arg:ty),*);)*
    }) => {
        $(#[$doc])*
        $vis struct $name {
            $(pub $field: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        impl $crate::dl::EntryPoints for $name {
            fn resolve(lib: &$crate::dl::Library) -> std::result::Result<$name, &'static str> {
                $(
                    // SAFETY: the symbol has the prototype this table
                    // declares (checked against the vendor's header by a
                    // test).
                    let $field = unsafe {
                        lib.function::<unsafe extern "C" fn($($arg),*) -> $ret>($sym)
                    }
                    .ok_or($sym)?;
                )*
                Ok($name { $($field,)* })
            }
        }
    };
}
pub(crate) use entry_points;
