//! Capture filters in tcpdump's language (`--filter 'tcp port 80 and host 10.0.0.2'`),
//! compiled and run by libpcap, the library tcpdump itself uses, loaded only when a
//! filter is asked for: an expression selects exactly the packets `tcpdump -r FILE
//! EXPRESSION` would, with every primitive tcpdump knows, and blackbox builds and runs
//! without libpcap when no filter is given. Owns compiling an expression for each link
//! type a capture holds and testing frames against it; knows nothing of what the frames
//! hold or of what happens to those it lets through.

use super::file::Frame;
use libloading::Library;
use pcap_parser::Linktype;
use std::ffi::{c_char, c_int, c_long, c_uint, c_void, CStr, CString};
use std::sync::{Arc, Mutex};

/// Why a filter cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// libpcap is not installed where the loader looks.
    #[error(
        "--filter needs libpcap, the library tcpdump uses, and none was found ({tried}): \
         install it (Debian and Ubuntu: apt-get install libpcap0.8; Fedora: dnf install \
         libpcap; macOS has it)"
    )]
    NoLibrary {
        /// The names tried.
        tried: String,
    },
    /// libpcap refused the expression.
    #[error("--filter `{expression}`: {reason}")]
    Refused {
        /// The expression.
        expression: String,
        /// libpcap's words.
        reason: String,
    },
}

/// The names libpcap's shared library goes by, most specific first.
const LIBRARY_NAMES: [&str; 5] = [
    "libpcap.so.1",
    "libpcap.so.0.8",
    "libpcap.so",
    "libpcap.A.dylib",
    "libpcap.dylib",
];

/// `struct bpf_program`.
#[repr(C)]
struct BpfProgram {
    length: c_uint,
    instructions: *mut c_void,
}

/// `struct pcap_pkthdr` (its `struct timeval` as two longs, as on every platform
/// libpcap is loaded on here).
#[repr(C)]
struct PacketHeader {
    seconds: c_long,
    microseconds: c_long,
    captured: u32,
    length: u32,
}

type OpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type Compile =
    unsafe extern "C" fn(*mut c_void, *mut BpfProgram, *const c_char, c_int, u32) -> c_int;
type GetError = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type OfflineFilter =
    unsafe extern "C" fn(*const BpfProgram, *const PacketHeader, *const u8) -> c_int;
type FreeCode = unsafe extern "C" fn(*mut BpfProgram);
type Close = unsafe extern "C" fn(*mut c_void);

/// The libpcap functions a filter needs.
struct Pcap {
    open_dead: OpenDead,
    compile: Compile,
    get_error: GetError,
    offline_filter: OfflineFilter,
    free_code: FreeCode,
    close: Close,
    // Last: the functions above point into it.
    _library: Library,
}

impl Pcap {
    fn load() -> Result<Pcap, FilterError> {
        for name in LIBRARY_NAMES {
            // SAFETY: loading libpcap runs its initialisers, which have no preconditions.
            let Ok(library) = (unsafe { Library::new(name) }) else {
                continue;
            };
            // SAFETY: each symbol is given the type libpcap's pcap.h declares for it.
            let functions = unsafe {
                (|| {
                    Ok::<_, libloading::Error>(Pcap {
                        open_dead: *library.get::<OpenDead>(b"pcap_open_dead\0")?,
                        compile: *library.get::<Compile>(b"pcap_compile\0")?,
                        get_error: *library.get::<GetError>(b"pcap_geterr\0")?,
                        offline_filter: *library.get::<OfflineFilter>(b"pcap_offline_filter\0")?,
                        free_code: *library.get::<FreeCode>(b"pcap_freecode\0")?,
                        close: *library.get::<Close>(b"pcap_close\0")?,
                        _library: library,
                    })
                })()
            };
            if let Ok(functions) = functions {
                return Ok(functions);
            }
        }
        Err(FilterError::NoLibrary {
            tried: LIBRARY_NAMES.join(", "),
        })
    }
}

/// A capture filter: its expression, checked, and the library that runs it. Cheap to
/// clone; each reading thread compiles its own [`FilterPrograms`].
#[derive(Clone)]
pub struct PacketFilter {
    expression: String,
    pcap: Arc<Pcap>,
}

impl std::fmt::Debug for PacketFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PacketFilter")
            .field(&self.expression)
            .finish()
    }
}

// Sent to the other processes of a cluster as its expression, compiled again there.
impl serde::Serialize for PacketFilter {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.expression)
    }
}

impl<'de> serde::Deserialize<'de> for PacketFilter {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let expression = <String as serde::Deserialize>::deserialize(deserializer)?;
        PacketFilter::new(&expression).map_err(serde::de::Error::custom)
    }
}

/// The link types as libpcap's `pcap_open_dead` takes them (DLT_ values), where they
/// differ from the LINKTYPE_ values files hold.
fn dlt(linktype: Linktype) -> c_int {
    match linktype {
        // LINKTYPE_RAW: DLT_RAW, which is 12 on Linux and macOS.
        Linktype(101) => 12,
        other => other.0,
    }
}

/// pcap_compile is not thread-safe in older libpcaps (before 1.8): one at a time.
static COMPILING: Mutex<()> = Mutex::new(());

impl PacketFilter {
    /// Loads libpcap and checks `expression` by compiling it for Ethernet.
    pub fn new(expression: &str) -> Result<PacketFilter, FilterError> {
        let filter = PacketFilter {
            expression: expression.to_string(),
            pcap: Arc::new(Pcap::load()?),
        };
        filter.compile(Linktype::ETHERNET)?;
        Ok(filter)
    }

    /// The expression, as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    fn compile(&self, linktype: Linktype) -> Result<Program, FilterError> {
        let refused = |reason: String| FilterError::Refused {
            expression: self.expression.clone(),
            reason,
        };
        let text = CString::new(self.expression.as_str())
            .map_err(|_| refused("holds a NUL byte".into()))?;
        let _one_at_a_time = COMPILING.lock().unwrap_or_else(|e| e.into_inner());
        let pcap = &self.pcap;
        // SAFETY: pcap_open_dead takes any link type and snapshot length; it returns
        // null only when out of memory.
        let handle = unsafe { (pcap.open_dead)(dlt(linktype), 262_144) };
        if handle.is_null() {
            return Err(refused("libpcap could not open a handle".into()));
        }
        let mut code = Box::new(BpfProgram {
            length: 0,
            instructions: std::ptr::null_mut(),
        });
        // PCAP_NETMASK_UNKNOWN: `ip broadcast` is then refused, as tcpdump -r does.
        const NETMASK_UNKNOWN: u32 = 0xffff_ffff;
        // SAFETY: handle is live, code points to a bpf_program, text is NUL-terminated.
        let compiled =
            unsafe { (pcap.compile)(handle, &mut *code, text.as_ptr(), 1, NETMASK_UNKNOWN) };
        if compiled != 0 {
            // SAFETY: pcap_geterr returns the handle's NUL-terminated message, read
            // before the handle is closed.
            let reason = unsafe { CStr::from_ptr((pcap.get_error)(handle)) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: the handle is closed once, and not used after.
            unsafe { (pcap.close)(handle) };
            return Err(refused(reason));
        }
        Ok(Program {
            code,
            handle,
            pcap: Arc::clone(&self.pcap),
        })
    }

    /// Programs for one reading thread, compiled for each link type as frames of it
    /// come.
    pub fn programs(&self) -> FilterPrograms<'_> {
        FilterPrograms {
            filter: self,
            by_linktype: Vec::new(),
        }
    }
}

/// A compiled filter for one link type.
struct Program {
    code: Box<BpfProgram>,
    handle: *mut c_void,
    pcap: Arc<Pcap>,
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: code was filled by pcap_compile and handle opened by pcap_open_dead;
        // each is freed once, here.
        unsafe {
            (self.pcap.free_code)(&mut *self.code);
            (self.pcap.close)(self.handle);
        }
    }
}

/// The filter compiled for the link types of one capture's frames.
pub struct FilterPrograms<'f> {
    filter: &'f PacketFilter,
    by_linktype: Vec<(Linktype, Result<Program, String>)>,
}

impl FilterPrograms<'_> {
    /// Whether `frame` passes the filter: `Err` with libpcap's words where the
    /// expression means nothing for the frame's link type (`ether host` on raw IP).
    pub fn passes(&mut self, frame: &Frame<'_>) -> Result<bool, &str> {
        let index = match (self.by_linktype.iter()).position(|(l, _)| *l == frame.linktype) {
            Some(index) => index,
            None => {
                let program = (self.filter.compile(frame.linktype)).map_err(|e| match e {
                    FilterError::Refused { reason, .. } => reason,
                    other => other.to_string(),
                });
                self.by_linktype.push((frame.linktype, program));
                self.by_linktype.len() - 1
            }
        };
        let program = match &self.by_linktype[index].1 {
            Ok(program) => program,
            Err(reason) => return Err(reason),
        };
        let header = PacketHeader {
            seconds: 0,
            microseconds: 0,
            captured: u32::try_from(frame.data.len()).unwrap_or(u32::MAX),
            length: frame
                .wire_len
                .max(u32::try_from(frame.data.len()).unwrap_or(u32::MAX)),
        };
        // SAFETY: the program is compiled; the header's captured length is the data's.
        let passed =
            unsafe { (program.pcap.offline_filter)(&*program.code, &header, frame.data.as_ptr()) };
        Ok(passed != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame of an IPv4 TCP segment from 10.0.0.1:40000 to 10.0.0.2:`port`.
    fn tcp_frame(port: u16) -> Vec<u8> {
        let builder = etherparse::PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40000, port, 1, 1000);
        let mut frame = Vec::new();
        builder
            .write(&mut frame, b"GET / HTTP/1.1\r\n\r\n")
            .unwrap();
        frame
    }

    fn libpcap_or_skip() -> bool {
        match Pcap::load() {
            Ok(_) => true,
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "{e}");
                eprintln!("skipped: {e}");
                false
            }
        }
    }

    #[test]
    fn a_filter_selects_the_packets_tcpdump_would() {
        if !libpcap_or_skip() {
            return;
        }
        let filter = PacketFilter::new("tcp dst port 80 and not host 10.9.9.9").unwrap();
        let mut programs = filter.programs();
        let (web, other) = (tcp_frame(80), tcp_frame(8080));
        assert_eq!(
            programs.passes(&Frame::bare(Linktype::ETHERNET, &web)),
            Ok(true)
        );
        assert_eq!(
            programs.passes(&Frame::bare(Linktype::ETHERNET, &other)),
            Ok(false)
        );
        // The same packet without its Ethernet header, in a raw-IP capture.
        assert_eq!(
            programs.passes(&Frame::bare(Linktype(101), &web[14..])),
            Ok(true)
        );
        // A frame cut to its headers is still judged by them.
        assert_eq!(
            programs.passes(&Frame::bare(Linktype::ETHERNET, &web[..54])),
            Ok(true)
        );
    }

    #[test]
    fn an_expression_libpcap_refuses_is_told_in_its_words() {
        if !libpcap_or_skip() {
            return;
        }
        let error = PacketFilter::new("tcp prot 80").unwrap_err().to_string();
        assert!(error.starts_with("--filter `tcp prot 80`: "), "{error}");
        assert!(error.contains("syntax error"), "{error}");
        // Meaningful for Ethernet, not for raw IP: said per frame, not at the start.
        let filter = PacketFilter::new("ether host 01:02:03:04:05:06").unwrap();
        let frame = tcp_frame(80);
        let mut programs = filter.programs();
        let refused = programs.passes(&Frame::bare(Linktype(101), &frame[14..]));
        assert!(refused.is_err(), "{refused:?}");
    }
}
