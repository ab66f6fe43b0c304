//! Error values: libfabric's positive error numbers, returned negated at the C
//! boundary.
use fi_xpu_abi::errno::*;
use std::ffi::CStr;
use std::fmt;

/// A libfabric error number (positive, e.g. `FI_EINVAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error(pub i32);

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub const INVAL: Error = Error(FI_EINVAL);
    pub const NOMEM: Error = Error(FI_ENOMEM);
    pub const NOSYS: Error = Error(FI_ENOSYS);
    pub const BUSY: Error = Error(FI_EBUSY);
    pub const NODATA: Error = Error(FI_ENODATA);
    pub const OPNOTSUPP: Error = Error(FI_EOPNOTSUPP);
    pub const BADFLAGS: Error = Error(FI_EBADFLAGS);
    pub const TOOSMALL: Error = Error(FI_ETOOSMALL);
    pub const OTHER: Error = Error(FI_EOTHER);

    /// The value a C function returns for this error.
    pub fn code(self) -> i32 {
        -self.0
    }

    /// From a provider's or callback's return value: 0 is success, a negative
    /// value is an error, a positive one is read as a mistaken sign.
    pub fn check(ret: i32) -> Result<()> {
        match ret {
            0 => Ok(()),
            r if r < 0 => Err(Error(-r)),
            r => Err(Error(r)),
        }
    }

    /// From an OS error (errno values are libfabric's).
    pub fn last_os() -> Error {
        Error::from_errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(FI_EOTHER),
        )
    }

    /// An errno as a libfabric code: the standard errnos are libfabric's
    /// own; the kernel's internal ones (512 and up, which a driver's mmap
    /// can leak, e.g. ENOTSUPP 524 for a DMA-BUF that cannot be mapped)
    /// are not, and become -FI_EOPNOTSUPP or -FI_EOTHER.
    pub fn from_errno(errno: i32) -> Error {
        const KERNEL_ENOTSUPP: i32 = 524;
        Error(match errno {
            KERNEL_ENOTSUPP => FI_EOPNOTSUPP,
            e if e >= 512 => FI_EOTHER,
            e => e,
        })
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

/// The text for a (positive or negative) error number, as `fi_strerror` gives.
pub fn strerror(errnum: i32) -> &'static str {
    strerror_c(errnum).to_str().expect("ASCII texts")
}

/// `strerror` as a NUL-terminated string, for the C API.
pub fn strerror_c(errnum: i32) -> &'static CStr {
    match errnum.unsigned_abs() as i32 {
        FI_SUCCESS => c"Success",
        FI_EPERM => c"Operation not permitted",
        FI_ENOENT => c"No such file or directory",
        FI_EINTR => c"Interrupted system call",
        FI_EIO => c"Input/output error",
        FI_E2BIG => c"Argument list too long",
        FI_EBADF => c"Bad file descriptor",
        FI_EAGAIN => c"Resource temporarily unavailable",
        FI_ENOMEM => c"Cannot allocate memory",
        FI_EACCES => c"Permission denied",
        FI_EFAULT => c"Bad address",
        FI_EBUSY => c"Device or resource busy",
        FI_ENODEV => c"No such device",
        FI_EINVAL => c"Invalid argument",
        FI_EMFILE => c"Too many open files",
        FI_ENOSPC => c"No space left on device",
        FI_ENOSYS => c"Function not implemented",
        FI_ENOMSG => c"No message of desired type",
        FI_ENODATA => c"No data available",
        FI_EOVERFLOW => c"Value too large for defined data type",
        FI_EMSGSIZE => c"Message too long",
        FI_ENOPROTOOPT => c"Protocol not available",
        FI_EOPNOTSUPP => c"Operation not supported",
        FI_EADDRINUSE => c"Address already in use",
        FI_EADDRNOTAVAIL => c"Cannot assign requested address",
        FI_ENETDOWN => c"Network is down",
        FI_ENETUNREACH => c"Network is unreachable",
        FI_ECONNABORTED => c"Software caused connection abort",
        FI_ECONNRESET => c"Connection reset by peer",
        FI_ENOBUFS => c"No buffer space available",
        FI_EISCONN => c"Transport endpoint is already connected",
        FI_ENOTCONN => c"Transport endpoint is not connected",
        FI_ESHUTDOWN => c"Cannot send after transport endpoint shutdown",
        FI_ETIMEDOUT => c"Connection timed out",
        FI_ECONNREFUSED => c"Connection refused",
        FI_EHOSTDOWN => c"Host is down",
        FI_EHOSTUNREACH => c"No route to host",
        FI_EALREADY => c"Operation already in progress",
        FI_EINPROGRESS => c"Operation now in progress",
        FI_EREMOTEIO => c"Remote I/O error",
        FI_ECANCELED => c"Operation canceled",
        FI_EKEYREJECTED => c"Key was rejected by service",
        FI_EOTHER => c"Unspecified error",
        FI_ETOOSMALL => c"Provided buffer is too small",
        FI_EOPBADSTATE => c"Operation not permitted in current state",
        FI_EAVAIL => c"Error available",
        FI_EBADFLAGS => c"Flags not supported",
        FI_ENOEQ => c"Missing or unavailable event queue",
        FI_EDOMAIN => c"Invalid resource domain",
        FI_ENOCQ => c"Missing or unavailable completion queue",
        FI_ECRC => c"CRC error",
        FI_ETRUNC => c"Truncation error",
        FI_ENOKEY => c"Required key not available",
        FI_ENOAV => c"Missing or unavailable address vector",
        FI_EOVERRUN => c"Queue has been overrun",
        FI_ENORX => c"Receiver not ready, no receive buffers available",
        _ => c"Unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_internal_errnos_become_libfabric_codes() {
        assert_eq!(Error::from_errno(524), Error::OPNOTSUPP);
        assert_eq!(Error::from_errno(512), Error(FI_EOTHER));
        assert_eq!(Error::from_errno(libc::ENODEV), Error(FI_ENODEV));
    }

    #[test]
    fn sign_and_text() {
        assert_eq!(Error::INVAL.code(), -22);
        assert_eq!(strerror(-FI_EINVAL), "Invalid argument");
        assert_eq!(strerror(FI_EAVAIL), "Error available");
        assert_eq!(strerror(12345), "Unknown error");
        assert_eq!(Error::check(-FI_EBUSY), Err(Error::BUSY));
        assert_eq!(Error::check(0), Ok(()));
    }
}
