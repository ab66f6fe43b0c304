//! The one error type of fi_xpu: a libfabric error number, held positive
//! and returned negated at the C boundary.
//!
//! The core, the provider SDK and the providers all return
//! `Result<T, Error>`; only the `extern "C"` layers (the core's C API and
//! the SDK's entry points) turn an `Error` into a C return value, with
//! [`Error::code`], and a C return value back into an `Error`, with
//! [`Error::check`] or [`Error::from_code`]. An `Error` cannot be built from
//! a value of the wrong sign: [`Error::new`] refuses one, so the mix of
//! positive and negative codes that plain integers allowed cannot come back.
use crate::errno::*;
use std::ffi::CStr;
use std::fmt;

/// A libfabric error number (positive, e.g. `FI_EINVAL`); never zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error(i32);

/// A result whose error is an [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! errors {
    ($($name:ident = $num:ident, $text:literal;)*) => {
        impl Error {
            $(
                #[doc = concat!("`", stringify!($num), "`.")]
                pub const $name: Error = Error($num);
            )*
        }

        /// The text for a (positive or negative) error number, as
        /// `fi_strerror` gives; "Unknown error" for one libfabric lacks.
        pub fn strerror_c(errnum: i32) -> &'static CStr {
            match errnum.unsigned_abs().min(i32::MAX as u32) as i32 {
                FI_SUCCESS => c"Success",
                $($num => $text,)*
                _ => c"Unknown error",
            }
        }

        /// The libfabric name of an error number (`"FI_EINVAL"`), for
        /// debugging output; `None` for a number libfabric lacks.
        pub fn errno_name(errnum: i32) -> Option<&'static str> {
            match errnum.unsigned_abs().min(i32::MAX as u32) as i32 {
                $($num => Some(stringify!($num)),)*
                _ => None,
            }
        }
    };
}

errors! {
    PERM = FI_EPERM, c"Operation not permitted";
    NOENT = FI_ENOENT, c"No such file or directory";
    INTR = FI_EINTR, c"Interrupted system call";
    IO = FI_EIO, c"Input/output error";
    E2BIG = FI_E2BIG, c"Argument list too long";
    BADF = FI_EBADF, c"Bad file descriptor";
    AGAIN = FI_EAGAIN, c"Resource temporarily unavailable";
    NOMEM = FI_ENOMEM, c"Cannot allocate memory";
    ACCES = FI_EACCES, c"Permission denied";
    FAULT = FI_EFAULT, c"Bad address";
    BUSY = FI_EBUSY, c"Device or resource busy";
    NODEV = FI_ENODEV, c"No such device";
    INVAL = FI_EINVAL, c"Invalid argument";
    MFILE = FI_EMFILE, c"Too many open files";
    NOSPC = FI_ENOSPC, c"No space left on device";
    NOSYS = FI_ENOSYS, c"Function not implemented";
    NOMSG = FI_ENOMSG, c"No message of desired type";
    NODATA = FI_ENODATA, c"No data available";
    OVERFLOW = FI_EOVERFLOW, c"Value too large for defined data type";
    MSGSIZE = FI_EMSGSIZE, c"Message too long";
    NOPROTOOPT = FI_ENOPROTOOPT, c"Protocol not available";
    OPNOTSUPP = FI_EOPNOTSUPP, c"Operation not supported";
    ADDRINUSE = FI_EADDRINUSE, c"Address already in use";
    ADDRNOTAVAIL = FI_EADDRNOTAVAIL, c"Cannot assign requested address";
    NETDOWN = FI_ENETDOWN, c"Network is down";
    NETUNREACH = FI_ENETUNREACH, c"Network is unreachable";
    CONNABORTED = FI_ECONNABORTED, c"Software caused connection abort";
    CONNRESET = FI_ECONNRESET, c"Connection reset by peer";
    NOBUFS = FI_ENOBUFS, c"No buffer space available";
    ISCONN = FI_EISCONN, c"Transport endpoint is already connected";
    NOTCONN = FI_ENOTCONN, c"Transport endpoint is not connected";
    SHUTDOWN = FI_ESHUTDOWN, c"Cannot send after transport endpoint shutdown";
    TIMEDOUT = FI_ETIMEDOUT, c"Connection timed out";
    CONNREFUSED = FI_ECONNREFUSED, c"Connection refused";
    HOSTDOWN = FI_EHOSTDOWN, c"Host is down";
    HOSTUNREACH = FI_EHOSTUNREACH, c"No route to host";
    ALREADY = FI_EALREADY, c"Operation already in progress";
    INPROGRESS = FI_EINPROGRESS, c"Operation now in progress";
    REMOTEIO = FI_EREMOTEIO, c"Remote I/O error";
    CANCELED = FI_ECANCELED, c"Operation canceled";
    KEYREJECTED = FI_EKEYREJECTED, c"Key was rejected by service";
    OTHER = FI_EOTHER, c"Unspecified error";
    TOOSMALL = FI_ETOOSMALL, c"Provided buffer is too small";
    OPBADSTATE = FI_EOPBADSTATE, c"Operation not permitted in current state";
    AVAIL = FI_EAVAIL, c"Error available";
    BADFLAGS = FI_EBADFLAGS, c"Flags not supported";
    NOEQ = FI_ENOEQ, c"Missing or unavailable event queue";
    DOMAIN = FI_EDOMAIN, c"Invalid resource domain";
    NOCQ = FI_ENOCQ, c"Missing or unavailable completion queue";
    CRC = FI_ECRC, c"CRC error";
    TRUNC = FI_ETRUNC, c"Truncation error";
    NOKEY = FI_ENOKEY, c"Required key not available";
    NOAV = FI_ENOAV, c"Missing or unavailable address vector";
    OVERRUN = FI_EOVERRUN, c"Queue has been overrun";
    NORX = FI_ENORX, c"Receiver not ready, no receive buffers available";
}

impl Error {
    /// From a positive error number (`FI_EINVAL`, or an errno). A zero or
    /// negative value is a programming error (a C return value passed where
    /// an error number belongs) and panics; use [`Error::from_code`] for C
    /// return values.
    #[track_caller]
    pub const fn new(errnum: i32) -> Error {
        assert!(errnum > 0, "an error number is positive");
        Error(errnum)
    }

    /// The positive error number (`FI_EINVAL`).
    pub const fn errno(self) -> i32 {
        self.0
    }

    /// The value a C function returns for this error (`-FI_EINVAL`).
    pub const fn code(self) -> i32 {
        -self.0
    }

    /// From a C function's negative return value. A non-negative value is
    /// not an error: it is read as a mistaken sign when positive, and as
    /// `FI_EOTHER` when zero, so that a caller that already knows the call
    /// failed never loses the failure.
    pub const fn from_code(ret: i32) -> Error {
        match ret {
            0 | i32::MIN => Error::OTHER,
            r if r < 0 => Error(-r),
            r => Error(r),
        }
    }

    /// From a C function's return value: 0 is success, anything else an
    /// error (see [`Error::from_code`]).
    pub const fn check(ret: i32) -> Result<()> {
        match ret {
            0 => Ok(()),
            r => Err(Error::from_code(r)),
        }
    }

    /// The C return value of a result: 0, or the negated error number.
    pub fn ret(r: Result<()>) -> i32 {
        match r {
            Ok(()) => 0,
            Err(e) => e.code(),
        }
    }

    /// An errno as a libfabric error: the standard errnos are libfabric's
    /// own; the kernel's internal ones (512 and up, which a driver's mmap
    /// can leak, e.g. ENOTSUPP 524 for a DMA-BUF that cannot be mapped)
    /// are not, and become `FI_EOPNOTSUPP` or `FI_EOTHER`, as does an
    /// impossible zero or negative errno.
    pub const fn from_errno(errno: i32) -> Error {
        const KERNEL_ENOTSUPP: i32 = 524;
        match errno {
            KERNEL_ENOTSUPP => Error::OPNOTSUPP,
            e if e >= 512 || e <= 0 => Error::OTHER,
            e => Error(e),
        }
    }

    /// The calling thread's last OS error.
    pub fn last_os() -> Error {
        std::io::Error::last_os_error().into()
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::from_errno(e.raw_os_error().unwrap_or(FI_EOTHER))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(strerror(self.0))
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match errno_name(self.0) {
            Some(name) => write!(f, "{name}"),
            None => write!(f, "Error({})", self.0),
        }
    }
}

impl std::error::Error for Error {}

/// [`strerror_c`] as a `&str`.
pub fn strerror(errnum: i32) -> &'static str {
    strerror_c(errnum).to_str().unwrap_or("Unknown error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_internal_errnos_become_libfabric_codes() {
        assert_eq!(Error::from_errno(524), Error::OPNOTSUPP);
        assert_eq!(Error::from_errno(512), Error::OTHER);
        assert_eq!(Error::from_errno(0), Error::OTHER);
        assert_eq!(Error::from_errno(19), Error::NODEV);
    }

    #[test]
    fn sign_and_text() {
        assert_eq!(Error::INVAL.code(), -22);
        assert_eq!(Error::INVAL.errno(), 22);
        assert_eq!(strerror(-FI_EINVAL), "Invalid argument");
        assert_eq!(strerror(FI_EAVAIL), "Error available");
        assert_eq!(strerror(12345), "Unknown error");
        assert_eq!(strerror(i32::MIN), "Unknown error");
        assert_eq!(Error::INVAL.to_string(), "Invalid argument");
        assert_eq!(format!("{:?}", Error::CONNRESET), "FI_ECONNRESET");
        assert_eq!(format!("{:?}", Error::new(1234)), "Error(1234)");
    }

    #[test]
    fn c_return_values_convert_once() {
        assert_eq!(Error::check(-FI_EBUSY), Err(Error::BUSY));
        assert_eq!(Error::check(0), Ok(()));
        assert_eq!(Error::check(FI_EBUSY), Err(Error::BUSY));
        assert_eq!(Error::from_code(0), Error::OTHER);
        assert_eq!(Error::from_code(i32::MIN), Error::OTHER);
        assert_eq!(Error::ret(Err(Error::AGAIN)), -FI_EAGAIN);
        assert_eq!(Error::ret(Ok(())), 0);
    }

    #[test]
    #[should_panic(expected = "an error number is positive")]
    fn a_negative_error_number_is_refused() {
        let _ = Error::new(-FI_EINVAL);
    }

    #[test]
    fn every_libfabric_error_has_a_constant_and_a_text() {
        for n in 1..=FI_ENORX {
            if let Some(name) = errno_name(n) {
                assert_ne!(strerror(n), "Unknown error", "{name}");
                assert_eq!(format!("{:?}", Error::new(n)), name);
            }
        }
        assert_eq!(errno_name(FI_EOTHER), Some("FI_EOTHER"));
    }
}
