//! `dtcast table`: the promotion table as markdown.

use std::io::Write;

use dtcast_dtype::{DType, TorchSupport};
use dtcast_promote::{Policy, Torch};

use super::args::TableArgs;
use super::CmdError;

pub(crate) fn run(args: &TableArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let torch = Torch::new(args.default_dtype)?;
    // torch's dtypes: ml_dtypes' (float8_e4m3, float6, float4...) are not in its lattice.
    let dtypes: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|d| d.torch_support() != TorchSupport::Absent)
        .collect();
    write!(out, "| promote_types |")?;
    for dt in &dtypes {
        write!(out, " {dt} |")?;
    }
    write!(out, "\n|---|")?;
    for _ in &dtypes {
        write!(out, "---|")?;
    }
    writeln!(out)?;
    for &a in &dtypes {
        write!(out, "| **{a}** |")?;
        for &b in &dtypes {
            match torch.promote_types(a, b) {
                Ok(dt) => write!(out, " {dt} |")?,
                Err(_) => write!(out, " error |")?,
            }
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "\n`error`: torch refuses the pair (float8 with another type; uint1/2/4 and uint16/32/64 with a \
         non-floating type; int1/2/4 and float4_e2m1fn_x2, which its table lacks, with another type)."
    )?;
    Ok(())
}
