//! A library opened with `dlopen`: provider plugins (by path) and vendor
//! runtimes (by soname, through the dynamic linker's own search, so that
//! libfi_xpu.so never links a vendor runtime).
use std::ffi::{c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub struct Library(*mut c_void);

// SAFETY: a dlopen handle may be used from any thread (dlsym and dlclose
// are thread-safe).
unsafe impl Send for Library {}
// SAFETY: as above.
unsafe impl Sync for Library {}

impl Library {
    /// Opens `path`: a path with a `/`, or a soname the dynamic linker
    /// searches for (`LD_LIBRARY_PATH`, the cache, the default directories).
    pub fn open(path: &Path) -> Result<Library, String> {
        let cpath = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| "path has a NUL byte".to_string())?;
        // SAFETY: dlopen with a valid C string; the library's constructors
        // run here, which is the trust the caller established (a checked
        // plugin file, or the system's vendor runtime).
        let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("dlopen failed: {}", dlerror()));
        }
        Ok(Library(handle))
    }

    pub fn symbol(&self, name: &str) -> Option<*mut c_void> {
        let cname = CString::new(name).ok()?;
        // SAFETY: self.0 is a live handle from dlopen.
        let sym = unsafe { libc::dlsym(self.0, cname.as_ptr()) };
        (!sym.is_null()).then_some(sym)
    }

    /// Keeps the library mapped for the rest of the process.
    pub fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and nothing from it is kept.
        unsafe { libc::dlclose(self.0) };
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated message.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        return "unknown error".into();
    }
    // SAFETY: see above.
    unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned()
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
                    let p = lib.symbol($sym).ok_or($sym)?;
                    // SAFETY: the symbol has the prototype this table
                    // declares (checked against the vendor's header by a
                    // test).
                    let $field = unsafe {
                        std::mem::transmute::<*mut std::ffi::c_void, unsafe extern "C" fn($($arg),*) -> $ret>(p)
                    };
                )*
                Ok($name { $($field,)* })
            }
        }
    };
}
pub(crate) use entry_points;
