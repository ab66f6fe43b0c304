//! A library opened with `dlopen` (through `libloading`): provider plugins
//! (by path) and vendor runtimes (by soname, through the dynamic linker's
//! own search, so that libfi_xpu.so never links a vendor runtime).
use libloading::os::unix::{Library as Lib, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW};
use std::path::Path;

pub struct Library(Lib);

impl Library {
    /// Opens `path`: a path with a `/`, or a soname the dynamic linker
    /// searches for (`LD_LIBRARY_PATH`, the cache, the default directories).
    pub fn open(path: &Path) -> Result<Library, String> {
        // SAFETY: the library's constructors run here, which is the trust
        // the caller established (a checked plugin file, or the system's
        // vendor runtime).
        let lib = unsafe { Lib::open(Some(path), RTLD_NOW | RTLD_LOCAL) };
        lib.map(Library).map_err(|e| match e {
            libloading::Error::DlOpenUnknown => "dlopen failed: unknown error".into(),
            // dlerror's message
            e => format!("dlopen failed: {e}"),
        })
    }

    /// `open` with `RTLD_GLOBAL`: the library's symbols resolve the
    /// libraries loaded after it (an MPI library's plugins).
    pub fn open_global(path: &Path) -> Result<Library, String> {
        // SAFETY: as in `open`.
        let lib = unsafe { Lib::open(Some(path), RTLD_NOW | RTLD_GLOBAL) };
        lib.map(Library).map_err(|e| match e {
            libloading::Error::DlOpenUnknown => String::new(),
            e => e.to_string(),
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

/// Declares a table of a library's entry points that all return `$ret`,
/// and its `resolve`, which looks every one up by its symbol and names the
/// first one missing.
macro_rules! entry_points {
    ($(#[$doc:meta])* $vis:vis struct $name:ident -> $ret:ty {
        $($field:ident = $sym:literal : fn($($arg:ty),*);)*
    }) => {
        $(#[$doc])*
        $vis struct $name {
            $(pub $field: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        impl $name {
            pub fn resolve(lib: &$crate::dl::Library) -> std::result::Result<$name, &'static str> {
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
