//! `Device`: where a tensor's bytes live, parsed with PyTorch's grammar.

use core::fmt;
use core::str::FromStr;

/// A device: the CPU, or a CUDA GPU — with torch's optional index.
///
/// Parsed and printed with torch's grammar: `cpu`, `cpu:0`, `cuda`, `cuda:1`, each printed as
/// written (torch keeps `cuda` without an index, meaning the current CUDA device, and keeps an
/// index on the CPU), plus Paddle's `gpu` / `gpu:N` for CUDA. An index-less CUDA device resolves
/// to the current device when used ([`resolve_device`](crate::resolve_device): 0 unless
/// [`set_current_cuda_device`](crate::set_current_cuda_device) chose another); tensors report
/// resolved devices (`cpu`, `cuda:N`), as torch's do. Ordinals above 127 are refused — torch
/// stores them in an `int8` and silently wraps `cuda:300` to `cuda:44`.
///
/// ```
/// use dtcast_device::Device;
/// assert_eq!("cuda:1".parse(), Ok(Device::Cuda(1)));
/// assert_eq!("cuda".parse(), Ok(Device::CudaCurrent));
/// assert_eq!("cuda".parse::<Device>().unwrap().to_string(), "cuda");
/// assert_eq!("cpu:0".parse::<Device>().unwrap().to_string(), "cpu:0");
/// assert_eq!("gpu:2".parse::<Device>().unwrap().to_string(), "cuda:2");
/// assert_eq!("gpu".parse(), Ok(Device::CudaCurrent));
/// assert_eq!("cpu".parse(), Ok(Device::Cpu));
/// assert_ne!(Device::CudaCurrent, Device::Cuda(0)); // as torch.device("cuda") != "cuda:0"
/// assert!("cuda:01".parse::<Device>().is_err());
/// assert!("mps".parse::<Device>().unwrap_err().to_string().contains("not supported by dtcast"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// Host memory (`cpu`).
    #[default]
    Cpu,
    /// A CUDA device by ordinal (`cuda:N`).
    Cuda(u8),
    /// `cuda` without an index: the current CUDA device, resolved when used.
    CudaCurrent,
    /// `cpu:N`: the host, with the index torch keeps when one is written (the same memory as
    /// [`Device::Cpu`]; tensors there report `cpu`).
    CpuIndexed(u8),
}

/// The largest ordinal torch can represent (its `DeviceIndex` is an `int8`).
pub const MAX_ORDINAL: u32 = 127;

/// torch's device types, in the order its error message lists them.
const TORCH_TYPES: [&str; 20] = [
    "cpu",
    "cuda",
    "ipu",
    "xpu",
    "mkldnn",
    "opengl",
    "opencl",
    "ideep",
    "hip",
    "ve",
    "fpga",
    "maia",
    "xla",
    "lazy",
    "vulkan",
    "mps",
    "meta",
    "hpu",
    "mtia",
    "privateuseone",
];

/// Why a device string was refused.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseDeviceError {
    /// The empty string (torch: `Device string must not be empty`).
    Empty,
    /// Not `type` or `type:index` (torch: `Invalid device string: '<s>'`).
    Invalid(String),
    /// A device type torch knows that dtcast has no backend for (`mps`, `xpu`, `meta`, ...).
    Unsupported {
        /// The device type.
        kind: String,
        /// The whole string.
        input: String,
    },
    /// A device type nobody knows.
    UnknownType {
        /// The device type.
        kind: String,
    },
    /// An ordinal that torch could not represent.
    OrdinalOutOfRange {
        /// The index as written.
        index: String,
        /// The whole string.
        input: String,
    },
}

impl fmt::Display for ParseDeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseDeviceError::Empty => f.write_str("Device string must not be empty"),
            ParseDeviceError::Invalid(s) => {
                write!(f, "Invalid device string: '{s}' (expected `cpu`, `cuda`, `cuda:N` or `gpu:N`)")
            }
            ParseDeviceError::Unsupported { kind, input } => write!(
                f,
                "device type '{kind}' (in '{input}') is not supported by dtcast; supported: cpu, cuda, gpu"
            ),
            ParseDeviceError::UnknownType { kind } => write!(
                f,
                "Expected one of {}, gpu device type at start of device string: {kind}",
                TORCH_TYPES.join(", ")
            ),
            ParseDeviceError::OrdinalOutOfRange { index, input } => write!(
                f,
                "device index {index} in '{input}' is out of range: ordinals go from 0 to {MAX_ORDINAL}"
            ),
        }
    }
}

impl std::error::Error for ParseDeviceError {}

impl FromStr for Device {
    type Err = ParseDeviceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(ParseDeviceError::Empty);
        }
        // torch's grammar: ([a-zA-Z_]+)(?::([1-9]\d*|0))?
        let (kind, index) = match s.split_once(':') {
            Some((k, i)) => (k, Some(i)),
            None => (s, None),
        };
        let kind_ok =
            !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_');
        let index_ok = index.is_none_or(|i| {
            !i.is_empty()
                && i.bytes().all(|b| b.is_ascii_digit())
                && (i == "0" || !i.starts_with('0'))
        });
        if !kind_ok || !index_ok {
            return Err(ParseDeviceError::Invalid(s.to_owned()));
        }
        let ordinal = match index {
            None => None,
            Some(i) => match i.parse::<u32>() {
                Ok(n) if n <= MAX_ORDINAL => Some(n as u8),
                _ => {
                    return Err(ParseDeviceError::OrdinalOutOfRange {
                        index: i.to_owned(),
                        input: s.to_owned(),
                    })
                }
            },
        };
        match (kind, ordinal) {
            ("cpu", None) => Ok(Device::Cpu),
            ("cpu", Some(n)) => Ok(Device::CpuIndexed(n)),
            ("cuda" | "gpu", None) => Ok(Device::CudaCurrent),
            ("cuda" | "gpu", Some(n)) => Ok(Device::Cuda(n)),
            (k, _) if TORCH_TYPES.contains(&k) => Err(ParseDeviceError::Unsupported {
                kind: k.to_owned(),
                input: s.to_owned(),
            }),
            (k, _) => Err(ParseDeviceError::UnknownType { kind: k.to_owned() }),
        }
    }
}

impl fmt::Display for Device {
    /// torch's string: `cpu`, `cpu:N`, `cuda`, `cuda:N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index() {
            None => f.pad(self.type_name()),
            Some(n) => f.pad(&format!("{}:{n}", self.type_name())),
        }
    }
}

impl Device {
    /// `true` for CUDA devices (with or without an index).
    pub fn is_cuda(self) -> bool {
        self.type_name() == "cuda"
    }

    /// `true` for the host (`cpu`, `cpu:N`).
    pub fn is_cpu(self) -> bool {
        self.type_name() == "cpu"
    }

    /// The device type, as torch's `device.type`: `cpu` or `cuda`.
    pub fn type_name(self) -> &'static str {
        match self {
            Device::Cpu | Device::CpuIndexed(_) => "cpu",
            Device::Cuda(_) | Device::CudaCurrent => "cuda",
        }
    }

    /// The index as written, as torch's `device.index`: `None` for `cpu` and `cuda`.
    pub fn index(self) -> Option<u8> {
        match self {
            Device::Cpu | Device::CudaCurrent => None,
            Device::Cuda(n) | Device::CpuIndexed(n) => Some(n),
        }
    }
}
