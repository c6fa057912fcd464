//! `dtcast table`: the promotion table as markdown.

use std::io::Write;

use dtcast_dtype::DType;

use super::args::TableArgs;
use super::CmdError;

pub(crate) fn run(args: &TableArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let policy = super::promote::policy(&args.policy)?;
    // The policy's dtypes (torch's lattice lacks ml_dtypes' float8_e4m3, float6, float4...).
    let dtypes: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|&d| policy.has_dtype(d))
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
            match policy.promote_types(a, b) {
                Ok(dt) => write!(out, " {dt} |")?,
                Err(_) => write!(out, " error |")?,
            }
        }
        writeln!(out)?;
    }
    let note = match policy.name() {
        "torch" => {
            "torch refuses the pair (float8 with another type; uint1/2/4 and uint16/32/64 with a \
             non-floating type; int1/2/4 and float4_e2m1fn_x2, which its table lacks, with another type)"
        }
        _ => {
            "the lattice has no type above both (the 8-, 6- and 4-bit floats and the 1-, 2- and \
             4-bit integers with anything but themselves and bool)"
        }
    };
    writeln!(out, "\n`error`: {note}.")?;
    Ok(())
}
