//! `dtcast dtypes`: every dtype and what is known of it, from the dtype table.

use std::io::Write;

use dtcast_dtype::{DType, TorchSupport};

use super::args::DtypesArgs;
use super::CmdError;

pub(crate) fn run(args: &DtypesArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    if args.json {
        for dt in DType::ALL {
            writeln!(out, "{}", json(dt))?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "{:<18} {:>4}  {:<17} {:<27} {:<12} {:<8} aliases",
        "dtype", "bits", "category", "float format", "safetensors", "torch"
    )?;
    for dt in DType::ALL {
        let format = dt.float_format().map_or_else(String::new, |f| {
            format!(
                "e{}m{} bias {} max {}",
                f.exponent_bits,
                f.mantissa_bits,
                f.bias,
                compact(f.max_finite)
            )
        });
        writeln!(
            out,
            "{:<18} {:>4}  {:<17} {:<27} {:<12} {:<8} {}",
            dt.name(),
            dt.bits(),
            dt.category().to_string(),
            format,
            dt.safetensors_name().unwrap_or("-"),
            torch(dt),
            aliases(dt).join(", ")
        )?;
    }
    writeln!(
        out,
        "\nAny name may carry a `torch.`, `paddle.` or `np.` prefix; safetensors names are accepted as they are.\n\
         Dtypes under 8 bits are stored packed (two float4 per byte, first in the low nibble).\n\
         torch: `casts` = torch casts it (Torch mode is torch's bytes); `storage` = torch only stores it and\n\
         `-` = not a torch dtype (Torch mode is ml_dtypes' astype for both)."
    )?;
    Ok(())
}

/// A maximum as a reader takes it in: exactly below 10^7 (`448`, `7.5`, `114688`), else seven
/// significant digits (`1.797693e308`, not float64's 309 digits).
fn compact(x: f64) -> String {
    if x < 1e7 {
        x.to_string()
    } else {
        format!("{x:.6e}")
    }
}

fn torch(dt: DType) -> &'static str {
    match dt.torch_support() {
        TorchSupport::Casts => "casts",
        TorchSupport::Storage => "storage",
        TorchSupport::Absent => "-",
    }
}

fn aliases(dt: DType) -> Vec<&'static str> {
    dt.aliases()
        .iter()
        .chain(dt.short_names())
        .copied()
        .collect()
}

fn json(dt: DType) -> String {
    let format = dt.float_format().map(|f| {
        serde_json::json!({
            "exponent_bits": f.exponent_bits,
            "mantissa_bits": f.mantissa_bits,
            "bias": f.bias,
            "max": f.max_finite,
            "min_normal": f.min_normal,
            "has_inf": f.has_inf,
            "signed": f.signed,
        })
    });
    serde_json::json!({
        "name": dt.name(),
        "aliases": aliases(dt),
        "bits": dt.bits(),
        "category": dt.category().to_string(),
        "float_format": format,
        "safetensors": dt.safetensors_name(),
        "torch": torch(dt),
    })
    .to_string()
}
